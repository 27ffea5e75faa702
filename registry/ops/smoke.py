"""``registry smoke``: run weight files through the RWKV-7 kernel and an independent runtime.

The checks are :mod:`registry.gate.checks`; what is loaded, when, and how often is the gate's
machinery (:mod:`registry.gate.groups`, :mod:`registry.gate.phases`), so that a whole repo is
gated in one process:

* Entries are gated in **groups that share weights**: every State and MiSS entry of a base runs on
  that base, loaded once; a full entry is its own group and needs no base file (its index row
  names the base it came from, and its own bytes are the model).
* The base is **read once**: its sha256 is computed while it loads (or recognised by the per-user
  stat cache), and every entry's recorded base sha256 is compared before any check runs.
* A group's weights are on the GPU **once**: our runtime's copy, on which the official ``rwkv``
  runtime is built (its own loader, handed our tensors) and from which the fp32 reference converts
  one layer at a time; each group is planned against ``--max-gpu-memory`` before anything loads
  (:mod:`registry.gate.memory`).
* On CUDA, our kernel's build and the official runtime's JIT builds start in the background while
  the weights are hashed and loaded (:mod:`registry.gate.builds`).

An entry whose files do not fit its base (add's rules) is reported and skipped; the others still
run and their receipts are written.  A receipt is written for every entry that ran (passing or
not) and summarised in index.json.

``--fetch-base DIR`` downloads the entries' base from where the known-bases catalog says it lives
(its ``source`` repo on the Hub) into DIR and checks its sha256 against the catalog and index.json
before the gate reads it; ``--sign-key KEY.pem`` also signs every receipt, so that a publish made
on another machine can trust it (``publish --trust-gate-key``, docs/ci.md).
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import torch

from ..artifacts.accept import accept_weight
from ..artifacts.signature import public_pem
from ..core.atomic import transaction
from ..core.errors import Exit, RegistryError, warn
from ..core.files import atomic_write
from ..core.hashing import StatCache
from ..core.hashing.engine import hash_file
from ..core.lfs import refuse_pointer
from ..core.libc import return_large_frees
from ..core.models import Checkpoint, Entry, Index
from ..core.names import INDEX_NAME
from ..core.pinned import open_registered, pinned, read_view
from ..core.progress import Say, silent
from ..core.repo import Repo, render_index, resolve_checkpoint, resolve_entry
from ..gate.builds import background_builds
from ..gate.checkpoint import gate_checkpoint, plan_checkpoint
from ..gate.groups import gate_files
from ..gate.memory import gpu_budget, out_of_memory_named
from ..gate.phases import gate_entries, plan_groups
from ..gate.receipt import Receipt, gate_summary, receipt_path
from ..gate.run import Run
from ..gate.seal import sealed_json, signed
from ..hf.checkpoint import gate_not_applicable
from ..hf.tensors import fla_to_x070
from ..hub.remote import Hub
from ..index.catalog import known_base, load_catalog
from ..index.derived import stage_derived
from ..index.rules import index_to_change


def _select(index: Index, repo: Repo, paths: list[str]) -> tuple[list[Entry], list[Checkpoint]]:
    """The entries and the RWKV-7 Transformers checkpoints to gate: those named, else all.  A
    checkpoint of another architecture named is refused (the RWKV-7 gate does not apply); left
    unnamed, it is passed over with a warning, and no verdict is recorded for it."""
    if not paths:
        for checkpoint in index.checkpoints:
            if not checkpoint.rwkv7:
                warn(gate_not_applicable(checkpoint))
        return list(index.entries), [c for c in index.checkpoints if c.rwkv7]
    entries: list[Entry] = []
    checkpoints: list[Checkpoint] = []
    for path in paths:
        named = resolve_checkpoint(repo, index, path)
        if named is None:
            entries.append(resolve_entry(repo, index, path))
        elif not named.rwkv7:
            raise RegistryError.of([gate_not_applicable(named)])
        else:
            checkpoints.append(named)
    return entries, checkpoints


def fetch_base(index: Index, entries: list[Entry], folder: Path, say: Say) -> Path:
    """The base the (State/MiSS) ``entries`` run on, downloaded from its catalog ``source`` into
    ``folder`` through the Hub client (a file already there and unchanged is not fetched again),
    refused unless its sha256 is the one the catalog and index.json record."""
    shas = sorted({e.base_sha256 for e in entries})
    if len(shas) > 1:
        raise RegistryError(
            "gate.several-bases",
            "--fetch-base",
            f"the entries run on {len(shas)} different bases",
            "gate one base's entries per run (name them), or pass --base-file",
        )
    base = index.base_by_sha(shas[0])
    if base is None:
        raise RegistryError(
            "gate.unknown-base",
            entries[0].path,
            f"index.json records no base with sha256 {shas[0][:12]}…",
            "run `registry validate` and fix what it reports",
        )
    known = known_base(load_catalog(), base.filename)
    if known is None or not known.source:
        raise RegistryError(
            "gate.base-not-in-catalog",
            base.filename,
            "is not in the known-bases catalog with a source to fetch it from",
            "download it yourself and pass --base-file",
        )
    if known.sha256 != base.sha256:
        raise RegistryError(
            "base.catalog-mismatch",
            base.filename,
            f"index.json records sha256 {base.sha256[:12]}… but the known-bases catalog says {known.sha256[:12]}…",
            "run `registry validate`; the base was recorded from other bytes",
        )
    say(f"fetching {base.filename} from {known.source}")
    path = Hub(known.source, progress=False).download(base.filename, "main", folder)
    got = hash_file(path)
    if got != known.sha256:
        path.unlink()
        raise RegistryError(
            "gate.base-mismatch",
            f"{known.source}/{base.filename}",
            f"the downloaded file has sha256 {got[:12]}…, but the catalog says {known.sha256[:12]}… (deleted)",
            "check the catalog's source; the Hub serves other bytes under this name",
        )
    return path


def _write_receipt(repo: Repo, receipt: Receipt, sign_key: Path | None) -> None:
    """Write the entry's receipt (signed with ``sign_key`` when given) and its summary in index.json
    (re-read: the gate ran a long time)."""
    repo.gates_dir.mkdir(parents=True, exist_ok=True)
    target = receipt_path(repo.gates_dir, receipt.file_sha256)
    data = sealed_json(signed(receipt, sign_key) if sign_key else receipt)
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        current = index.entry_by_path(receipt.entry) or index.checkpoint_by_path(receipt.entry)
        if current is None or current.sha256 != receipt.file_sha256:
            raise RegistryError(
                "gate.entry-changed", receipt.entry, "the entry changed while the gate ran", "run the gate again"
            )
        current.gate = gate_summary(receipt)
        atomic_write(target, data)
        txn.write(INDEX_NAME, render_index(index))
        stage_derived(repo, txn, index)


def smoke(
    root: Path,
    paths: list[str],
    base_file: Path | None,
    device: str,
    say: Say | None = None,
    *,
    fetch_into: Path | None = None,
    sign_key: Path | None = None,
    max_gpu_memory: int | None = None,
) -> list[Receipt]:
    """Gate the chosen entries (all when none are named) and record a receipt for each.

    ``base_file`` (or ``fetch_into``, a folder to download it into) is needed when a State or MiSS
    entry is chosen.  Entries that cannot be gated (they do not fit their base) are refused
    together at the end, after the others' receipts.  ``sign_key`` signs every receipt.
    ``max_gpu_memory`` (bytes; default what the card has free) is what each group is planned to
    fit (:mod:`registry.gate.memory`): a card too small is refused before anything loads.
    """
    say = say or silent
    if base_file and fetch_into:
        raise RegistryError(
            "args.conflict",
            "--fetch-base",
            "--fetch-base downloads the base that --base-file names",
            "drop one of them",
        )
    if sign_key:
        public_pem(sign_key)  # a bad key is refused before the gate runs, not after
    repo = Repo.open(root)
    index = repo.load_index()
    if device == "cpu":
        return_large_frees()  # the two runtimes' loaders' temporaries would stay in the heap (RSS)
    if device == "cuda" and not torch.cuda.is_available():
        raise RegistryError(
            "gate.no-cuda",
            "--device cuda",
            "CUDA is not available on this machine",
            "run on a GPU machine, or use --device cpu (publish then needs --allow-cpu-gate)",
        )
    entries, checkpoints = _select(index, repo, paths)
    on_base = [e for e in entries if e.method != "full"]
    if on_base and fetch_into:
        base_file = fetch_base(index, on_base, fetch_into, say)
    if on_base and (not base_file or not base_file.is_file()):
        raise RegistryError(
            "gate.no-base",
            base_file or "--base-file",
            f"{on_base[0].path} is a {on_base[0].method} entry: it runs on its base checkpoint",
            "pass --base-file BASE.pth (the file the entries were trained on)",
        )
    full = [e for e in entries if e.method == "full"]
    # Planned before anything is opened, built or loaded: a card too small is refused at once.
    gpu = gpu_budget(max_gpu_memory) if device == "cuda" else None
    plan_groups(index, gpu, on_base, base_file.stat().st_size if on_base and base_file else 0, full)
    checkpoint_plans = [plan_checkpoint(gpu, checkpoint, index) for checkpoint in checkpoints]
    with ExitStack() as pins, background_builds(device) as builds:
        # Every input is opened once, checked (registered files against the index, the base by
        # its hash), and read through that open file for the whole gate.
        reads = {
            **gate_files(index, entries),
            **{rel: sha for c in checkpoints for rel, sha in c.weight_files().items()},
        }
        opened = {rel: pins.enter_context(open_registered(repo.root, rel)) for rel in reads}
        base = pins.enter_context(pinned(base_file, "base checkpoint")) if on_base and base_file else None
        if base:
            refuse_pointer(base.stable, base_file)
        base_name = f"base/{base.path.name}" if base else ""
        view = pins.enter_context(
            read_view({f"registry/{rel}": pin for rel, pin in opened.items()} | ({base_name: base} if base else {}))
        )
        run = Run(
            index,
            device,
            view / "registry",
            opened,
            StatCache(repo.stat_cache_path),
            say,
            accept_weight,
            lambda receipt: _write_receipt(repo, receipt, sign_key),
            gpu=gpu,
        )
        gate_entries(run, builds, on_base, base, view / base_name, full)
        for checkpoint, plan in zip(checkpoints, checkpoint_plans, strict=True):
            with out_of_memory_named([checkpoint.path], plan):
                receipt = gate_checkpoint(run, builds, checkpoint, fla_to_x070)
            run.record(receipt)
            run.receipts.append(receipt)
    if run.problems:
        raise RegistryError.of(
            run.problems, {"receipts": [r.model_dump(mode="json") for r in run.receipts]}, Exit.PROBLEMS
        )
    return run.receipts
