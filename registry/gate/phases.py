"""A group's two phases, so that only one runtime holds the weights at a time.

First our runtime (bf16 kernel path, and the fp32 reference and fp32 kernel path computed layer by
layer from the same stored weights), then the official ``rwkv`` runtime, built from the tensors
already loaded.  A State is an initial state; a MiSS adapter is merged into the runtime's weights
in place, one Linear at a time, and the pristine base bytes are copied back afterwards.  Each
entry's receipt is made once both phases ran it, and handed to the run's ``record``.  Phase one
also runs each entry's smoke sample in its own prompt format (:mod:`registry.gate.sample`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from ..core.errors import RegistryError
from ..core.evaluation import source_of
from ..core.libc import release_free_memory
from ..core.models import Entry, FormatSample
from ..core.pinned import Pinned
from .checks import (
    Logits,
    check_decoding,
    finite,
    official_logits,
    our_logits,
    parity_check_of,
    prefill_throughput,
    reference_logits,
)
from .groups import Group, base_group, entry_files, full_group, full_groups
from .memory import drop_pages, out_of_memory_named
from .official import load_official
from .prepare import Prepared, prepare, same_tensors
from .prompts import SampleFormat, Tokenizer, sample_format, tokenizer
from .receipt import CheckResult, Receipt, Timings
from .run import Run, kernel_once
from .runtime import Rwkv7, merged_weights, patched
from .sample import run_sample


@dataclass
class OursRun:
    """What phase one measured for an entry; phase two adds the official runtime."""

    prepared: Prepared
    ours: Logits
    reference: Logits
    fp32_kernel: Logits | None
    decoding: CheckResult
    decode_tps: float
    prefill_tps: float
    seconds: float
    format: SampleFormat  # the entry's own prompt format, and the sample run in it
    sample: FormatSample
    # Set when this entry's tensors were compared equal to an earlier entry's in this run (a
    # safetensors twin and its .pth): its figures are that run's, as a deterministic function of
    # the same tensors on the same weights.
    same_as: OursRun | None = None


def _merged_into(
    replace: Callable[[str, torch.Tensor], None], group: Group, prepared: Prepared
) -> AbstractContextManager[None]:
    """A MiSS entry's merge, applied to one runtime for the block and undone bit-exactly after."""
    if prepared.entry.method != "miss" or prepared.scale is None:
        return nullcontext()
    return patched(
        replace, group.weights, merged_weights(group.weights, prepared.own, prepared.scale, source=prepared.entry.path)
    )


def _state_file(prepared: Prepared) -> dict[str, torch.Tensor] | None:
    return prepared.own if prepared.entry.method == "state" else None


def _format(run: Run, item: Prepared) -> SampleFormat:
    """The format the entry's sample runs in: its own, or its source's for a safetensors twin."""
    fmt = sample_format(source_of(run.index, item.entry))
    if fmt.unknown_profile:
        run.say(
            f"{item.entry.path}: profile {fmt.unknown_profile!r} has no prompt the gate knows; its sample runs in {fmt.name}"
        )
    return fmt


def _phase_ours(
    run: Run, group: Group, prepared: list[Prepared], prompts: Mapping[str, list[int]], tok: Tokenizer
) -> list[OursRun]:
    dtype = torch.bfloat16 if run.device == "cuda" else torch.float32
    ours = Rwkv7(
        group.weights,
        dtype=dtype,
        device=run.device,
        wkv="auto",
        source=group.entries[0].path,
        copied=drop_pages if group.weights_mapped else None,
    )
    results: list[OursRun] = []
    for item in prepared:
        start = time.perf_counter()
        fmt = _format(run, item)
        earlier = next(
            (r for r in results if r.same_as is None and r.format == fmt and same_tensors(r.prepared, item)),
            None,
        )
        if earlier is not None:
            run.say(
                f"{item.entry.path}: tensors equal to {earlier.prepared.entry.path}'s (compared), its results apply"
            )
            results.append(replace(earlier, prepared=item, seconds=time.perf_counter() - start, same_as=earlier))
            continue
        run.say(
            f"{item.entry.path}: our runtime ({run.device}, {'bf16' if run.device == 'cuda' else 'fp32'}), fp32 reference, greedy decoding, a sample in {fmt.name}"
        )
        with _merged_into(ours.replace_weight, group, item):
            state_file = _state_file(item)
            state = ours.apply_state_file(state_file, source=item.entry.path) if state_file else None
            mine = our_logits(ours, prompts, state)
            reference, fp32_kernel = reference_logits(ours, mine, prompts, state_file)
            decoding, decode_tps = check_decoding(ours, prompts, state, tok.decode)
            prefill_tps = prefill_throughput(ours, prompts)
            sample = run_sample(ours, fmt, tok, state)
        run.say(
            f"{item.entry.path}: sample in {fmt.name}: {sample.tokens} tokens, stop text {'seen' if sample.stop_text_seen else 'not seen'} (reported, not a check)"
        )
        results.append(
            OursRun(
                item,
                mine,
                reference,
                fp32_kernel,
                decoding,
                decode_tps,
                prefill_tps,
                time.perf_counter() - start,
                fmt,
                sample,
            )
        )
        group.drop_pages()  # what restoring a merge read
    del ours
    release_free_memory()
    if run.device == "cuda":
        torch.cuda.empty_cache()
    return results


def _phase_official(run: Run, group: Group, results: list[OursRun], prompts: Mapping[str, list[int]]) -> None:
    start = time.perf_counter()
    run.say(f"official rwkv runtime: building from the loaded weights ({len(results)} entries)")
    official = load_official(
        group.official_checkpoint, run.device, group.official_tensors, drop_pages if group.official_mapped else None
    )
    build_s = time.perf_counter() - start
    computed: dict[str, Logits] = {}  # by the path of the entry that was run
    for result in results:
        item = result.prepared
        start = time.perf_counter()
        if result.same_as is not None:
            theirs = computed[result.same_as.prepared.entry.path]
        else:
            with _merged_into(official.replace_weight, group, item):
                state_file = _state_file(item)
                theirs = official_logits(
                    official, prompts, official.state_from_file(state_file) if state_file else None, result.reference
                )
            computed[item.entry.path] = theirs
        seconds = result.seconds + time.perf_counter() - start + build_s / len(results)
        group.drop_pages()
        receipt = _receipt(run, group, result, theirs, seconds)
        run.say(
            f"{item.entry.path}: {'PASSED' if receipt.passed else 'FAILED: ' + ', '.join(c.name for c in receipt.failed_checks())}"
        )
        run.record(receipt)
        run.receipts.append(receipt)
    del official
    if run.device == "cuda":
        torch.cuda.empty_cache()


def _receipt(run: Run, group: Group, result: OursRun, theirs: Logits, seconds: float) -> Receipt:
    """The entry's receipt: the kernel check, its weights' and logits' checks, and its timings."""
    entry, item = result.prepared.entry, result.prepared
    assert run.kernel is not None and run.environment is not None
    kernel_check, kernel_timings = run.kernel
    parity = parity_check_of(result.ours, theirs, result.reference, result.fp32_kernel)
    logit_sets = [result.ours, theirs, result.reference, *([result.fp32_kernel] if result.fp32_kernel else [])]
    checks = [
        kernel_check, item.finite, parity,
        CheckResult(name="finite-logits", passed=finite(*logit_sets), detail="every logit of every path is finite"),
        result.decoding,
    ]  # fmt: skip
    timings = Timings(
        kernel_build_s=kernel_timings["kernel_build_s"], kernel_cached=kernel_timings["kernel_cached"], load_s=round(group.setup_s + item.seconds, 3),
        prefill_tokens_per_s=round(result.prefill_tps, 1), decode_tokens_per_s=round(result.decode_tps, 1), total_s=round(seconds, 3),
        setup_s=round(group.setup_s, 3), entries_sharing_setup=len(group.entries),
        gpu_peak_bytes=torch.cuda.max_memory_allocated() if run.device == "cuda" else None,
    )  # fmt: skip
    return Receipt(
        entry=entry.path, method=entry.method, file_sha256=entry.sha256, files=entry_files(entry), base_sha256=entry.base_sha256,
        created=datetime.now(UTC).isoformat(timespec="seconds"), environment=run.environment, checks=checks,
        timings=timings, passed=all(c.passed for c in checks), sample=result.sample,
    )  # fmt: skip


def _gate_group(run: Run, group: Group) -> None:
    prepared = []
    for entry in group.entries:
        try:
            prepared.append(prepare(run, entry, group))
        except RegistryError as err:
            run.say(f"{entry.path}: not gated ({err.problem.message})")
            run.problems.extend(err.problems)
    group.drop_pages()  # the finite-weights check read every page
    if not prepared:
        return
    tok = tokenizer()
    prompts = tok.prompt_ids
    results = _phase_ours(run, group, prepared, prompts, tok)
    _phase_official(run, group, results, prompts)


def gate_entries(
    run: Run, builds: list[Future[Any]], on_base: list[Entry], base: Pinned | None, base_view: Path, full: list[Entry]
) -> None:
    """Gate the State/MiSS entries on ``base`` (read from ``base_view``), then each group of full
    entries, one group's weights in memory at a time."""
    if base:
        with out_of_memory_named([e.path for e in on_base], base.stat.st_size):
            group = base_group(run, on_base, base, base_view)
            kernel_once(run, builds)
            _gate_group(run, group)
            del group  # free the base before the full entries load
    for members in full_groups(run.index, full):
        with out_of_memory_named([e.path for e in members], members[0].size + sum(s.size for s in members[0].shards)):
            group = full_group(run, members)
            kernel_once(run, builds)
            _gate_group(run, group)
            del group
