"""The GPU smoke-inference gate: the project's RWKV-7 kernel, its reference and a small runtime.

``__all__`` names the modules other packages import; importing the package imports none of them.
"""

__all__ = ["builds", "groups", "kernel", "phases", "prompts", "receipt", "run", "runtime", "seal"]
