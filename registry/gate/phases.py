"""A group's entries, each run through both runtimes on the group's one copy of the weights.

Our runtime holds the weights (bf16 on CUDA); the official ``rwkv`` runtime is built on those very
tensors (:meth:`~registry.gate.runtime.Rwkv7.checkpoint`), and the fp32 reference and fp32 kernel
path convert them layer by layer.  A State is an initial state; a MiSS adapter is merged into the
shared Linears in place, one at a time, seen by both runtimes, and undone bit-exactly from the
pristine values of the Linears it touched (kept on the GPU when the plan has room, else the host's
mapped checkpoint; the group's last entry leaves its merge in, nothing reads the weights after
it).  Each entry also runs its smoke sample in its own prompt format
(:mod:`registry.gate.sample`).  Each entry's receipt is handed to the run's ``record`` as soon as it ran.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
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
from ..core.models import Entry, FormatSample, Index, Method
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
from .memory import GIB, GpuPlan, measure_peak_from_here, out_of_memory_named, plan_gpu, refuse_unless_fits
from .official import OfficialModel, load_official
from .prepare import Prepared, prepare, same_tensors
from .prompts import SampleFormat, Tokenizer, sample_format, tokenizer
from .receipt import CheckResult, Receipt, Timings
from .run import Run, kernel_once
from .runtime import merged_weights, patched
from .sample import run_sample


@dataclass
class Measured:
    """What both runtimes measured of one weight: an entry (an :class:`EntryRun`) or a Transformers checkpoint."""

    ours: Logits
    reference: Logits
    fp32_kernel: Logits | None
    official: Logits
    decoding: CheckResult
    decode_tps: float
    prefill_tps: float
    sample: FormatSample


@dataclass
class EntryRun(Measured):
    """What both runtimes measured for an entry."""

    prepared: Prepared
    seconds: float
    format: SampleFormat  # the entry's own prompt format, and the sample run in it
    # Set when this entry's tensors were compared equal to an earlier entry's in this run (a
    # safetensors twin and its .pth): its figures are that run's, as a deterministic function of
    # the same tensors on the same weights.
    same_as: EntryRun | None = None


def _merged_into(group: Group, plan: GpuPlan | None, prepared: Prepared, undo: bool) -> AbstractContextManager[None]:
    """A MiSS entry's merge, applied to the shared weights for the block and undone bit-exactly after."""
    if prepared.entry.method != "miss" or prepared.scale is None:
        return nullcontext()
    model = group.model
    touched = sum(model.weight(name).numel() * model.weight(name).element_size() for name in prepared.own)
    pristine: Mapping[str, torch.Tensor] = group.weights  # the host's checkpoint
    if undo and plan is not None and plan.pristine_on_gpu(touched):
        pristine = {name: model.weight(name).clone() for name in prepared.own}
    merged = merged_weights(model.checkpoint(), prepared.own, prepared.scale, source=prepared.entry.path)
    return patched(model.replace_weight, pristine, merged, undo=undo)


def _state_file(prepared: Prepared) -> Mapping[str, torch.Tensor] | None:
    return prepared.own if prepared.entry.method == "state" else None


def _format(run: Run, item: Prepared) -> SampleFormat:
    """The format the entry's sample runs in: its own, or its source's for a safetensors twin."""
    fmt = sample_format(source_of(run.index, item.entry))
    if fmt.unknown_profile:
        run.say(
            f"{item.entry.path}: profile {fmt.unknown_profile!r} has no prompt the gate knows; its sample "
            f"runs in {fmt.name}"
        )
    return fmt


def _run_entry(
    run: Run,
    group: Group,
    plan: GpuPlan | None,
    official: OfficialModel,
    item: Prepared,
    prompts: Mapping[str, list[int]],
    tok: Tokenizer,
    fmt: SampleFormat,
    undo: bool,
) -> EntryRun:
    start = time.perf_counter()
    ours = group.model
    run.say(
        f"{item.entry.path}: our runtime ({run.device}, {'bf16' if run.device == 'cuda' else 'fp32'}), "
        f"fp32 reference, greedy decoding, a sample in {fmt.name}, official runtime"
    )
    with _merged_into(group, plan, item, undo):
        state_file = _state_file(item)
        state = ours.apply_state_file(state_file, source=item.entry.path) if state_file else None
        mine = our_logits(ours, prompts, state)
        reference, fp32_kernel = reference_logits(ours, mine, prompts, state_file)
        decoding, decode_tps = check_decoding(ours, prompts, state, tok.decode)
        prefill_tps = prefill_throughput(ours, prompts)
        sample = run_sample(ours, fmt, tok, state)
        theirs = official_logits(
            official, prompts, official.state_from_file(state_file) if state_file else None, reference
        )
    run.say(
        f"{item.entry.path}: sample in {fmt.name}: {sample.tokens} tokens, stop "
        f"text {'seen' if sample.stop_text_seen else 'not seen'} (reported, not a check)"
    )
    group.drop_pages()  # what restoring a merge read
    return EntryRun(
        ours=mine,
        reference=reference,
        fp32_kernel=fp32_kernel,
        official=theirs,
        decoding=decoding,
        decode_tps=decode_tps,
        prefill_tps=prefill_tps,
        sample=sample,
        prepared=item,
        seconds=time.perf_counter() - start,
        format=fmt,
    )


def _run_entries(
    run: Run,
    group: Group,
    plan: GpuPlan | None,
    prepared: list[Prepared],
    prompts: Mapping[str, list[int]],
    tok: Tokenizer,
) -> None:
    start = time.perf_counter()
    run.say(f"official rwkv runtime: building on our runtime's weights ({len(prepared)} entries)")
    official = load_official(group.official_checkpoint, run.device, group.model.checkpoint())
    build_s = time.perf_counter() - start
    results: list[EntryRun] = []
    for position, item in enumerate(prepared):
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
            result = replace(earlier, prepared=item, seconds=time.perf_counter() - start, same_as=earlier)
        else:
            result = _run_entry(run, group, plan, official, item, prompts, tok, fmt, undo=position < len(prepared) - 1)
        results.append(result)
        receipt = _receipt(run, group, result, result.seconds + build_s / len(prepared))
        run.say(
            f"{item.entry.path}:"
            f" {'PASSED' if receipt.passed else 'FAILED: ' + ', '.join(c.name for c in receipt.failed_checks())}"
        )
        run.record(receipt)
        run.receipts.append(receipt)
    del official
    release_free_memory()


@dataclass(frozen=True)
class Gated:
    """What a receipt names: the weight gated (an entry, or a checkpoint by its weight index)."""

    path: str
    method: Method
    file_sha256: str
    files: dict[str, str]  # what the gate read, by sha256
    base_sha256: str


def make_receipt(
    run: Run, gated: Gated, finite_weights: CheckResult, result: Measured, timed: tuple[float, float, int, float]
) -> Receipt:
    """The one receipt of a gated weight (an entry of a group, a Transformers checkpoint): the
    kernel check, its weights' and logits' checks, its sample; ``timed``: (load_s, setup_s, weights
    sharing the setup, total seconds)."""
    assert run.kernel is not None and run.environment is not None
    kernel_check, kernel_timings = run.kernel
    theirs = result.official
    parity = parity_check_of(result.ours, theirs, result.reference, result.fp32_kernel)
    logit_sets = [result.ours, theirs, result.reference, *([result.fp32_kernel] if result.fp32_kernel else [])]
    checks = [
        kernel_check,
        finite_weights,
        parity,
        CheckResult(name="finite-logits", passed=finite(*logit_sets), detail="every logit of every path is finite"),
        result.decoding,
    ]
    load_s, setup_s, sharing, seconds = timed
    timings = Timings(
        kernel_build_s=kernel_timings["kernel_build_s"],
        kernel_cached=kernel_timings["kernel_cached"],
        load_s=round(load_s, 3),
        prefill_tokens_per_s=round(result.prefill_tps, 1),
        decode_tokens_per_s=round(result.decode_tps, 1),
        total_s=round(seconds, 3),
        setup_s=round(setup_s, 3),
        entries_sharing_setup=sharing,
        gpu_peak_bytes=torch.cuda.max_memory_allocated() if run.device == "cuda" else None,
    )
    return Receipt(
        entry=gated.path,
        method=gated.method,
        file_sha256=gated.file_sha256,
        files=gated.files,
        base_sha256=gated.base_sha256,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        environment=run.environment,
        checks=checks,
        timings=timings,
        passed=all(c.passed for c in checks),
        sample=result.sample,
    )


def _receipt(run: Run, group: Group, result: EntryRun, seconds: float) -> Receipt:
    """An entry's receipt."""
    entry, item = result.prepared.entry, result.prepared
    gated = Gated(entry.path, entry.method, entry.sha256, entry_files(entry), entry.base_sha256)
    timed = (group.setup_s + item.seconds, group.setup_s, len(group.entries), seconds)
    return make_receipt(run, gated, item.finite, result, timed)


def _gate_group(run: Run, group: Group, plan: GpuPlan | None) -> None:
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
    _run_entries(run, group, plan, prepared, tok.prompt_ids, tok)


def plan_groups(
    index: Index, gpu: tuple[str, int] | None, on_base: list[Entry], base_bytes: int, full: list[Entry]
) -> list[tuple[list[Entry], GpuPlan | None]]:
    """Each group's entries (the base's State/MiSS entries first, when there are any) and its GPU
    plan (None on CPU), from the files' sizes and the base's recorded architecture; refused in
    one line when any group cannot fit (:func:`~registry.gate.memory.refuse_unless_fits`), so
    ``smoke`` calls it before it opens, builds or loads anything."""
    groups = ([on_base] if on_base else []) + full_groups(index, full)
    planned: list[tuple[list[Entry], GpuPlan | None]] = []
    for members in groups:
        plan = None
        if gpu is not None:
            base = index.base_by_sha(members[0].base_sha256)
            weights = base_bytes if members is on_base else _full_size(members[0])
            adapter = max((e.size for e in members if e.method == "miss"), default=0)
            plan = plan_gpu(*gpu, weights, base.architecture if base else None, adapter)
            refuse_unless_fits(plan, [e.path for e in members])
        planned.append((members, plan))
    return planned


def gate_entries(
    run: Run, builds: list[Future[Any]], on_base: list[Entry], base: Pinned | None, base_view: Path, full: list[Entry]
) -> None:
    """Gate the State/MiSS entries on ``base`` (read from ``base_view``), then each group of full
    entries, one group's weights in memory at a time, each as :func:`plan_groups` planned it."""
    for members, plan in plan_groups(
        run.index, run.gpu, on_base if base else [], base.stat.st_size if base else 0, full
    ):
        with out_of_memory_named([e.path for e in members], plan):
            if plan is not None:
                run.say(
                    f"GPU plan: {plan.need / GIB:.1f} GiB ({plan.weights / GIB:.1f} weights + "
                    f"{plan.working / GIB:.1f} working) of {plan.budget / GIB:.1f} GiB on {plan.card}"
                )
            measure_peak_from_here(run.device)
            if base and members is on_base:
                group = base_group(run, on_base, base, base_view)
            else:
                group = full_group(run, members)
            kernel_once(run, builds)
            _gate_group(run, group, plan)
            del group  # free these weights before the next group loads
            if run.device == "cuda":
                torch.cuda.empty_cache()


def _full_size(entry: Entry) -> int:
    return entry.size + sum(s.size for s in entry.shards)
