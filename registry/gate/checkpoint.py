"""The RWKV-7 gate on a Transformers checkpoint (seed 004's layout, fla's ``RWKV7ForCausalLM`` names).

Its shards are read on the host through the pinned files (hashed while they load, each checked
against what index.json records), and mapped back to the runtime's x070 names in memory
(:func:`registry.hf.tensors.fla_to_x070`, handed in by ``smoke``: the inverse of export-hf's mapping:
views, and no copy on disk).  Then the same checks as a ``.pth`` full entry, on one copy of the
weights on the GPU, as :func:`plan_checkpoint` planned it: our runtime (the kernel's bf16 path on
CUDA, the fp32 reference layer by layer, greedy decoding), then the official ``rwkv`` runtime built
on our runtime's tensors (its ``torch.load`` handed them, :func:`registry.gate.official.load_official`).
Its smoke sample runs in a full fine-tune's default format (:func:`registry.gate.prompts.checkpoint_sample_format`),
and its receipt is made by the one function that makes an entry's (:func:`registry.gate.phases.make_receipt`).

A checkpoint has no base file: its receipt names the checkpoint's own weight index as its base
(``base_sha256``), or the base index.json records for one under ``<base>/full/<v>/``.  Another
architecture never reaches this module: the RWKV-7 gate does not apply to it (``registry smoke``
says so, and nothing records a verdict).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import torch

from ..core.errors import RegistryError
from ..core.libc import release_free_memory
from ..core.models import Checkpoint, Index
from ..core.pinned import check_registered
from .checks import (
    WORLD_VOCAB_SIZE,
    check_decoding,
    check_finite_weights,
    official_logits,
    our_logits,
    prefill_throughput,
    reference_logits,
)
from .loading import ToHash, load_hashed
from .memory import GpuPlan, measure_peak_from_here, plan_gpu, refuse_unless_fits
from .official import load_official
from .phases import Gated, Measured, make_receipt
from .prompts import checkpoint_sample_format, tokenizer
from .receipt import Receipt
from .run import Run, kernel_once
from .runtime import Rwkv7, load_tensors
from .sample import run_sample

# fla's tensors → the runtime's x070 ones, in memory (registry.hf.tensors.fla_to_x070, handed in by smoke)
ToRuntime = Callable[[Mapping[str, torch.Tensor], str], dict[str, torch.Tensor]]


def plan_checkpoint(gpu: tuple[str, int] | None, checkpoint: Checkpoint, index: Index) -> GpuPlan | None:
    """The checkpoint's GPU plan (None on CPU), refused in one line before anything loads when even
    it cannot fit: its shards' bytes held once, beside the working set of its base's recorded
    architecture (a checkpoint under ``<base>/full/<v>/``), else of 15 % of them and the workspace
    (index.json records a root checkpoint's architecture by name, not by its shapes)."""
    if gpu is None:
        return None
    base = index.base_by_sha(checkpoint.base_sha256) if checkpoint.base_sha256 else None
    plan = plan_gpu(*gpu, sum(shard.size for shard in checkpoint.shards), base.architecture if base else None)
    refuse_unless_fits(plan, [checkpoint.path])
    return plan


def gate_checkpoint(run: Run, builds: Sequence[Future[Any]], checkpoint: Checkpoint, to_runtime: ToRuntime) -> Receipt:
    """Run ``checkpoint`` through the kernel and both runtimes, its tensors mapped by ``to_runtime``;
    its receipt (passing or not)."""
    start = time.perf_counter()
    measure_peak_from_here(run.device)
    run.say(f"loading {checkpoint.path} (hashed on the way, mapped to the runtime's names in memory)")
    files = checkpoint.weight_files()
    to_hash = [ToHash(run.opened[rel], run.cache, rel) for rel in files]
    weights, hashed = load_hashed(
        to_hash,
        lambda: to_runtime(load_tensors(run.files / checkpoint.path), checkpoint.path),
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
    tok = tokenizer()
    prompts = tok.prompt_ids
    fmt = checkpoint_sample_format()
    finite_weights = check_finite_weights(weights)
    run.say(f"{checkpoint.path}: our runtime ({run.device}), fp32 reference, greedy decoding, a sample in {fmt.name}")
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
    sample = run_sample(ours, fmt, tok, None)
    run.say(
        f"{checkpoint.path}: sample in {fmt.name}: {sample.tokens} tokens, stop "
        f"text {'seen' if sample.stop_text_seen else 'not seen'} (reported, not a check)"
    )
    del weights  # the host's copy: our runtime holds its own
    run.say(f"{checkpoint.path}: official rwkv runtime, built on our runtime's weights")
    # the official loader reads "<name>.pth": it is handed our runtime's tensors instead (no file is written)
    official = load_official(run.files / f"{checkpoint.path}.pth", run.device, ours.checkpoint())
    theirs = official_logits(official, prompts, None, reference)
    del official, ours
    release_free_memory()
    measured = Measured(mine, reference, fp32_kernel, theirs, decoding, decode_tps, prefill_tps, sample)
    gated = Gated(checkpoint.path, "full", checkpoint.sha256, files, checkpoint.base_sha256 or checkpoint.sha256)
    timed = (setup_s, setup_s, 1, time.perf_counter() - start)
    receipt = make_receipt(run, gated, finite_weights, measured, timed)
    run.say(
        f"{checkpoint.path}: "
        + ("PASSED" if receipt.passed else "FAILED: " + ", ".join(c.name for c in receipt.failed_checks()))
    )
    return receipt
