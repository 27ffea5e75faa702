"""GGUF files for llama.cpp and Ollama: the RWKV-7 mapping and metadata (pure), the streamed
writer, validate's header checks, and the gate that runs a file through llama.cpp.

``__all__`` names the modules other packages import; importing the package imports none of them.
"""

__all__ = ["check", "files", "inputs", "mapping", "modelfile", "writer"]
