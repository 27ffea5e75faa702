"""The GPU smoke-inference gate: the project's RWKV-7 kernel, its reference and a small runtime."""
