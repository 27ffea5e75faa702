"""GPU check of the project's RWKV-7 WKV kernel; prints one JSON document.

    python bench/gpu_kernel_check.py

1. builds the kernel (reporting build seconds and whether the cache served it),
2. runs the kernel-vs-reference parity checks the GPU tests run,
3. times it against the official rwkv package's ``wkv7s`` kernel at T=1024, H=64 (C=4096),
   bf16, B=1 (the only batch size that kernel handles), checking that both agree, and
4. times our kernel at B=1, 2, 4, 8 (tokens/s = B*T / seconds).

The package's kernel is JIT-built from its installed ``cuda/rwkv7*.{cu,cpp}`` with exactly the
flags ``rwkv.model`` uses under RWKV_V7_ON=1 RWKV_CUDA_ON=1; importing ``rwkv.model`` itself
would first build the package's unrelated RWKV-4/5/6 operators.  Both kernels are timed through
their raw torch ops, so neither pays Python argument checks.  Exit status 1 if a check fails.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

import torch  # noqa: E402

from registry.artifacts.rwkv7 import HEAD_SIZE  # noqa: E402
from registry.gate.kernel import (  # noqa: E402
    OUTPUT_TOLERANCE,
    PARITY_CASES,
    STATE_TOLERANCE,
    build_kernel,
    parity_check,
)
from registry.gate.reference import make_wkv7_inputs, relative_error  # noqa: E402

STEPS, HEADS = 1024, 64
BATCHES = (1, 2, 4, 8)
PACKAGE_CUDA_FLAGS = [
    "-res-usage",
    "--use_fast_math",
    "-O3",
    "-Xptxas -O3",
    "--extra-device-vectorization",
    f"-D_N_={HEAD_SIZE}",
]


def cuda_seconds(fn, warmup: int = 3, reps: int = 20) -> float:
    """Median wall time of one fn() call on the GPU, measured with CUDA events."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def build_package_kernel() -> float:
    """JIT-build the rwkv package's wkv7s op; returns build seconds (ImportError if not installed)."""
    spec = importlib.util.find_spec("rwkv")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the rwkv package is not installed")
    cuda_dir = Path(spec.submodule_search_locations[0]) / "cuda"
    from torch.utils.cpp_extension import load

    start = time.perf_counter()
    load(
        name="wkv7s",
        sources=[str(cuda_dir / "rwkv7_op.cpp"), str(cuda_dir / "rwkv7.cu")],
        extra_cuda_cflags=PACKAGE_CUDA_FLAGS,
        is_python_module=False,
        verbose=False,
    )
    return time.perf_counter() - start


def throughput(seconds: float, batch: int) -> dict:
    return {"batch": batch, "ms": round(seconds * 1e3, 4), "tokens_per_s": round(batch * STEPS / seconds)}


def ours_at(batch: int) -> dict:
    inputs, state = make_wkv7_inputs(batch, STEPS, HEADS, dtype=torch.bfloat16, device="cuda", seed=batch)
    op = torch.ops.rwkv_registry.wkv7_forward
    return throughput(cuda_seconds(lambda: op(*inputs, state)), batch)


def against_package() -> dict:
    """Same bf16 inputs and initial state through both kernels: agreement, then speed."""
    build_seconds = build_package_kernel()
    inputs, state = make_wkv7_inputs(1, STEPS, HEADS, dtype=torch.bfloat16, device="cuda", seed=11)
    rows = [t[0] for t in inputs]  # the package takes [T, C]
    package_y = torch.empty_like(rows[0])
    package_state = state[0].clone()

    def package_op():
        torch.ops.wkv7s.forward_bf16(1, STEPS, HEADS * HEAD_SIZE, HEADS, package_state, *rows, package_y)

    our_state = state.clone()
    our_y = torch.ops.rwkv_registry.wkv7_forward(*inputs, our_state)
    package_op()
    agreement = {
        "y_rel_err": relative_error(our_y[0], package_y),
        "state_rel_err": relative_error(our_state[0], package_state),
    }
    agreement["ok"] = (
        agreement["y_rel_err"] <= OUTPUT_TOLERANCE[torch.bfloat16]
        and agreement["state_rel_err"] <= 10 * STATE_TOLERANCE
    )

    package_seconds = cuda_seconds(package_op)
    ours_seconds = cuda_seconds(lambda: torch.ops.rwkv_registry.wkv7_forward(*inputs, our_state))
    return {
        "build_seconds": round(build_seconds, 2),
        "agreement": agreement,
        "package": throughput(package_seconds, 1),
        "ours": throughput(ours_seconds, 1),
        "speedup": round(package_seconds / ours_seconds, 3),
    }


def main() -> int:
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 1
    build = build_kernel()
    report: dict = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "shape": {"T": STEPS, "H": HEADS, "N": HEAD_SIZE, "dtype": "bfloat16"},
        "build": {
            "key": build.key,
            "cached": build.cached,
            "seconds": round(build.seconds, 2),
            "source_hash": build.source_hash,
        },
        "parity": [parity_check(*case, seed=7) for case in PARITY_CASES],
    }
    try:
        report["vs_rwkv_package"] = against_package()
    except Exception as error:  # not installed, or its kernel did not build: still report ours
        report["vs_rwkv_package"] = {"error": f"{type(error).__name__}: {str(error)[-2000:]}"}
    report["batch_scaling"] = [ours_at(batch) for batch in BATCHES]
    print(json.dumps(report, indent=2))
    checks = [p["ok"] for p in report["parity"]] + [report["vs_rwkv_package"].get("agreement", {}).get("ok", True)]
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
