"""Weight files read without running them: the RWKV-7 checkpoint's vocabulary (:mod:`.rwkv7`: key
names, head size, a model's shape), what a ``.pth`` or safetensors file is and whether it
fits its base (:mod:`.inspect`, :mod:`.accept`), MiSS adapters (:mod:`.miss`), dtypes and shapes,
safetensors headers, the torch-free ``.pth`` reader, signatures, twins, and the synthetic RWKV-7
checkpoints the tests and the demo build.

``__all__`` names the modules other packages import; importing the package imports none of them.
"""

__all__ = [
    "accept",
    "dtypes",
    "inspect",
    "miss",
    "rwkv7",
    "safetensors_header",
    "shapes",
    "signature",
    "synthetic",
    "twins",
]
