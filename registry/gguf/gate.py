"""The GGUF gate: llama.cpp (through ``llama-cpp-python``) loads the file and runs the gate's fixed
prompts; its logits at every position are compared with our fp32 reference runtime on the source
weights (:class:`registry.gate.runtime.Rwkv7`: the base, the full entry, or the adapter merged).

Figures, per file type: NMSE, ``Σ(llama − ref)² / Σ ref²`` over every position and token of a
prompt (the worst prompt), and top-1 agreement, the share of positions where both pick the same
next token.  Also: llama.cpp's tokenizer gives the ``rwkv`` package's ids for the prompts, and every
logit is finite.  The bounds (:data:`BOUNDS`) are measured on real-shaped random checkpoints
(bench/bench_gguf.py, docs/benchmarks.md says how and why): the unquantized types sit orders
of magnitude under llama.cpp's own model-conversion check (NMSE < 1e-2), the quantized ones each
under a bound a few times their measured worst, far from what a wrong mapping gives (NMSE ≈ 1).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from .. import __version__
from ..gate.kernel import kernel_source_hash
from ..gate.prompts import PROMPTS, tokenizer
from ..gate.receipt import CheckResult, Environment, Receipt, Timings
from ..gate.runtime import Rwkv7
from .llama import LlamaFailed, LlamaRun, logits

# type → (largest NMSE, smallest top-1 agreement) a GGUF of that type passes with, at a depth of
# up to REFERENCE_DEPTH layers: measured worst on random real-shaped checkpoints (docs/benchmarks.md,
# bench/bench_gguf.py) times a margin; a wrong mapping gives NMSE of order 1e-2 to 1 (tests/test_gguf.py
# plants three).  Deeper models get the NMSE bound scaled by depth (:func:`bounds`).
BOUNDS: dict[str, tuple[float, float]] = {
    "f16": (1e-5, 0.9),
    "bf16": (1e-4, 0.85),
    "q8_0": (2e-3, 0.8),
    "q6_k": (1e-2, 0.7),
    "q5_k_m": (5e-2, 0.55),
    "q4_k_m": (1e-1, 0.35),
}
REFERENCE_DEPTH = 4


def bounds(gguf_type: str, n_layer: int) -> tuple[float, float]:
    """The bounds a GGUF of ``n_layer`` layers passes with.  Each layer adds its own rounding error
    to the residual stream, so the logits' NMSE grows with depth, not width: on the device, the
    7.2B width (4096) at 4 and at 32 layers gave q8_0 3.8e-4 and 2.3e-3 (×6.0), bf16 1.4e-5 and
    1.2e-4 (×8.3), where widths 256 and 4096 at 4 layers differ by less than 1.2× (docs/gpu-gate.md).
    So the NMSE bound scales linearly past REFERENCE_DEPTH layers; top-1 agreement does not."""
    max_nmse, min_top1 = BOUNDS[gguf_type]
    return max_nmse * max(1.0, n_layer / REFERENCE_DEPTH), min_top1


def reference_logits(tensors: Mapping[str, torch.Tensor], prompts: Mapping[str, list[int]]) -> dict[str, np.ndarray]:
    """Our fp32 runtime's logits at every position of each prompt."""
    model = Rwkv7(tensors, dtype=torch.float32, device="cpu")
    return {name: model.forward(ids, full_output=True)[0].float().numpy() for name, ids in prompts.items()}


def nmse(got: np.ndarray, want: np.ndarray) -> float:
    want64 = want.astype(np.float64)
    return float(((got.astype(np.float64) - want64) ** 2).sum() / max((want64**2).sum(), 1e-30))


def top1(got: np.ndarray, want: np.ndarray) -> float:
    return float((got.argmax(-1) == want.argmax(-1)).mean())


def checks(
    gguf_type: str,
    run: LlamaRun,
    reference: Mapping[str, np.ndarray],
    prompt_ids: Mapping[str, list[int]],
    n_layer: int,
) -> list[CheckResult]:
    """The gate's verdicts on one GGUF of an ``n_layer`` model (see the module docstring)."""
    max_nmse, min_top1 = bounds(gguf_type, n_layer)
    figures: dict[str, float | int | str | bool | None] = {}
    for name, want in reference.items():
        got = run.logits[name]
        figures[f"{name}.nmse"] = nmse(got, want) if got.shape == want.shape else float("inf")
        figures[f"{name}.top1"] = top1(got, want) if got.shape == want.shape else 0.0
    worst_nmse = max(float(v) for k, v in figures.items() if k.endswith(".nmse"))  # type: ignore[arg-type]
    worst_top1 = min(float(v) for k, v in figures.items() if k.endswith(".top1"))  # type: ignore[arg-type]
    figures.update(nmse=worst_nmse, top1_agreement=worst_top1)
    logits = CheckResult(
        name="gguf-logits",
        passed=worst_nmse <= max_nmse and worst_top1 >= min_top1,
        figures=figures,
        thresholds={"nmse_max": max_nmse, "top1_min": min_top1},
        detail="llama.cpp's logits at every position of the fixed prompts vs our fp32 reference of the source "
        f"({gguf_type})",
    )
    same_ids = {name: run.token_ids[name] == list(ids) for name, ids in prompt_ids.items()}
    tokens = CheckResult(
        name="gguf-tokenizer",
        passed=all(same_ids.values()),
        figures={f"{name}.same_ids": same for name, same in same_ids.items()},
        detail="llama.cpp's rwkv tokenizer gives the rwkv package's ids for the prompts",
    )
    finite = CheckResult(
        name="finite-logits",
        passed=all(bool(np.isfinite(v).all()) for v in run.logits.values()),
        detail="every logit llama.cpp gave is finite",
    )
    return [logits, tokens, finite]


def gate_gguf(
    path: Path,
    rel: str,
    sha256: str,
    gguf_type: str,
    method: Literal["full", "miss"],
    base_sha256: str,
    files: dict[str, str],
    reference: Mapping[str, np.ndarray],
    n_layer: int,
    lossless: tuple[Path, str] | None = None,
) -> Receipt:
    """Run the GGUF at ``path`` (registered as ``rel`` with ``sha256``) through llama.cpp and judge
    it against ``reference`` (:func:`reference_logits` of its source, an ``n_layer`` model).  A k-quant's ``lossless``
    GGUF (the file it was quantized from, and the type whose bound holds it) is judged too, as
    check ``gguf-lossless-logits``: a wrong mapping shows there by orders of magnitude, where
    the k-quant's own bound is loose enough to hide it."""

    start = time.perf_counter()
    prompt_ids = tokenizer().prompt_ids
    try:
        run = logits(path, prompt_ids, PROMPTS)
        result = checks(gguf_type, run, reference, prompt_ids, n_layer)
        if lossless is not None:
            before = checks(lossless[1], logits(lossless[0], prompt_ids, PROMPTS), reference, prompt_ids, n_layer)[0]
            result.append(
                before.model_copy(
                    update={
                        "name": "gguf-lossless-logits",
                        "detail": f"the lossless {lossless[1]} GGUF the quantizer read, against the same reference",
                    }
                )
            )
    except LlamaFailed as exc:
        run = LlamaRun({}, {}, time.perf_counter() - start, 0.0, 0.0)
        result = [CheckResult(name="gguf-load", passed=False, detail=str(exc))]
    environment = Environment(
        device="cpu",
        torch=torch.__version__,
        rwkv=version("rwkv"),
        python=platform.python_version(),
        registry=__version__,
        kernel_source_hash=kernel_source_hash(),
    )
    timings = Timings(
        load_s=round(run.load_s, 3),
        prefill_tokens_per_s=round(run.prefill_tokens_per_s, 1),
        decode_tokens_per_s=round(run.decode_tokens_per_s, 1),
        total_s=round(time.perf_counter() - start, 3),
    )
    return Receipt(
        entry=rel,
        method=method,
        file_sha256=sha256,
        files=files,
        base_sha256=base_sha256,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        environment=environment,
        checks=result,
        timings=timings,
        passed=all(c.passed for c in result),
    )
