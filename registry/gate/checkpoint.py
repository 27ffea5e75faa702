"""The RWKV-7 gate on a Transformers checkpoint (seed 004's layout, fla's ``RWKV7ForCausalLM`` names).

Its shards are read through the pinned files (hashed while they load, each checked against what
index.json records), and mapped back to the runtime's x070 names in memory
(:func:`registry.hf.tensors.fla_to_x070`, handed in by ``smoke``: the inverse of export-hf's mapping:
views, and no copy on
disk).  Then the same checks as a ``.pth`` full entry, in the same two phases: our runtime (the
kernel's bf16 path on CUDA, the fp32 reference, greedy decoding), then the official ``rwkv``
runtime built from those tensors (its ``torch.load`` handed them, :func:`registry.gate.official.load_official`).

A checkpoint has no base file: its receipt names the checkpoint's own weight index as its base
(``base_sha256``), or the base index.json records for one under ``<base>/full/<v>/``.  Another
architecture never reaches this module: the RWKV-7 gate does not apply to it (``registry smoke``
says so, and nothing records a verdict).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

import torch

from ..core.errors import RegistryError
from ..core.libc import release_free_memory
from ..core.models import Checkpoint
from ..core.pinned import check_registered
from .checks import (
    WORLD_VOCAB_SIZE,
    check_decoding,
    check_finite_weights,
    finite,
    official_logits,
    our_logits,
    parity_check_of,
    prefill_throughput,
    reference_logits,
)
from .loading import ToHash, load_hashed
from .memory import on_device
from .official import load_official
from .prompts import tokenizer
from .receipt import CheckResult, Receipt, Timings
from .run import Run, kernel_once
from .runtime import Rwkv7, load_tensors

# fla's tensors → the runtime's x070 ones, in memory (registry.hf.tensors.fla_to_x070, handed in by smoke)
ToRuntime = Callable[[Mapping[str, torch.Tensor], str], dict[str, torch.Tensor]]


def gate_checkpoint(run: Run, builds: Sequence[Future[Any]], checkpoint: Checkpoint, to_runtime: ToRuntime) -> Receipt:
    """Run ``checkpoint`` through the kernel and both runtimes, its tensors mapped by ``to_runtime``;
    its receipt (passing or not)."""
    start = time.perf_counter()
    run.say(f"loading {checkpoint.path} (hashed on the way, mapped to the runtime's names in memory)")
    files = checkpoint.weight_files()
    to_hash = [ToHash(run.opened[rel], run.cache, rel) for rel in files]
    weights, hashed = load_hashed(
        to_hash,
        lambda: on_device(run.device, to_runtime(load_tensors(run.files / checkpoint.path), checkpoint.path)),
    )
    for (rel, sha256), result in zip(files.items(), hashed, strict=True):
        check_registered(rel, result.sha256, sha256)
    vocab = weights["emb.weight"].shape[0]
    if vocab < WORLD_VOCAB_SIZE:
        raise RegistryError(
            "gate.vocab",
            checkpoint.path,
            f"the model's vocabulary has {vocab} tokens; "
            f"the gate's prompts need the RWKV world vocabulary ({WORLD_VOCAB_SIZE})",
            "gate models built on the world vocabulary (rwkv_vocab_v20230424)",
        )
    setup_s = time.perf_counter() - start
    kernel_once(run, list(builds))
    assert run.kernel is not None and run.environment is not None
    tok = tokenizer()
    prompts = tok.prompt_ids
    finite_weights = check_finite_weights(weights)
    run.say(f"{checkpoint.path}: our runtime ({run.device}), fp32 reference, greedy decoding")
    ours = Rwkv7(
        weights,
        dtype=torch.bfloat16 if run.device == "cuda" else torch.float32,
        device=run.device,
        wkv="auto",
        source=checkpoint.path,
    )
    mine = our_logits(ours, prompts, None)
    reference, fp32_kernel = reference_logits(ours, mine, prompts, None)
    decoding, decode_tps = check_decoding(ours, prompts, None, tok.decode)
    prefill_tps = prefill_throughput(ours, prompts)
    del ours
    release_free_memory()
    run.say(f"{checkpoint.path}: official rwkv runtime, built from the tensors already loaded")
    # the official loader reads "<name>.pth": it is handed the mapped tensors instead (no file is written)
    official = load_official(run.files / f"{checkpoint.path}.pth", run.device, weights)
    theirs = official_logits(official, prompts, None, reference)
    del official
    kernel_check, kernel_timings = run.kernel
    logit_sets = [mine, theirs, reference, *([fp32_kernel] if fp32_kernel else [])]
    checks = [
        kernel_check,
        finite_weights,
        parity_check_of(mine, theirs, reference, fp32_kernel),
        CheckResult(name="finite-logits", passed=finite(*logit_sets), detail="every logit of every path is finite"),
        decoding,
    ]
    total = time.perf_counter() - start
    timings = Timings(
        kernel_build_s=kernel_timings["kernel_build_s"],
        kernel_cached=kernel_timings["kernel_cached"],
        load_s=round(setup_s, 3),
        prefill_tokens_per_s=round(prefill_tps, 1),
        decode_tokens_per_s=round(decode_tps, 1),
        total_s=round(total, 3),
        setup_s=round(setup_s, 3),
        entries_sharing_setup=1,
        gpu_peak_bytes=torch.cuda.max_memory_allocated() if run.device == "cuda" else None,
    )
    receipt = Receipt(
        entry=checkpoint.path,
        method="full",
        file_sha256=checkpoint.sha256,
        files=files,
        base_sha256=checkpoint.base_sha256 or checkpoint.sha256,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        environment=run.environment,
        checks=checks,
        timings=timings,
        passed=all(c.passed for c in checks),
    )
    run.say(
        f"{checkpoint.path}: "
        + ("PASSED" if receipt.passed else "FAILED: " + ", ".join(c.name for c in receipt.failed_checks()))
    )
    return receipt
