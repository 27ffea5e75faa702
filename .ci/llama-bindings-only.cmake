# Included after each project() of llama-cpp-python's CMake build (CMAKE_PROJECT_INCLUDE in the
# README's test line). llama-cpp-python forces LLAMA_BUILD_COMMON on, but its bindings load only
# libllama and ggml: the common library (argument parsing, chat templates, an HTTP client) is
# linked by llama.cpp's examples, tests and tools alone, which the test line does not build.
# Turned off once llama.cpp's own project() has begun, before its option() reads the cache.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
