"""``registry smoke``: run each weight file through the RWKV-7 kernel and an independent runtime.

Per entry: refuse a base file whose sha256 is not the entry's (before loading anything); then
  (a) kernel parity against the pure-torch recurrence (CUDA only), and chunked-state consistency;
  (b) model parity on the seeds' prompts: our path vs the official ``rwkv`` runtime vs an fp32
      reference, with the State applied or the adapter merged;
  (c) no NaN/Inf in the weights or any logits;
  (d) greedy decoding is identical across two runs and honours the stop rules;
  (e) timings.
A receipt is written for every entry that ran (passing or not) and summarised in index.json.

Thresholds and why (logit errors are scaled by max(1, max|reference logit|)):
  * fp32 vs fp32 (CPU gate: ours vs official; CUDA: our kernel in fp32 vs the torch recurrence):
    ``FP32_TOLERANCE`` = 1e-3 — only summation order differs; the official runtime's CUDA fp32
    logits were seen to match its CPU fp32 ones to about 2e-3 absolute.
  * bf16 (CUDA): our bf16 path must be at most ``BF16_RATIO`` x as far from the fp32 reference
    as the official bf16 runtime is (plus ``BF16_FLOOR``), since bf16 rounding, not the kernel,
    sets the error; and its top-5 must share ``TOPK_MIN_OVERLAP`` of the reference's.
"""

from __future__ import annotations

import platform
import subprocess
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import torch

from .. import __version__
from ..artifacts.inspect import check_fits, inspect_weights
from ..artifacts.miss import read_miss_json
from ..atomic import atomic_write, transaction
from ..derived import stage_derived
from ..errors import RegistryError
from ..gate.kernel import (
    PARITY_CASES,
    build_kernel,
    kernel_source_hash,
    parity_check,
    wkv7,
)
from ..gate.official import OfficialModel, load_official
from ..gate.prompts import PROMPTS, STOP_TEXT, STOP_TOKEN, tokenizer
from ..gate.receipt import CheckResult, Environment, Receipt, Timings, receipt_path
from ..gate.reference import make_wkv7_inputs, relative_error
from ..gate.runtime import Rwkv7, load_tensors, merge_miss
from ..hashing import StatCache, hash_file
from ..index_rules import index_to_change
from ..models import Entry, GateSummary, Index
from ..pinned import pinned, read_view, registered
from ..progress import Echo
from ..repo import INDEX_NAME, Repo, render_index, resolve_entry

FP32_TOLERANCE = 1e-3
BF16_RATIO = 1.5
BF16_FLOOR = 2e-2
TOPK = 5
WORLD_VOCAB_SIZE = 65536  # rwkv_vocab_v20230424, which the gate's prompts are tokenized with
TOPK_MIN_OVERLAP = 0.6
DECODE_TOKENS = 16
PREFILL_TOKENS = 1024
CHUNK_TOLERANCE = 1e-5



@dataclass
class LoadedEntry:
    """The weights of one entry as a runnable model's inputs."""

    tensors: dict[str, torch.Tensor]  # the model's weights (base merged with an adapter, or full)
    gated: dict[str, torch.Tensor]  # the entry's own tensors, scanned for NaN/Inf
    state_file: dict[str, torch.Tensor] | None
    official_checkpoint: Path  # the .pth the official runtime loads
    official_patch: dict[str, torch.Tensor] | None  # merged Linears to swap into it
    load_s: float


def _scaled(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).abs().max()) / max(1.0, float(want.float().abs().max()))


def _topk_overlap(got: torch.Tensor, want: torch.Tensor) -> float:
    a = set(torch.topk(got.float(), TOPK).indices.tolist())
    b = set(torch.topk(want.float(), TOPK).indices.tolist())
    return len(a & b) / TOPK


# ----------------------------------------------------------------------------------------------
# loading


def _entry_files(entry: Entry) -> dict[str, str]:
    files = {entry.path: entry.sha256}
    files.update({s.path: s.sha256 for s in entry.shards})
    return files


def _source_pth(root: Path, index: Index, entry: Entry) -> Path:
    """The .pth with the same tensors (a safetensors twin's source), for the official runtime."""
    if entry.format == "pth":
        return root / entry.path
    source = index.entry_by_path(entry.derived_from or "")
    if source is None or source.format != "pth":
        raise RegistryError("gate.no-source", entry.path, "the official runtime loads .pth files and this twin names no .pth source", "gate the .pth entry it was converted from")
    return root / source.path


def _gate_files(index: Index, entries: list[Entry]) -> dict[str, str]:
    """Every registered file the gate reads for ``entries`` (shards, a twin's .pth source), with its indexed sha256."""
    files: dict[str, str] = {}
    for entry in entries:
        files.update(_entry_files(entry))
        source = index.entry_by_path(entry.derived_from or "")
        if source is not None:
            files[source.path] = source.sha256
    return files


def _check_acceptable(index: Index, entries: list[Entry], files: Path) -> None:
    """add's acceptance rule, on the very bytes the gate will load: a file add refuses cannot pass."""
    bases = {b.sha256: b for b in index.bases}
    for entry in entries:
        try:
            inspection = inspect_weights(files / entry.path)
            check_fits(entry.method, inspection, bases[entry.base_sha256], entry.path)
        except RegistryError as err:
            raise err.naming(str(files / entry.path), entry.path) from err
        architecture = inspection.architecture or bases[entry.base_sha256].architecture
        if architecture is not None and architecture.vocab_size < WORLD_VOCAB_SIZE:
            raise RegistryError(
                "gate.vocab", entry.path, f"the model's vocabulary has {architecture.vocab_size} tokens; the gate's prompts need the RWKV world vocabulary ({WORLD_VOCAB_SIZE})",
                "gate models built on the world vocabulary (rwkv_vocab_v20230424)",
            )  # fmt: skip


def _on(device: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Move once to the GPU, so merging and each model's dtype conversion happen there."""
    return {k: v.to(device) for k, v in tensors.items()} if device == "cuda" else tensors


def load_entry(root: Path, index: Index, entry: Entry, base_file: Path, device: str) -> LoadedEntry:
    """The entry's tensors, its base and what the official runtime needs, all read under ``root``."""
    start = time.perf_counter()
    own = _on(device, load_tensors(root / entry.path))
    if entry.method == "full":
        return LoadedEntry(own, own, None, _source_pth(root, index, entry), None, time.perf_counter() - start)
    base = _on(device, load_tensors(base_file))
    if entry.method == "state":
        return LoadedEntry(base, own, own, base_file, None, time.perf_counter() - start)
    manifest = read_miss_json(_source_pth(root, index, entry))
    merged = merge_miss(base, own, manifest.scale, source=entry.path)
    patch = {name: merged[name] for name in own}
    return LoadedEntry(merged, own, None, base_file, patch, time.perf_counter() - start)


# ----------------------------------------------------------------------------------------------
# checks


def check_finite_weights(loaded: LoadedEntry) -> CheckResult:
    bad = [name for name, t in loaded.gated.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    return CheckResult(
        name="finite-weights",
        passed=not bad,
        figures={"tensors_checked": len(loaded.gated), "non_finite": ", ".join(bad[:10]) or None},
        detail=f"NaN/Inf in {bad[0]}" + (f" and {len(bad) - 1} more" if len(bad) > 1 else "") if bad else "",
    )


def check_kernel(device: str) -> tuple[CheckResult, dict]:
    """(a) kernel vs reference, and a state carried across chunks equals one long run."""
    figures: dict = {}
    passed = True
    build = None
    if device == "cuda":
        build = build_kernel()
        for dtype, batch, steps, heads in PARITY_CASES:
            result = parity_check(dtype, batch, steps, heads)
            tag = f"{result['dtype']}_b{batch}_t{steps}_h{heads}"
            figures[f"{tag}_y_rel_err"] = result["y_rel_err"]
            figures[f"{tag}_state_rel_err"] = result["state_rel_err"]
            passed &= bool(result["ok"])
    inputs, state = make_wkv7_inputs(2, 96, 2, dtype=torch.float32, device=device, seed=3)
    y_full, s_full = wkv7(*inputs, state.clone())  # kernel on CUDA, torch recurrence on CPU
    carried = state.clone()
    ys = []
    for lo, hi in ((0, 17), (17, 64), (64, 96)):
        r, w, k, v, a, b = (t[:, lo:hi].contiguous() for t in inputs)
        y, carried = wkv7(r, w, k, v, a, b, carried)
        ys.append(y)
    chunk_err = max(relative_error(torch.cat(ys, 1), y_full), relative_error(carried, s_full))
    figures["chunked_state_rel_err"] = chunk_err
    passed &= chunk_err <= CHUNK_TOLERANCE
    thresholds = {"chunked_state_rel_err": CHUNK_TOLERANCE}
    if device == "cuda":
        thresholds.update({"fp32_rel_err": 1e-5, "bf16_rel_err": 1e-2, "state_rel_err": 1e-5})
    detail = "kernel vs torch recurrence" if device == "cuda" else "cpu gate: the CUDA kernel was not run; recurrence chunking checked"
    timings = {"kernel_build_s": build.seconds if build else None, "kernel_cached": build.cached if build else None}
    return CheckResult(name="kernel-parity", passed=passed, figures=figures, thresholds=thresholds, detail=detail), timings


@dataclass
class Logits:
    prefill: dict[str, torch.Tensor]
    step: dict[str, torch.Tensor]  # after one more (greedy) token: state carried


def _our_logits(model: Rwkv7, prompts: Mapping[str, list[int]], state) -> Logits:
    prefill, step = {}, {}
    for name, ids in prompts.items():
        logits, new_state = model.forward(ids, state)
        prefill[name] = logits.float().cpu()
        nxt = int(torch.argmax(logits))
        step[name] = model.forward([nxt], new_state)[0].float().cpu()
    return Logits(prefill, step)


def _official_logits(official: OfficialModel, prompts: Mapping[str, list[int]], state, reference: Logits) -> Logits:
    prefill, step = {}, {}
    for name, ids in prompts.items():
        logits, new_state = official.logits(ids, state)
        prefill[name] = logits.cpu()
        nxt = int(torch.argmax(reference.prefill[name]))  # same continuation token for every path
        step[name] = official.logits([nxt], new_state)[0].cpu()
    return Logits(prefill, step)


def _compare(got: Logits, want: Logits) -> dict[str, float]:
    pairs = [(got.prefill[k], want.prefill[k]) for k in want.prefill] + [(got.step[k], want.step[k]) for k in want.step]
    return {
        "max_scaled_err": max(_scaled(g, w) for g, w in pairs),
        "top1_agreement": sum(int(torch.argmax(g)) == int(torch.argmax(w)) for g, w in pairs) / len(pairs),
        "top5_overlap_min": min(_topk_overlap(g, w) for g, w in pairs),
    }


def _finite(*logit_sets: Logits) -> bool:
    return all(bool(torch.isfinite(t).all()) for ls in logit_sets for t in (*ls.prefill.values(), *ls.step.values()))


# ----------------------------------------------------------------------------------------------
# the gate for one entry


@dataclass
class GateContext:
    device: str
    base_file: Path
    base_sha256: str
    echo: Echo
    files: Path  # where the registered files are read: links to the pinned, checked open files


def _environment(device: str) -> Environment:
    gpu = driver = None
    if device == "cuda":
        gpu = torch.cuda.get_device_name(0)
        try:
            driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            driver = None
    from importlib.metadata import version  # noqa: PLC0415

    return Environment(
        device=device, gpu=gpu, driver=driver, torch=torch.__version__, cuda=torch.version.cuda, rwkv=version("rwkv"),
        python=platform.python_version(), registry=__version__, kernel_source_hash=kernel_source_hash(),
    )  # fmt: skip


def run_gate(repo: Repo, index: Index, entry: Entry, ctx: GateContext) -> Receipt:
    """All checks for one entry; never raises for a failing check (the receipt says it)."""
    started = time.perf_counter()
    say = ctx.echo
    kernel_check, kernel_timings = check_kernel(ctx.device)
    say(f"  kernel parity: {'ok' if kernel_check.passed else 'FAILED'}")
    loaded = load_entry(ctx.files, index, entry, ctx.base_file, ctx.device)
    finite = check_finite_weights(loaded)
    checks = [kernel_check, finite]
    tok = tokenizer()
    prompts = {name: tok.encode(text) for name, text in PROMPTS.items()}
    dtype = torch.bfloat16 if ctx.device == "cuda" else torch.float32
    load_start = time.perf_counter()
    ours = Rwkv7(loaded.tensors, dtype=dtype, device=ctx.device, wkv="auto", source=entry.path)
    load_s = loaded.load_s + time.perf_counter() - load_start
    state = ours.apply_state_file(loaded.state_file, source=entry.path) if loaded.state_file else None
    our = _our_logits(ours, prompts, state)

    reference, fp32_kernel = _reference_logits(our, loaded, prompts, ctx.device)
    official = load_official(loaded.official_checkpoint, ctx.device)
    if loaded.official_patch:
        official.replace_weights(loaded.official_patch)
    off = _official_logits(official, prompts, official.state_from_file(loaded.state_file) if loaded.state_file else None, reference)
    del official
    checks.append(_parity_check(our, off, reference, fp32_kernel))
    checks.append(CheckResult(name="finite-logits", passed=_finite(our, off, reference, *( [fp32_kernel] if fp32_kernel else [])), detail="every logit of every path is finite"))
    decode_check, decode_tps = _check_decoding(ours, prompts, state, tok.decode)
    checks.append(decode_check)
    prefill_tps = _prefill_throughput(ours, prompts)
    say(f"  model parity: {'ok' if checks[-2].passed and checks[2].passed else 'FAILED'}")
    timings = Timings(
        kernel_build_s=kernel_timings["kernel_build_s"], kernel_cached=kernel_timings["kernel_cached"], load_s=round(load_s, 3),
        prefill_tokens_per_s=round(prefill_tps, 1), decode_tokens_per_s=round(decode_tps, 1), total_s=round(time.perf_counter() - started, 3),
    )  # fmt: skip
    return Receipt(
        entry=entry.path, method=entry.method, file_sha256=entry.sha256, files=_entry_files(entry), base_sha256=entry.base_sha256,
        created=datetime.now(UTC).isoformat(timespec="seconds"), environment=_environment(ctx.device), checks=checks,
        timings=timings, passed=all(c.passed for c in checks),
    )  # fmt: skip


def _reference_logits(our: Logits, loaded: LoadedEntry, prompts, device: str) -> tuple[Logits, Logits | None]:
    """The fp32 torch-recurrence reference; on CUDA also our kernel in fp32 on the same weights.

    On CPU our path *is* the fp32 torch recurrence, so it is its own reference there and the
    official runtime is the independent check.
    """
    if device == "cpu":
        return our, None
    fp32 = Rwkv7(loaded.tensors, dtype=torch.float32, device=device, wkv="reference")
    state = fp32.apply_state_file(loaded.state_file) if loaded.state_file else None
    reference = _our_logits(fp32, prompts, state)
    with_kernel = Rwkv7(loaded.tensors, dtype=torch.float32, device=device, wkv="kernel")
    kernel = _our_logits(with_kernel, prompts, state)
    del fp32, with_kernel
    torch.cuda.empty_cache()
    return reference, kernel


def _parity_check(our: Logits, official: Logits, reference: Logits, fp32_kernel: Logits | None) -> CheckResult:
    """(b) model parity; see the module docstring for the thresholds."""
    ours_vs_ref = _compare(our, reference)
    off_vs_ref = _compare(official, reference)
    ours_vs_off = _compare(our, official)
    figures = {f"ours_vs_reference_{k}": v for k, v in ours_vs_ref.items()}
    figures.update({f"official_vs_reference_{k}": v for k, v in off_vs_ref.items()})
    figures.update({f"ours_vs_official_{k}": v for k, v in ours_vs_off.items()})
    if fp32_kernel is None:  # cpu: there our path is the reference (see _reference_logits)
        passed = ours_vs_off["max_scaled_err"] <= FP32_TOLERANCE and ours_vs_off["top1_agreement"] == 1.0
        thresholds = {"ours_vs_official_max_scaled_err": FP32_TOLERANCE, "ours_vs_official_top1_agreement": 1.0}
        detail = "cpu fp32: our runtime (torch recurrence) vs the official rwkv runtime (cpu fp32)"
    else:
        kernel_vs_ref = _compare(fp32_kernel, reference)
        figures.update({f"fp32_kernel_vs_reference_{k}": v for k, v in kernel_vs_ref.items()})
        bound = BF16_RATIO * off_vs_ref["max_scaled_err"] + BF16_FLOOR
        passed = (
            kernel_vs_ref["max_scaled_err"] <= FP32_TOLERANCE
            and kernel_vs_ref["top1_agreement"] == 1.0
            and ours_vs_ref["max_scaled_err"] <= bound
            and ours_vs_ref["top5_overlap_min"] >= TOPK_MIN_OVERLAP
        )
        thresholds = {"fp32_kernel_vs_reference_max_scaled_err": FP32_TOLERANCE, "ours_vs_reference_max_scaled_err": bound, "ours_vs_reference_top5_overlap_min": TOPK_MIN_OVERLAP}
        detail = "cuda: our kernel fp32 vs torch recurrence fp32; our bf16 path vs the official rwkv cuda bf16 runtime, both against the fp32 reference"
    return CheckResult(name="model-parity", passed=passed, figures=figures, thresholds=thresholds, detail=detail)


def _check_decoding(model: Rwkv7, prompts: Mapping[str, list[int]], state, decode) -> tuple[CheckResult, float]:
    """(d) greedy decoding twice gives the same tokens; the stop rules end generation."""
    figures: dict = {}
    passed = True
    tokens_made, seconds = 0, 0.0
    for name, ids in prompts.items():
        start = time.perf_counter()
        first = model.generate(ids, DECODE_TOKENS, decode=decode, state=state)
        seconds += time.perf_counter() - start
        tokens_made += len(first.tokens) + 1
        second = model.generate(ids, DECODE_TOKENS, decode=decode, state=state)
        same = first.tokens == second.tokens
        # Probe the stop rule with this model: make its own first greedy token a stop token.
        probe_token = first.tokens[0] if first.tokens else STOP_TOKEN
        probe = model.generate(ids, DECODE_TOKENS, decode=decode, state=state, stop_tokens=(STOP_TOKEN, probe_token))
        stops = probe.tokens == [] and probe.stop_reason == "stop_token"
        figures[f"{name}_identical"] = same
        figures[f"{name}_stop_reason"] = first.stop_reason
        figures[f"{name}_stop_probe"] = stops
        passed &= same and stops and STOP_TEXT not in first.text
    check = CheckResult(
        name="greedy-decoding", passed=passed, figures=figures, thresholds={"max_new_tokens": DECODE_TOKENS},
        detail="temperature 0; stops on token 0 or '\\n\\nUser:' (the probe makes the model's own first token a stop token)",
    )  # fmt: skip
    return check, tokens_made / seconds if seconds else 0.0


def _prefill_throughput(model: Rwkv7, prompts: Mapping[str, list[int]]) -> float:
    ids = [t for p in prompts.values() for t in p]
    ids = (ids * (PREFILL_TOKENS // len(ids) + 1))[:PREFILL_TOKENS]
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    model.forward(ids)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    return len(ids) / (time.perf_counter() - start)


# ----------------------------------------------------------------------------------------------
# the command


def _select(index: Index, repo: Repo, paths: list[str]) -> list[Entry]:
    if paths:
        return [resolve_entry(repo, index, p) for p in paths]
    return list(index.entries)


def smoke(root: Path, paths: list[str], base_file: Path | None, device: str, echo: Echo | None = None) -> list[Receipt]:
    """Gate the chosen entries (all when none are named) and record a receipt for each."""
    say = echo or (lambda _line: None)
    repo = Repo.open(root)
    index = repo.load_index()
    if device == "cuda" and not torch.cuda.is_available():
        raise RegistryError("gate.no-cuda", "--device cuda", "CUDA is not available on this machine", "run on a GPU machine, or use --device cpu (publish then needs --allow-cpu-gate)")
    entries = _select(index, repo, paths)
    if not base_file or not base_file.is_file():
        raise RegistryError("gate.no-base", base_file or "--base-file", "the base checkpoint file is needed", "pass --base-file BASE.pth (the file the entries were trained on)")
    with ExitStack() as pins:
        # Every input is opened once, checked (the base by hash, registered files against the
        # index), and read through that open file for the whole gate.
        base = pins.enter_context(pinned(base_file, "base checkpoint"))
        base_sha = hash_file(base.stable)
        for entry in entries:
            if entry.base_sha256 != base_sha:
                raise RegistryError(
                    "gate.base-mismatch", base_file, f"sha256 is {base_sha} but {entry.path} was trained on base {entry.base_sha256}",
                    "pass the base file the entry was trained on (nothing was loaded)",
                )  # fmt: skip
        cache = StatCache(repo.stat_cache_path)
        opened = {f"registry/{rel}": pins.enter_context(registered(repo.root, rel, sha, cache)) for rel, sha in _gate_files(index, entries).items()}
        view = pins.enter_context(read_view({**opened, f"base/{base_file.name}": base}))
        ctx = GateContext(device, view / "base" / base_file.name, base_sha, say, view / "registry")
        _check_acceptable(index, entries, ctx.files)
        receipts = []
        for entry in entries:
            say(f"gating {entry.path} on {device}")
            receipt = run_gate(repo, index, entry, ctx)
            receipts.append(receipt)
            _record(repo, entry.path, receipt)
            say(f"  {'PASSED' if receipt.passed else 'FAILED: ' + ', '.join(c.name for c in receipt.failed_checks())}")
    return receipts


def _record(repo: Repo, path: str, receipt: Receipt) -> None:
    """Write the receipt and its summary in index.json (re-read: the gate ran a long time)."""
    repo.gates_dir.mkdir(parents=True, exist_ok=True)
    target = receipt_path(repo.gates_dir, receipt.file_sha256)
    data = (receipt.model_dump_json(indent=2) + "\n").encode()
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        entry = index.entry_by_path(path)
        if entry is None or entry.sha256 != receipt.file_sha256:
            raise RegistryError("gate.entry-changed", path, "the entry changed while the gate ran", "run the gate again")
        entry.gate = GateSummary(
            passed=receipt.passed, device=receipt.environment.device, file_sha256=receipt.file_sha256,
            receipt=repo.rel(target), gpu=receipt.environment.gpu, date=receipt.created[:10],
        )  # fmt: skip
        atomic_write(target, data)
        txn.write(INDEX_NAME, render_index(index))
        stage_derived(repo, txn, index)
