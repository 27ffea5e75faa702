"""``registry validate``: every layout rule and cross-reference, as a list of findings.

Validation never stops at the first problem: CI wants the whole list.  Each check is a function
of a :class:`Context` that yields findings; later issues (cards, shards, immutability, gates)
register more checks in :data:`CHECKS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..artifacts.inspect import check_fits, inspect_weights
from ..atomic import transaction
from ..card import check_card
from ..convert.shards import shard_set_problems
from ..derived import stage_derived
from ..errors import Problem, RegistryError
from ..hashing import StatCache
from ..hashing.engine import Progress
from ..index_rules import base_problems, entry_problems, index_to_change, weight_paths
from ..layout import (
    TRAIN_JSON,
    Placement,
    TreeScan,
    is_weight,
    place,
    scan_tree,
)
from ..models import Index, Rewrite, TrainJson
from ..published import immutability_findings, record_rewrites
from ..repo import INDEX_NAME, Repo, render_index
from ..schemas import load_model, read_json, schema_errors
from ..sums import SUMS_NAME, digest_tree, parse_sums, sums_problems


@dataclass
class Context:
    repo: Repo
    scan: TreeScan
    index: Index
    placements: dict[str, Placement] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # actual sha256 of every file
    listed_sums: dict[str, str] | None = None
    progress: Progress | None = None
    options: dict = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.repo.root


Check = Callable[[Context], Iterator[Problem]]


def check_index(repo: Repo) -> tuple[list[Problem], Index | None]:
    """index.json parses and matches the schema (every violation is its own finding); the index when it does."""
    try:
        data = read_json(repo.index_path, INDEX_NAME)
    except RegistryError as err:
        return [err.problem.about(INDEX_NAME)], None
    problems = [
        Problem("schema.invalid", INDEX_NAME, f"{where}: {message}", f"correct {where} (see schemas/index.schema.json)") for where, message in schema_errors(data, "index")
    ]
    if problems:
        return problems, None
    try:
        return [], repo.load_index()
    except RegistryError as err:
        return [err.problem.about(INDEX_NAME)], None


def check_bases(ctx: Context) -> Iterator[Problem]:
    yield from base_problems(ctx.index)


def check_layout(ctx: Context) -> Iterator[Problem]:
    yield from ctx.scan.findings
    bases = {b.name for b in ctx.index.bases}
    for rel in ctx.scan.files:
        placed = place(rel, bases)
        if isinstance(placed, Problem):
            yield placed
        elif placed is not None:
            ctx.placements[rel] = placed
    version_dirs = {p.version_dir for p in ctx.placements.values()}
    have_train = {p.version_dir for p in ctx.placements.values() if p.name == TRAIN_JSON}
    for directory in sorted(version_dirs - have_train):
        yield Problem("layout.missing-train-json", f"{directory}/{TRAIN_JSON}", "no train.json in this data-version directory", "add it with `registry add --train-json PATH`")


def check_train_json(ctx: Context) -> Iterator[Problem]:
    entries_by_dir: dict[str, set[str]] = {}
    for entry in ctx.index.entries:
        placed = ctx.placements.get(entry.path)
        if placed:
            entries_by_dir.setdefault(placed.version_dir, set()).add(entry.data.sha256)
    for rel, placed in sorted(ctx.placements.items()):
        if placed.name != TRAIN_JSON:
            continue
        try:
            train = load_model(ctx.root / rel, TrainJson, rel)
        except RegistryError as err:
            yield err.problem.about(rel)
            continue
        for sha in sorted(entries_by_dir.get(placed.version_dir, set()) - {train.data_sha256}):
            yield Problem("train.data-mismatch", rel, f"data_sha256 {train.data_sha256[:12]}… but an entry here says {sha[:12]}…", "make train.json and the entries name the same training data")


def check_entries(ctx: Context) -> Iterator[Problem]:
    index = ctx.index
    yield from entry_problems(index)
    base_by_sha = {b.sha256: b for b in index.bases}
    listed = set(weight_paths(index))
    files = set(ctx.scan.files)
    for entry in index.entries:
        base = base_by_sha.get(entry.base_sha256)
        if entry.path not in files:
            yield Problem("index.missing-file", entry.path, "listed in index.json but not on disk", "restore the file or remove the entry")
            continue
        placed = ctx.placements.get(entry.path)
        if placed and base and (placed.base, placed.method, placed.version) != (base.name, entry.method, entry.data.version):
            yield Problem("index.misplaced", entry.path, f"entry says {base.name}/{entry.method}/{entry.data.version}", "move the file to its canonical path or fix the entry")
    for rel in ctx.scan.files:
        if is_weight(rel) and rel not in listed:
            yield Problem("index.unlisted-weight", rel, "weight file is not listed in index.json", f"register it with `registry add {rel} ...` or delete it")


def check_sums(ctx: Context) -> Iterator[Problem]:
    """SHA256SUMS lists exactly the files on disk, with their real hashes."""
    ctx.digests = digest_tree(ctx.root, ctx.scan.files, StatCache(ctx.repo.stat_cache_path), ctx.progress)
    if not ctx.repo.sums_path.is_file():
        yield Problem("sums.missing", SUMS_NAME, "SHA256SUMS is missing", "run `registry sums`")
        return
    try:
        ctx.listed_sums = parse_sums(ctx.repo.read_bytes(ctx.repo.sums_path))
    except RegistryError as err:
        yield err.problem.about(SUMS_NAME)
        return
    yield from sums_problems(ctx.listed_sums, ctx.digests)


def check_twins(ctx: Context) -> Iterator[Problem]:
    """Single-file safetensors entries pass add's acceptance rule (headers only: no torch).

    ``.pth`` entries were inspected by ``add`` and their bytes are pinned by sha256; a twin may
    come from a pull request with index.json and SHA256SUMS made to match, so it is read again.
    """
    bases = {b.sha256: b for b in ctx.index.bases}
    files = set(ctx.scan.files)
    for entry in ctx.index.entries:
        base = bases.get(entry.base_sha256)
        if entry.format != "safetensors" or entry.path not in files or base is None:
            continue
        try:
            check_fits(entry.method, inspect_weights(ctx.root / entry.path), base, entry.path)
        except RegistryError as err:
            yield from err.naming(str(ctx.root / entry.path), entry.path).problems


def check_entry_hashes(ctx: Context) -> Iterator[Problem]:
    """index.json's sha256/size of each entry equal the file's (and so SHA256SUMS's)."""
    for entry in ctx.index.entries:
        refs = [(entry.path, entry.sha256, entry.size)] + [(s.path, s.sha256, s.size) for s in entry.shards]
        for path, sha, size in refs:
            actual = ctx.digests.get(path)
            if actual is None:
                continue
            if actual != sha:
                yield Problem("index.sha-mismatch", path, f"index.json says sha256 {sha[:12]}… but the file is {actual[:12]}…", "restore the file, or re-add it with `registry add`")
            elif (ctx.root / path).stat().st_size != size:
                yield Problem("index.size-mismatch", path, f"index.json says {size} bytes", "re-add the file with `registry add`")


def check_shards(ctx: Context) -> Iterator[Problem]:
    """A sharded checkpoint's index, shards and weight_map agree with each other and the entry."""
    files = set(ctx.scan.files)
    for entry in ctx.index.entries:
        if entry.format != "safetensors-sharded" or entry.path not in files:
            continue
        listed = {s.path.rsplit("/", 1)[-1] for s in entry.shards}
        for problem in shard_set_problems(ctx.root / entry.path, listed):
            yield Problem("shards.invalid", entry.path, problem, "re-run `registry convert --force` on the source .pth")


def check_immutable(ctx: Context) -> Iterator[Problem]:
    yield from immutability_findings(ctx.repo, ctx.index, ctx.digests)


CHECKS: list[Check] = [
    check_bases,
    check_layout,
    check_train_json,
    check_entries,
    check_sums,
    check_entry_hashes,
    check_twins,
    check_shards,
    check_immutable,
    check_card,
]


def validate_index_file(path: Path) -> list[Problem]:
    """Check one index.json on its own (schema and base rules), e.g. the known-bases catalog."""
    path = Path(path)
    repo = Repo(path.parent.absolute())
    if path.name != INDEX_NAME:
        raise RegistryError("layout.no-index", path, "expected a file named index.json", "pass the path of an index.json")
    findings, index = check_index(repo)
    if index is not None:
        findings.extend(check_bases(Context(repo=repo, scan=TreeScan(), index=index)))
    return findings


def validate(root: Path, progress: Progress | None = None, **options) -> list[Problem]:
    """All findings for the registry at ``root`` (empty when clean)."""
    repo = Repo.open(root, must_exist=False)
    if not any(repo.root.iterdir()):
        return [Problem("layout.empty", str(repo.root), "the directory is empty", f"run `registry init {repo.root}`")]
    if not repo.index_path.is_file():
        return [Problem("layout.no-index", INDEX_NAME, "index.json is missing", f"run `registry init {repo.root}`")]
    scan = scan_tree(repo.root)
    findings, index = check_index(repo)
    if index is None:
        return findings
    ctx = Context(repo=repo, scan=scan, index=index, progress=progress, options=options)
    for check in CHECKS:
        findings.extend(check(ctx))
    return findings


def allow_rewrite(root: Path, reason: str) -> list[Rewrite]:
    """Record every unrecorded change to a published file with ``reason``, then refresh the
    derived files (index.json, card, SHA256SUMS) in one transaction."""
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        digests = digest_tree(repo.root, scan_tree(repo.root).files, StatCache(repo.stat_cache_path))
        added = record_rewrites(repo, index, digests, reason)
        if added:
            txn.write(INDEX_NAME, render_index(index))
            stage_derived(repo, txn, index, absorb={r.path for r in added})
    return added
