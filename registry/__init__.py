"""rwkv-registry: a model-artifact registry and release manager for RWKV-7 weights on the Hub."""

__version__ = "0.1.0"
