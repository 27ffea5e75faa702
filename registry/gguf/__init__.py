"""GGUF files for llama.cpp and Ollama: the RWKV-7 mapping and metadata (pure), the streamed
writer, validate's header checks, and the gate that runs a file through llama.cpp."""
