"""Build, cache and call the project's own RWKV-7 WKV CUDA kernel (``kernels/wkv7_*``).

The gate must run smoke inference through code this project owns and can hash into its
receipts, so the kernel is JIT-built here with ninja (``torch.utils.cpp_extension.load``) rather
than borrowed from the rwkv package.  A build takes tens of seconds, so the shared library is
kept in a cache directory keyed by everything that changes the binary: the kernel sources, the
torch and CUDA versions, the GPU's compute capability and the compiler flags.  A second run with
the same key loads the cached library without compiling.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ..artifacts.rwkv7 import HEAD_SIZE  # the kernel's compile-time N
from ..core.errors import RegistryError
from ..core.hashing.digest import sha256, sha256_hex
from ..core.resources import REINSTALL, kernel_dir, user_cache
from .reference import check_wkv7_args, make_wkv7_inputs, relative_error, wkv7_reference

KERNEL_SOURCES = ("wkv7_fwd.cu", "wkv7_binding.cpp")
CACHE_ENV = "RWKV_REGISTRY_KERNEL_CACHE"
BUILD_LOG = "build.log"
CXX_FLAGS = ("-O3",)
CUDA_FLAGS = ("-O3", "-Xptxas=-O3")
# Max error relative to the reference's largest magnitude.  The state is fp32 either way; bf16
# outputs carry one bf16 rounding (~0.4%) that the fp32 reference output does not.
STATE_TOLERANCE = 1e-5
OUTPUT_TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2}
# (dtype, batch, steps, heads) the GPU tests and the bench check: both dtypes, B > 1, and the
# full size of a 4096-wide model over a long prompt.
PARITY_CASES = (
    (torch.float32, 2, 256, 4),
    (torch.bfloat16, 2, 256, 4),
    (torch.float32, 8, 64, 2),
    (torch.bfloat16, 1, 1024, 64),
)


@dataclass(frozen=True)
class KernelBuild:
    """Where the kernel library lives and what loading it cost."""

    key: str
    directory: Path
    library: Path
    source_hash: str
    cached: bool  # True when nothing was compiled (library found on disk or already loaded)
    seconds: float


_loaded: KernelBuild | None = None  # torch registers the op namespace once per process


def _source_paths(source_dir: Path | None) -> list[Path]:
    directory = Path(source_dir) if source_dir is not None else kernel_dir()
    paths = [directory / name for name in KERNEL_SOURCES]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise RegistryError(
            "gate.kernel-source",
            missing[0],
            "WKV kernel source is missing",
            REINSTALL if source_dir is None else "restore the kernel sources",
        )
    return paths


def kernel_source_hash(source_dir: Path | None = None) -> str:
    """sha256 over the kernel sources (names and bytes), recorded in gate receipts."""
    digest = sha256()
    for path in _source_paths(source_dir):
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def _compute_capability() -> str | None:
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"{major}{minor}"


def _cuda_flags(capability: str | None) -> list[str]:
    # Compile for exactly the GPU in use: it is part of the cache key, and it keeps
    # cpp_extension from compiling for every architecture it knows.
    arch = [f"-gencode=arch=compute_{capability},code=sm_{capability}"] if capability else []
    return [*CUDA_FLAGS, *arch]


def kernel_cache_key(source_dir: Path | None = None) -> str:
    """The cache directory name: changes whenever the compiled library would."""
    capability = _compute_capability()
    material = {
        "sources": kernel_source_hash(source_dir),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "capability": capability,
        "cxx_flags": list(CXX_FLAGS),
        "cuda_flags": _cuda_flags(capability),
    }
    return sha256_hex(json.dumps(material, sort_keys=True).encode())[:24]


def default_cache_root() -> Path:
    """``$RWKV_REGISTRY_KERNEL_CACHE`` or the user cache's ``kernels/``."""
    override = os.environ.get(CACHE_ENV)
    return Path(override) if override else user_cache("kernels")


def _write_build_log(directory: Path, key: str, sources: list[Path], error: BaseException) -> Path:
    log = directory / BUILD_LOG
    header = [
        f"key: {key}",
        f"torch: {torch.__version__} (CUDA {torch.version.cuda})",
        f"capability: {_compute_capability()}",
        f"sources: {', '.join(str(p) for p in sources)}",
        f"error: {type(error).__name__}",
        "",
    ]
    log.write_text("\n".join(header) + str(error) + "\n", encoding="utf-8")
    return log


def _build_failure(log: Path, error: BaseException) -> RegistryError:
    first_line = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
    return RegistryError(
        "gate.kernel-build",
        log,
        f"building the WKV CUDA kernel failed ({first_line[:200]})",
        "read the compiler output in this log; the build needs nvcc matching torch.version.cuda "
        f"({torch.version.cuda}), CUDA_HOME pointing at it, and ninja",
    )


def build_kernel(source_dir: Path | None = None, cache_root: Path | None = None) -> KernelBuild:
    """Compile (or reuse) the kernel library and load its op into this process.

    ``source_dir`` replaces ``kernels/`` (tests point it at a broken copy); ``cache_root``
    replaces :func:`default_cache_root`.  Raises RegistryError naming the build log on failure.
    """
    global _loaded
    key = kernel_cache_key(source_dir)
    if _loaded is not None and _loaded.key == key:
        return replace(_loaded, cached=True, seconds=0.0)

    from torch.utils.cpp_extension import load

    sources = _source_paths(source_dir)
    directory = Path(cache_root if cache_root is not None else default_cache_root()) / key
    directory.mkdir(parents=True, exist_ok=True)
    name = f"rwkv_registry_wkv7_{key}"
    library = directory / f"{name}.so"
    cached = library.is_file()
    start = time.perf_counter()
    try:
        load(
            name=name,
            sources=[str(p) for p in sources],
            extra_cflags=list(CXX_FLAGS),
            extra_cuda_cflags=_cuda_flags(_compute_capability()),
            build_directory=str(directory),
            is_python_module=False,
            verbose=False,
        )
    except Exception as error:  # compiler errors, missing CUDA_HOME/ninja, loader errors alike
        raise _build_failure(_write_build_log(directory, key, sources, error), error) from error
    _loaded = KernelBuild(key, directory, library, kernel_source_hash(source_dir), cached, time.perf_counter() - start)
    return _loaded


def wkv7(
    r: torch.Tensor,
    w: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The WKV recurrence: the CUDA kernel for CUDA tensors, :func:`wkv7_reference` otherwise.

    Inputs ``[B, T, H*64]`` (float32 or bfloat16, contiguous), state ``[B, H, 64, 64]`` float32,
    updated in place; returns ``(y, state)`` with ``y`` in the inputs' dtype.
    """
    if not r.is_cuda:
        return wkv7_reference(r, w, k, v, a, b, state)
    check_wkv7_args(r, w, k, v, a, b, state)
    if state.shape[-1] != HEAD_SIZE:
        raise ValueError(f"wkv7: the CUDA kernel is built for head size {HEAD_SIZE}, got {state.shape[-1]}")
    if _loaded is None:
        build_kernel()
    return torch.ops.rwkv_registry.wkv7_forward(r, w, k, v, a, b, state), state


def parity_check(dtype: torch.dtype, batch: int, steps: int, heads: int, seed: int = 0) -> dict:
    """Kernel vs reference on random, realistically ranged inputs; ``ok`` when within tolerance.

    The reference runs on CPU, where no TF32 setting can lower its precision.
    """
    inputs, state = make_wkv7_inputs(batch, steps, heads, head_size=HEAD_SIZE, dtype=dtype, device="cuda", seed=seed)
    y, final = wkv7(*inputs, state.clone())
    r, w, k, v, a, b = (t.cpu() for t in inputs)
    y_ref, final_ref = wkv7_reference(r, w, k, v, a, b, state.cpu())
    y_err, state_err = relative_error(y, y_ref), relative_error(final, final_ref)
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "batch": batch,
        "steps": steps,
        "heads": heads,
        "y_rel_err": y_err,
        "state_rel_err": state_err,
        "ok": y_err <= OUTPUT_TOLERANCE[dtype] and state_err <= STATE_TOLERANCE,
    }
