"""llama.cpp (through ``llama-cpp-python``), run in a child process: the gate's logits and the
k-quant quantizer.

llama.cpp is native code: if it dies (a SIGSEGV inside ``libggml``, a SIGILL from a kernel the CPU
does not have) it takes its process with it.  So the command never loads it: each use starts
``python -m registry.gguf.llama TASK DIR``, hands it a request in ``DIR/request.json`` and reads
its answer from ``DIR`` (``logits.npz`` and ``answer.json``).  A child that dies of a signal or
exits nonzero becomes :class:`LlamaFailed`, one line naming what happened; the command goes on to
refuse the file with the usual error, and the registry is untouched.  The child imports neither
torch nor the rest of the registry's weight code: llama.cpp's OpenMP runtime and torch's are
never in one process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REQUEST, ANSWER, LOGITS = "request.json", "answer.json", "logits.npz"


class LlamaFailed(Exception):
    """The child running llama.cpp died or refused; ``str()`` is one line saying how."""


@dataclass
class LlamaRun:
    logits: dict[str, np.ndarray]  # prompt → [T, V] float32
    token_ids: dict[str, list[int]]  # llama.cpp's own tokenization of each prompt's text
    load_s: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float


def threads() -> int:
    """llama.cpp's threads: the cores this process may use, at most 8, or fewer where
    ``OMP_NUM_THREADS`` asks for fewer (as it does of torch's pool)."""
    cores = len(os.sched_getaffinity(0))
    asked = os.environ.get("OMP_NUM_THREADS", "")
    if asked.isdigit() and int(asked) > 0:
        cores = min(cores, int(asked))
    return min(8, cores)


def _run_child(task: str, request: Mapping[str, Any], work: Path) -> dict[str, Any]:
    (work / REQUEST).write_text(json.dumps(request))
    command = [sys.executable, "-B", "-m", __name__, task, str(work)]
    proc = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        raise LlamaFailed(f"llama.cpp died of {name} ({task}, llama-cpp-python in a child process)")
    if proc.returncode != 0 or not (work / ANSWER).is_file():
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise LlamaFailed(last)
    answer: dict[str, Any] = json.loads((work / ANSWER).read_text())
    return answer


def logits(path: Path, prompts: Mapping[str, list[int]], texts: Mapping[str, str], decode_steps: int = 8) -> LlamaRun:
    """Every position's logits of each prompt (ids) as llama.cpp computes them on CPU, each prompt
    from a fresh state, and llama.cpp's tokenization of each prompt's text."""
    with tempfile.TemporaryDirectory(prefix="registry-llama-") as tmp:
        work = Path(tmp)
        request = {
            "path": str(path),
            "prompts": dict(prompts),
            "texts": dict(texts),
            "decode_steps": decode_steps,
            "threads": threads(),
        }
        answer = _run_child("logits", request, work)
        with np.load(work / LOGITS) as arrays:
            got = {name: arrays[f"arr_{i}"] for i, name in enumerate(prompts)}
    return LlamaRun(
        got, answer["token_ids"], answer["load_s"], answer["prefill_tokens_per_s"], answer["decode_tokens_per_s"]
    )


def quantize(lossless: Path, out: Path, ftype: int) -> None:
    """``out``: llama.cpp's quantizer's file of type ``ftype`` (llama.h's LLAMA_FTYPE_*) made from
    the ``lossless`` GGUF (not yet fsynced)."""
    with tempfile.TemporaryDirectory(prefix="registry-llama-") as tmp:
        _run_child(
            "quantize", {"lossless": str(lossless), "out": str(out), "ftype": ftype, "threads": threads()}, Path(tmp)
        )


# ---- the child's side -------------------------------------------------------------------------


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence llama.cpp's own logging (it writes to the process's stdout/stderr from C)."""
    from llama_cpp._utils import suppress_stdout_stderr  # noqa: PLC0415 optional dependency: llama_cpp

    with suppress_stdout_stderr(disable=False):
        yield


@contextmanager
def _without_extra_buffers() -> Iterator[None]:
    """Load with ggml's plain CPU buffers: no AMX or repacked weights (``use_extra_bufts``, which
    ``Llama`` does not expose).  A CPU that reports AMX in a VM that has not enabled it (Firecracker
    here) dies of SIGILL in ggml's AMX kernels; the gate judges the file, with ggml's own kernels."""
    import llama_cpp  # noqa: PLC0415 optional dependency: llama_cpp
    import llama_cpp.llama as module  # noqa: PLC0415 optional dependency: llama_cpp

    default = llama_cpp.llama_model_default_params

    def plain() -> Any:
        params = default()
        params.use_extra_bufts = False
        return params

    module.llama_cpp.llama_model_default_params = plain
    try:
        yield
    finally:
        module.llama_cpp.llama_model_default_params = default


def _child_logits(request: dict[str, Any], work: Path) -> dict[str, Any]:
    from llama_cpp import Llama  # noqa: PLC0415 optional dependency: llama_cpp

    prompts: dict[str, list[int]] = request["prompts"]
    steps: int = request["decode_steps"]
    start = time.perf_counter()
    longest = max(len(ids) for ids in prompts.values())
    try:
        with _without_extra_buffers(), _quiet():
            llm = Llama(
                model_path=request["path"],
                n_ctx=longest + steps + 8,
                n_batch=max(longest, 32),
                logits_all=True,
                n_threads=request["threads"],
                n_gpu_layers=0,
                verbose=False,
            )
    except ValueError as exc:  # llama-cpp-python's word for "llama.cpp would not load the file"
        raise LlamaFailed(f"llama.cpp did not load the file ({exc})") from exc
    load_s = time.perf_counter() - start
    arrays: list[np.ndarray] = []
    token_ids, prefill = {}, 0.0
    try:
        for name, ids in prompts.items():
            llm.reset()  # for a recurrent model this clears its state too
            tick = time.perf_counter()
            llm.eval(ids)
            prefill += time.perf_counter() - tick
            arrays.append(np.array(llm.scores[: len(ids)], dtype=np.float32, copy=True))
            text = request["texts"].get(name)
            token_ids[name] = (
                llm.tokenize(text.encode("utf-8"), add_bos=False, special=False) if text is not None else ids
            )
        tick = time.perf_counter()
        for _ in range(steps):
            llm.eval([int(np.argmax(llm.scores[llm.n_tokens - 1]))])
        decode = time.perf_counter() - tick
    finally:
        llm.close()
    np.savez(work / LOGITS, *arrays)  # arr_0, arr_1, … in the prompts' order
    tokens = sum(len(ids) for ids in prompts.values())
    return {
        "token_ids": token_ids,
        "load_s": load_s,
        "prefill_tokens_per_s": tokens / max(prefill, 1e-9),
        "decode_tokens_per_s": steps / max(decode, 1e-9),
    }


def _child_quantize(request: dict[str, Any], work: Path) -> dict[str, Any]:
    import llama_cpp  # noqa: PLC0415 optional dependency: llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = request["ftype"]
    params.nthread = request["threads"]
    with _quiet():
        failed = llama_cpp.llama_model_quantize(request["lossless"].encode(), request["out"].encode(), params)
    if failed:
        raise LlamaFailed(f"llama.cpp's quantizer returned {failed}")
    return {}


def _child(task: str, work: Path) -> int:
    request = json.loads((work / REQUEST).read_text())
    try:
        answer = {"logits": _child_logits, "quantize": _child_quantize}[task](request, work)
    except LlamaFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    (work / ANSWER).write_text(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], Path(sys.argv[2])))
