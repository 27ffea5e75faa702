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

import os
import platform
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from .. import __version__
from ..gate.kernel import kernel_source_hash
from ..gate.prompts import PROMPTS, tokenizer
from ..gate.receipt import CheckResult, Environment, Receipt, Timings
from ..gate.runtime import Rwkv7
from .writer import suppress_output

# type → (largest NMSE, smallest top-1 agreement) a GGUF of that type passes with: measured worst
# on random real-shaped checkpoints (docs/benchmarks.md, bench/bench_gguf.py) times a margin; a
# wrong mapping gives NMSE of order 1 (tests/test_gguf.py plants three).
BOUNDS: dict[str, tuple[float, float]] = {
    "f16": (1e-5, 0.9),
    "bf16": (1e-4, 0.85),
    "q8_0": (2e-3, 0.8),
    "q6_k": (1e-2, 0.7),
    "q5_k_m": (5e-2, 0.55),
    "q4_k_m": (1e-1, 0.35),
}


@dataclass
class LlamaRun:
    logits: dict[str, np.ndarray]  # prompt → [T, V] float32
    token_ids: dict[str, list[int]]  # llama.cpp's own tokenization of each prompt
    load_s: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float


def _threads() -> int:
    return max(1, min(8, len(os.sched_getaffinity(0))))


@contextmanager
def _without_extra_buffers() -> Iterator[None]:
    """Load with ggml's plain CPU buffers: no AMX or repacked weights (``use_extra_bufts``, which
    ``Llama`` does not expose).  A CPU that reports AMX in a VM that has not enabled it (Firecracker
    here) dies of SIGILL in ggml's AMX kernels; the gate judges the file, with ggml's own kernels."""
    import llama_cpp
    import llama_cpp.llama as module

    default = llama_cpp.llama_model_default_params

    def plain():  # noqa: ANN202
        params = default()
        params.use_extra_bufts = False
        return params

    module.llama_cpp.llama_model_default_params = plain
    try:
        yield
    finally:
        module.llama_cpp.llama_model_default_params = default


def llama_logits(path: Path, prompts: Mapping[str, list[int]], decode_steps: int = 8) -> LlamaRun:
    """Every position's logits of each prompt (ids) as llama.cpp computes them on CPU, each prompt
    from a fresh state."""
    from llama_cpp import Llama

    start = time.perf_counter()
    longest = max(len(ids) for ids in prompts.values())
    with _without_extra_buffers(), suppress_output():
        llm = Llama(model_path=str(path), n_ctx=longest + decode_steps + 8, n_batch=max(longest, 32), logits_all=True, n_threads=_threads(), n_gpu_layers=0, verbose=False)
    load_s = time.perf_counter() - start
    logits, ids_of, prefill, decode = {}, {}, 0.0, 0.0
    try:
        for name, ids in prompts.items():
            llm.reset()  # for a recurrent model this clears its state too
            tick = time.perf_counter()
            llm.eval(ids)
            prefill += time.perf_counter() - tick
            logits[name] = np.array(llm.scores[: len(ids)], dtype=np.float32, copy=True)
            ids_of[name] = llm.tokenize(PROMPTS[name].encode("utf-8"), add_bos=False, special=False) if name in PROMPTS else ids
        tick = time.perf_counter()
        for _ in range(decode_steps):
            llm.eval([int(np.argmax(llm.scores[llm.n_tokens - 1]))])
        decode = time.perf_counter() - tick
    finally:
        llm.close()
    tokens = sum(len(ids) for ids in prompts.values())
    return LlamaRun(logits, ids_of, load_s, tokens / max(prefill, 1e-9), decode_steps / max(decode, 1e-9))


def reference_logits(tensors: Mapping[str, torch.Tensor], prompts: Mapping[str, list[int]]) -> dict[str, np.ndarray]:
    """Our fp32 runtime's logits at every position of each prompt."""
    model = Rwkv7(tensors, dtype=torch.float32, device="cpu")
    return {name: model.forward(ids, full_output=True)[0].float().numpy() for name, ids in prompts.items()}


def nmse(got: np.ndarray, want: np.ndarray) -> float:
    want64 = want.astype(np.float64)
    return float(((got.astype(np.float64) - want64) ** 2).sum() / max((want64**2).sum(), 1e-30))


def top1(got: np.ndarray, want: np.ndarray) -> float:
    return float((got.argmax(-1) == want.argmax(-1)).mean())


def checks(gguf_type: str, run: LlamaRun, reference: Mapping[str, np.ndarray], prompt_ids: Mapping[str, list[int]]) -> list[CheckResult]:
    """The gate's verdicts on one GGUF (see the module docstring)."""
    max_nmse, min_top1 = BOUNDS[gguf_type]
    figures: dict[str, float | int | str | bool | None] = {}
    for name, want in reference.items():
        got = run.logits[name]
        figures[f"{name}.nmse"] = nmse(got, want) if got.shape == want.shape else float("inf")
        figures[f"{name}.top1"] = top1(got, want) if got.shape == want.shape else 0.0
    worst_nmse = max(float(v) for k, v in figures.items() if k.endswith(".nmse"))  # type: ignore[arg-type]
    worst_top1 = min(float(v) for k, v in figures.items() if k.endswith(".top1"))  # type: ignore[arg-type]
    figures.update(nmse=worst_nmse, top1_agreement=worst_top1)
    logits = CheckResult(
        name="gguf-logits", passed=worst_nmse <= max_nmse and worst_top1 >= min_top1, figures=figures,
        thresholds={"nmse_max": max_nmse, "top1_min": min_top1},
        detail=f"llama.cpp's logits at every position of the fixed prompts vs our fp32 reference of the source ({gguf_type})",
    )  # fmt: skip
    same_ids = {name: run.token_ids[name] == list(ids) for name, ids in prompt_ids.items()}
    tokens = CheckResult(
        name="gguf-tokenizer", passed=all(same_ids.values()), figures={f"{name}.same_ids": same for name, same in same_ids.items()},
        detail="llama.cpp's rwkv tokenizer gives the rwkv package's ids for the prompts",
    )  # fmt: skip
    finite = CheckResult(name="finite-logits", passed=all(bool(np.isfinite(v).all()) for v in run.logits.values()), detail="every logit llama.cpp gave is finite")
    return [logits, tokens, finite]


def gate_gguf(
    path: Path, rel: str, sha256: str, gguf_type: str, method: Literal["full", "miss"], base_sha256: str, files: dict[str, str], reference: Mapping[str, np.ndarray],
    lossless: tuple[Path, str] | None = None,
) -> Receipt:
    """Run the GGUF at ``path`` (registered as ``rel`` with ``sha256``) through llama.cpp and judge
    it against ``reference`` (:func:`reference_logits` of its source).  A k-quant's ``lossless``
    GGUF (the file it was quantized from, and the type whose bound holds it) is judged too, as
    check ``gguf-lossless-logits``: a wrong mapping shows there by orders of magnitude, where
    the k-quant's own bound is loose enough to hide it."""
    from importlib.metadata import version

    start = time.perf_counter()
    prompt_ids = tokenizer().prompt_ids
    try:
        run = llama_logits(path, prompt_ids)
    except ValueError as exc:  # llama-cpp-python's word for "llama.cpp would not load the file"
        run = LlamaRun({}, {}, time.perf_counter() - start, 0.0, 0.0)
        result = [CheckResult(name="gguf-load", passed=False, detail=f"llama.cpp did not load the file ({exc})")]
    else:
        result = checks(gguf_type, run, reference, prompt_ids)
        if lossless is not None:
            before = checks(lossless[1], llama_logits(lossless[0], prompt_ids), reference, prompt_ids)[0]
            result.append(before.model_copy(update={"name": "gguf-lossless-logits", "detail": f"the lossless {lossless[1]} GGUF the quantizer read, against the same reference"}))
    environment = Environment(
        device="cpu", torch=torch.__version__, rwkv=version("rwkv"), python=platform.python_version(), registry=__version__,
        kernel_source_hash=kernel_source_hash(),
    )  # fmt: skip
    timings = Timings(
        load_s=round(run.load_s, 3), prefill_tokens_per_s=round(run.prefill_tokens_per_s, 1), decode_tokens_per_s=round(run.decode_tokens_per_s, 1),
        total_s=round(time.perf_counter() - start, 3),
    )  # fmt: skip
    return Receipt(
        entry=rel, method=method, file_sha256=sha256, files=files, base_sha256=base_sha256,
        created=datetime.now(UTC).isoformat(timespec="seconds"), environment=environment, checks=result, timings=timings,
        passed=all(c.passed for c in result),
    )  # fmt: skip
