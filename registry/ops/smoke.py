"""``registry smoke``: run weight files through the RWKV-7 kernel and an independent runtime.

The checks themselves are :mod:`registry.gate.checks`; this module decides what is loaded, when,
and how often, so that a whole repo is gated in one process:

* Entries are gated in **groups that share weights**: every State and MiSS entry of a base runs on
  that base, loaded once; a full entry is its own group and needs no base file (its index row
  names the base it came from, and its own bytes are the model).
* The base is **read once**: its sha256 is computed while it loads (or recognised by the per-user
  stat cache), and every entry's recorded base sha256 is compared before any check runs.
* Each group runs in **two phases** so that only one runtime holds the weights at a time: first
  our runtime (bf16 kernel path, and the fp32 reference and fp32 kernel path computed layer by
  layer from the same stored weights), then the official ``rwkv`` runtime, built from the tensors
  already loaded.  A State is an initial state; a MiSS adapter is merged into the runtime's weights
  in place, one Linear at a time, and the pristine base bytes are copied back afterwards.
* On CUDA, our kernel's build and the official runtime's JIT builds start in the background while
  the weights are hashed and loaded.

An entry whose files do not fit its base (add's rules) is reported and skipped; the others still
run and their receipts are written.  A receipt is written for every entry that ran (passing or
not) and summarised in index.json.
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import torch

from .. import __version__
from ..artifacts.dtypes import bit_equal
from ..artifacts.miss import read_miss_json
from ..atomic import atomic_write, transaction
from ..derived import stage_derived
from ..errors import Exit, Problem, RegistryError
from ..gate.checks import (
    WORLD_VOCAB_SIZE,
    Logits,
    check_decoding,
    check_finite_weights,
    check_kernel,
    finite,
    official_logits,
    our_logits,
    parity_check_of,
    prefill_throughput,
    reference_logits,
)
from ..gate.kernel import KernelBuild, build_kernel, kernel_source_hash
from ..gate.loading import Hashed, ToHash, load_hashed, user_hash_cache
from ..gate.official import import_official, load_official
from ..gate.prompts import tokenizer
from ..gate.receipt import CheckResult, Environment, Receipt, Timings, receipt_path
from ..gate.runtime import Rwkv7, check_miss_fits, load_tensors, merged_weights, patched
from ..gate.seal import sealed
from ..hashing import StatCache
from ..index_rules import index_to_change
from ..lfs import refuse_pointer
from ..libc import release_free_memory, return_large_frees, unmap_pages
from ..models import Entry, GateCheck, GateSummary, Index
from ..names import INDEX_NAME
from ..pinned import Pinned, check_registered, open_registered, pinned, read_view
from ..progress import Echo
from ..repo import Repo, render_index, resolve_entry
from .add import accept_weight

# What a group needs on the GPU, as a multiple of its bf16 weights: the pristine copy, the
# running runtime's copy, and a layer converted to fp32 (checked: docs/gpu-gate.md).
GPU_MEMORY_FACTOR = 2.2

# ----------------------------------------------------------------------------------------------
# what runs


@dataclass
class Group:
    """Entries that run on one set of weights, loaded once: a base's State/MiSS entries, or one full entry."""

    weights: dict[str, torch.Tensor]  # pristine, on the gate's device; never modified
    official_checkpoint: Path  # the .pth the official runtime is built from
    official_tensors: Mapping[str, torch.Tensor]  # that .pth's tensors, already read and checked
    entries: list[Entry]
    setup_s: float
    # On CPU, tensors memory-mapped from a .pth (torch.load mmap): pages this process no longer
    # needs are dropped (they stay in the page cache), so a copy of the model does not add the
    # file's size to the gate's RSS.
    weights_mapped: bool = False
    official_mapped: bool = False

    def drop_pages(self) -> None:
        for tensors, mapped in ((self.weights, self.weights_mapped), (self.official_tensors, self.official_mapped)):
            if mapped:
                for tensor in tensors.values():
                    _drop_pages(tensor)


@dataclass
class Prepared:
    """One entry, checked and loaded, ready to run on its group's weights."""

    entry: Entry
    own: dict[str, torch.Tensor]  # the entry's tensors: a State, an adapter, or the full weights
    scale: float | None  # MiSS only
    finite: CheckResult
    seconds: float


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
    # Set when this entry's tensors were compared equal to an earlier entry's in this run (a
    # safetensors twin and its .pth): its figures are that run's, as a deterministic function of
    # the same tensors on the same weights.
    same_as: OursRun | None = None


@dataclass
class Run:
    """State of one ``registry smoke`` across its groups."""

    repo: Repo
    index: Index
    device: str
    files: Path  # the registered files, read through their pinned open files
    opened: dict[str, Pinned]  # those open files by registry path (their bytes checked per group)
    cache: StatCache
    say: Echo
    kernel: tuple[CheckResult, dict] | None = None
    environment: Environment | None = None
    problems: list[Problem] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)


# ----------------------------------------------------------------------------------------------
# loading


def _drop_pages(tensor: torch.Tensor) -> None:
    """Drop a memory-mapped tensor's pages from this process; the next read maps them again."""
    unmap_pages(tensor.data_ptr(), tensor.numel() * tensor.element_size())


def _mapped(device: str, path: Path) -> bool:
    """Whether :func:`load_tensors` of ``path`` on ``device`` gives tensors mapped from the file."""
    return device == "cpu" and path.suffix in (".pth", ".pt")


def _on(device: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Move once to the GPU, so merging and each model's dtype conversion happen there."""
    return {k: v.to(device) for k, v in tensors.items()} if device == "cuda" else tensors


def _entry_files(entry: Entry) -> dict[str, str]:
    files = {entry.path: entry.sha256}
    files.update({s.path: s.sha256 for s in entry.shards})
    return files


def _source_pth(index: Index, entry: Entry) -> str:
    """The .pth with the same tensors (a safetensors twin's source), for the official runtime."""
    if entry.format == "pth":
        return entry.path
    source = index.entry_by_path(entry.derived_from or "")
    if source is None or source.format != "pth":
        raise RegistryError("gate.no-source", entry.path, "the official runtime loads .pth files and this twin names no .pth source", "gate the .pth entry it was converted from")
    return source.path


def _gate_files(index: Index, entries: list[Entry]) -> dict[str, str]:
    """Every registered file the gate reads for ``entries`` (shards, a twin's .pth source), with its indexed sha256."""
    files: dict[str, str] = {}
    for entry in entries:
        files.update(_entry_files(entry))
        source = index.entry_by_path(entry.derived_from or "")
        if source is not None:
            files[source.path] = source.sha256
    return files


def _prepare(run: Run, entry: Entry, group: Group) -> Prepared:
    """add's acceptance rule on the very bytes the gate will load, then the entry's tensors."""
    start = time.perf_counter()
    path = run.files / entry.path
    base = next(b for b in run.index.bases if b.sha256 == entry.base_sha256)
    try:
        inspection = accept_weight(path, entry.method, base, entry.path)
    except RegistryError as err:
        raise err.naming(str(path), entry.path) from err
    architecture = inspection.architecture or base.architecture
    if architecture is not None and architecture.vocab_size < WORLD_VOCAB_SIZE:
        raise RegistryError(
            "gate.vocab", entry.path, f"the model's vocabulary has {architecture.vocab_size} tokens; the gate's prompts need the RWKV world vocabulary ({WORLD_VOCAB_SIZE})",
            "gate models built on the world vocabulary (rwkv_vocab_v20230424)",
        )  # fmt: skip
    if entry.method == "full":
        # The group's weights are its first entry's; a twin's own tensors (read on the CPU) must
        # equal them, or the gate would run the first entry's model under the twin's name.
        first = group.entries[0]
        if entry is not first and not _equal_tensors(group.weights, load_tensors(path)):
            raise RegistryError(
                "gate.twin-differs", entry.path, f"its tensors are not those of {first.path}, which it was converted from",
                f"convert it again: `registry convert {first.path} --force`",
            )  # fmt: skip
        own = group.weights  # compared equal: the twin's own copy is let go
    else:
        own = _on(run.device, load_tensors(path))
    scale = None
    if entry.method == "miss":
        scale = read_miss_json(run.files / _source_pth(run.index, entry)).scale
        check_miss_fits(group.weights, own, source=entry.path)
    return Prepared(entry, own, scale, check_finite_weights(own), time.perf_counter() - start)


def _equal_tensors(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> bool:
    """The same names and, tensor by tensor, :func:`~registry.artifacts.dtypes.bit_equal` (``b``'s
    moved to ``a``'s device one at a time)."""
    return a is b or (a.keys() == b.keys() and all(bit_equal(x, b[k]) for k, x in a.items()))


def _same_tensors(a: Prepared, b: Prepared) -> bool:
    """Whether two entries run the same model: same method and MiSS scale, and tensors equal in
    names, dtypes, shapes and every bit (a twin and its source; compared, never assumed)."""
    return a.entry.method == b.entry.method and a.scale == b.scale and _equal_tensors(a.own, b.own)


def _merged_into(replace: Callable[[str, torch.Tensor], None], group: Group, prepared: Prepared):
    """A MiSS entry's merge, applied to one runtime for the block and undone bit-exactly after."""
    if prepared.entry.method != "miss" or prepared.scale is None:
        return nullcontext()
    return patched(replace, group.weights, merged_weights(group.weights, prepared.own, prepared.scale, source=prepared.entry.path))


def _state_file(prepared: Prepared) -> dict[str, torch.Tensor] | None:
    return prepared.own if prepared.entry.method == "state" else None


# ----------------------------------------------------------------------------------------------
# the two phases of a group


def _phase_ours(run: Run, group: Group, prepared: list[Prepared], prompts: Mapping[str, list[int]], decode) -> list[OursRun]:
    dtype = torch.bfloat16 if run.device == "cuda" else torch.float32
    ours = Rwkv7(group.weights, dtype=dtype, device=run.device, wkv="auto", source=group.entries[0].path, copied=_drop_pages if group.weights_mapped else None)
    results: list[OursRun] = []
    for item in prepared:
        start = time.perf_counter()
        earlier = next((r for r in results if r.same_as is None and _same_tensors(r.prepared, item)), None)
        if earlier is not None:
            run.say(f"{item.entry.path}: tensors equal to {earlier.prepared.entry.path}'s (compared), its results apply")
            results.append(replace(earlier, prepared=item, seconds=time.perf_counter() - start, same_as=earlier))
            continue
        run.say(f"{item.entry.path}: our runtime ({run.device}, {'bf16' if run.device == 'cuda' else 'fp32'}), fp32 reference, greedy decoding")
        with _merged_into(ours.replace_weight, group, item):
            state_file = _state_file(item)
            state = ours.apply_state_file(state_file, source=item.entry.path) if state_file else None
            mine = our_logits(ours, prompts, state)
            reference, fp32_kernel = reference_logits(ours, mine, prompts, state_file)
            decoding, decode_tps = check_decoding(ours, prompts, state, decode)
            prefill_tps = prefill_throughput(ours, prompts)
        results.append(OursRun(item, mine, reference, fp32_kernel, decoding, decode_tps, prefill_tps, time.perf_counter() - start))
        group.drop_pages()  # what restoring a merge read
    del ours
    release_free_memory()
    if run.device == "cuda":
        torch.cuda.empty_cache()
    return results


def _phase_official(run: Run, group: Group, results: list[OursRun], prompts: Mapping[str, list[int]]) -> None:
    start = time.perf_counter()
    run.say(f"official rwkv runtime: building from the loaded weights ({len(results)} entries)")
    official = load_official(group.official_checkpoint, run.device, group.official_tensors, _drop_pages if group.official_mapped else None)
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
                theirs = official_logits(official, prompts, official.state_from_file(state_file) if state_file else None, result.reference)
            computed[item.entry.path] = theirs
        seconds = result.seconds + time.perf_counter() - start + build_s / len(results)
        group.drop_pages()
        _record(run, group, result, theirs, seconds)
    del official
    if run.device == "cuda":
        torch.cuda.empty_cache()


def _gate_group(run: Run, group: Group) -> None:
    prepared = []
    for entry in group.entries:
        try:
            prepared.append(_prepare(run, entry, group))
        except RegistryError as err:
            run.say(f"{entry.path}: not gated ({err.problem.message})")
            run.problems.extend(err.problems)
    group.drop_pages()  # the finite-weights check read every page
    if not prepared:
        return
    tok = tokenizer()
    prompts = tok.prompt_ids
    results = _phase_ours(run, group, prepared, prompts, tok.decode)
    _phase_official(run, group, results, prompts)


@contextmanager
def _out_of_memory_named(paths: list[str], weights_bytes: int) -> Iterator[None]:
    """A CUDA out-of-memory error as one line naming the entries and the memory they need."""
    try:
        yield
    except torch.cuda.OutOfMemoryError as error:
        need = GPU_MEMORY_FACTOR * weights_bytes / 2**30
        free, total = (x / 2**30 for x in torch.cuda.mem_get_info())
        raise RegistryError(
            "gate.out-of-memory", ", ".join(paths), f"the GPU ran out of memory; gating this model needs about {need:.1f} GiB (now free: {free:.1f} of {total:.1f} GiB)",
            "stop other processes on the GPU or gate on a GPU with more memory (docs/gpu-gate.md: models larger than one GPU)", Exit.MACHINE,
        ) from error  # fmt: skip


# ----------------------------------------------------------------------------------------------
# receipts


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


def gate_summary(receipt: Receipt) -> GateSummary:
    """index.json's record of a gate run: the receipt's facts, without its path or seal."""
    environment = receipt.environment.model_dump(exclude={"device", "gpu"}, exclude_none=True)
    return GateSummary(
        passed=receipt.passed, device=receipt.environment.device, file_sha256=receipt.file_sha256,
        gpu=receipt.environment.gpu, date=receipt.created[:10], versions={k: str(v) for k, v in environment.items()},
        checks=[GateCheck(name=c.name, passed=c.passed, figures={k: _finite_or_text(v) for k, v in c.figures.items()}) for c in receipt.checks],
    )  # fmt: skip


def _finite_or_text(value: float | int | str | bool | None) -> float | int | str | bool | None:
    """A figure index.json can hold: JSON has no NaN or Infinity, so those are written as text."""
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def _record(run: Run, group: Group, result: OursRun, theirs: Logits, seconds: float) -> None:
    """Write the entry's receipt and its summary in index.json (re-read: the gate ran a long time)."""
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
    receipt = Receipt(
        entry=entry.path, method=entry.method, file_sha256=entry.sha256, files=_entry_files(entry), base_sha256=entry.base_sha256,
        created=datetime.now(UTC).isoformat(timespec="seconds"), environment=run.environment, checks=checks,
        timings=timings, passed=all(c.passed for c in checks),
    )  # fmt: skip
    run.say(f"{entry.path}: {'PASSED' if receipt.passed else 'FAILED: ' + ', '.join(c.name for c in receipt.failed_checks())}")
    repo = run.repo
    repo.gates_dir.mkdir(parents=True, exist_ok=True)
    target = receipt_path(repo.gates_dir, receipt.file_sha256)
    data = (sealed(receipt).model_dump_json(indent=2) + "\n").encode()
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        current = index.entry_by_path(entry.path)
        if current is None or current.sha256 != receipt.file_sha256:
            raise RegistryError("gate.entry-changed", entry.path, "the entry changed while the gate ran", "run the gate again")
        current.gate = gate_summary(receipt)
        atomic_write(target, data)
        txn.write(INDEX_NAME, render_index(index))
        stage_derived(repo, txn, index)
    run.receipts.append(receipt)


# ----------------------------------------------------------------------------------------------
# the command


def _select(index: Index, repo: Repo, paths: list[str]) -> list[Entry]:
    if paths:
        return [resolve_entry(repo, index, p) for p in paths]
    return list(index.entries)


def _start_builds(pool: ThreadPoolExecutor, device: str) -> list[Future]:
    """Our kernel (CUDA) and the official runtime's import (its JIT builds on CUDA), in the
    background while the weights are hashed and loaded."""
    builds = [pool.submit(import_official, device)]
    if device == "cuda":
        builds.append(pool.submit(build_kernel))
    return builds


def _group_files(run: Run, entries: list[Entry]) -> list[ToHash]:
    return [ToHash(run.opened[rel], run.cache, rel) for rel in _gate_files(run.index, entries)]


def _check_group_files(run: Run, entries: list[Entry], hashed: list[Hashed]) -> None:
    """Nothing runs on bytes that are not what index.json registered (``hashed``: of
    :func:`_group_files`'s files, in its order)."""
    for (relpath, sha256), result in zip(_gate_files(run.index, entries).items(), hashed, strict=True):
        check_registered(relpath, result.sha256, sha256)


def _base_group(run: Run, entries: list[Entry], base: Pinned, base_view: Path) -> Group:
    """The base (and the entries' own files), hashed while the base loads; refused before anything
    runs when the base is not the entries' base or a file is not what the index registered."""
    start = time.perf_counter()
    run.say(f"loading the base {base.path.name} (hashed on the way)")
    files = [ToHash(base, user_hash_cache(), os.path.realpath(base.path)), *_group_files(run, entries)]
    weights, hashed = load_hashed(files, lambda: _on(run.device, load_tensors(base_view)))
    base_sha = hashed[0].sha256
    run.say(f"  base sha256 {base_sha[:12]}… ({'known from the stat cache' if hashed[0].from_cache else 'hashed while loading'})")
    for entry in entries:
        if entry.base_sha256 != base_sha:
            raise RegistryError(
                "gate.base-mismatch", base.path, f"sha256 is {base_sha} but {entry.path} was trained on base {entry.base_sha256}",
                "pass the base file the entry was trained on (nothing was run)",
            )  # fmt: skip
    _check_group_files(run, entries, hashed[1:])
    mapped = _mapped(run.device, base_view)
    return Group(weights, base_view, weights, entries, time.perf_counter() - start, mapped, mapped)


def _full_groups(index: Index, entries: list[Entry]) -> list[list[Entry]]:
    """Full entries grouped by the .pth they come from (a .pth and its safetensors twins), the
    .pth first when it is among them."""
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        source = entry.path if entry.format == "pth" else (entry.derived_from or entry.path)
        groups.setdefault(source, []).append(entry)
    return [sorted(members, key=lambda e: e.format != "pth") for members in groups.values()]


def _full_group(run: Run, entries: list[Entry]) -> Group:
    """The first full entry's weights (and a twin's .pth source for the official runtime), hashed
    while they load with every file of the group."""
    start = time.perf_counter()
    entry = entries[0]
    run.say(f"loading {entry.path} (hashed on the way)")
    source = _source_pth(run.index, entry)
    files = _group_files(run, entries)

    def load() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        weights = _on(run.device, load_tensors(run.files / entry.path))
        return weights, (weights if source == entry.path else load_tensors(run.files / source))

    (weights, official), hashed = load_hashed(files, load)
    _check_group_files(run, entries, hashed)
    return Group(weights, run.files / source, official, entries, time.perf_counter() - start, _mapped(run.device, run.files / entry.path), _mapped(run.device, run.files / source))


def _kernel_once(run: Run, builds: list[Future]) -> None:
    """The kernel check does not depend on the weights: once per run, after the builds finish."""
    if run.kernel is not None:
        return
    built = [build.result() for build in builds]
    run.environment = _environment(run.device)
    run.kernel = check_kernel(run.device, next((b for b in built if isinstance(b, KernelBuild)), None))
    run.say(f"kernel parity: {'ok' if run.kernel[0].passed else 'FAILED'}")


def smoke(root: Path, paths: list[str], base_file: Path | None, device: str, echo: Echo | None = None) -> list[Receipt]:
    """Gate the chosen entries (all when none are named) and record a receipt for each.

    ``base_file`` is needed when a State or MiSS entry is chosen.  Entries that cannot be gated
    (they do not fit their base) are refused together at the end, after the others' receipts.
    """
    say = echo or (lambda _line: None)
    repo = Repo.open(root)
    index = repo.load_index()
    if device == "cpu":
        return_large_frees()  # the two runtimes' loaders' temporaries would stay in the heap (RSS)
    if device == "cuda" and not torch.cuda.is_available():
        raise RegistryError("gate.no-cuda", "--device cuda", "CUDA is not available on this machine", "run on a GPU machine, or use --device cpu (publish then needs --allow-cpu-gate)")
    entries = _select(index, repo, paths)
    on_base = [e for e in entries if e.method != "full"]
    if on_base and (not base_file or not base_file.is_file()):
        raise RegistryError(
            "gate.no-base", base_file or "--base-file", f"{on_base[0].path} is a {on_base[0].method} entry: it runs on its base checkpoint",
            "pass --base-file BASE.pth (the file the entries were trained on)",
        )  # fmt: skip
    with ExitStack() as pins, ThreadPoolExecutor(2, thread_name_prefix="build") as pool:
        builds = _start_builds(pool, device)
        # Every input is opened once, checked (registered files against the index, the base by
        # its hash), and read through that open file for the whole gate.
        opened = {rel: pins.enter_context(open_registered(repo.root, rel)) for rel in _gate_files(index, entries)}
        base = pins.enter_context(pinned(base_file, "base checkpoint")) if on_base and base_file else None
        if base:
            refuse_pointer(base.stable, base_file)
        base_name = f"base/{base.path.name}" if base else ""
        view = pins.enter_context(read_view({f"registry/{rel}": pin for rel, pin in opened.items()} | ({base_name: base} if base else {})))
        run = Run(repo, index, device, view / "registry", opened, StatCache(repo.stat_cache_path), say)
        if base:
            with _out_of_memory_named([e.path for e in on_base], base.stat.st_size):
                group = _base_group(run, on_base, base, view / base_name)
                _kernel_once(run, builds)
                _gate_group(run, group)
                del group  # free the base before the full entries load
        for members in _full_groups(index, [e for e in entries if e.method == "full"]):
            with _out_of_memory_named([e.path for e in members], members[0].size + sum(s.size for s in members[0].shards)):
                group = _full_group(run, members)
                _kernel_once(run, builds)
                _gate_group(run, group)
                del group
    if run.problems:
        raise RegistryError.of(run.problems, {"receipts": [r.model_dump(mode="json") for r in run.receipts]}, Exit.PROBLEMS)
    return run.receipts
