"""``registry validate``: every layout rule and cross-reference, as a list of findings.

Validation never stops at the first problem: CI wants the whole list.  Each check is a function
of a :class:`Context` that yields findings; later issues (cards, shards, immutability, gates)
register more checks in :data:`CHECKS`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..artifacts.accept import accept_weight, content_version
from ..artifacts.inspect import check_fits, inspect_weights
from ..artifacts.signature import STALE_FIX, SignaturePolicy
from ..card import check_rendered
from ..convert.shards import shard_set_problems
from ..core.atomic import transaction
from ..core.author_evaluation import author_evaluation_problems
from ..core.errors import Problem, RegistryError
from ..core.evaluation import reference_problems
from ..core.gitattributes import lfs_problems
from ..core.hashing import StatCache
from ..core.hashing.engine import Progress
from ..core.hashing.tree import digest_tree
from ..core.layout import declared_root, is_weight, place
from ..core.lfs import Pointer, pointer_problem, pointers, read_pointer
from ..core.models import Entry, FileRef, Index, Rewrite
from ..core.names import EVALUATION_NAME, GITATTRIBUTES_NAME, INDEX_NAME, LFS_SUFFIXES, SIGNATURE_NAME, TRAIN_JSON
from ..core.published import record_rewrites
from ..core.repo import Repo, is_dataset, no_registry, render_index
from ..core.schemas import format_problem, read_json, schema_errors
from ..core.train import read_train, train_problems
from ..core.tree import TreeScan, scan_tree
from ..core.validation_result import Validation
from ..gguf.check import gguf_problems
from ..hf.check import export_problems, listed_files
from ..index.derived import stage_derived
from ..index.rules import base_problems, entry_problems, index_to_change, weight_paths
from ..index.validation import ACCEPT_BYTES, POINTER_FIX, Check, Context, check_immutable, check_sums
from .validate_dataset import model_link_findings, validate_dataset


def check_index(repo: Repo) -> tuple[list[Problem], Index | None]:
    """index.json parses and matches the schema (every violation is its own finding); the index when it does."""
    try:
        data = read_json(repo.index_path, INDEX_NAME)
    except RegistryError as err:
        return [err.problem.about(INDEX_NAME)], None
    if not (isinstance(data, dict) and "format_version" in data):
        return [
            Problem(
                "index.not-a-registry",
                INDEX_NAME,
                "index.json was not written by registry (a hand-written index?)",
                f"run `registry adopt {repo.root}`: it maps what it can and lists the rest",
            )
        ], None
    outdated = format_problem(data, Index, INDEX_NAME)
    if outdated:  # nothing else can be checked against this version's rules: refused, as every command does
        raise RegistryError.of([outdated])
    problems = [
        Problem("schema.invalid", INDEX_NAME, f"{where}: {message}", f"correct {where} (see schemas/index.schema.json)")
        for where, message in schema_errors(data, "index")
    ]
    if problems:
        return problems, None
    try:
        return [], repo.load_index()
    except RegistryError as err:
        return [err.problem.about(INDEX_NAME)], None


def check_bases(ctx: Context) -> Iterator[Problem]:
    yield from base_problems(ctx.index)


def check_references(ctx: Context) -> Iterator[Problem]:
    yield from reference_problems(ctx.index)


def check_layout(ctx: Context) -> Iterator[Problem]:
    yield from ctx.scan.findings
    bases = {b.name for b in ctx.index.bases}
    declared = declared_root(ctx.index)
    for rel in ctx.scan.files:
        placed = place(rel, bases, declared)
        if isinstance(placed, Problem):
            yield placed
        elif placed is not None:
            ctx.placements[rel] = placed
    wanted = {p.train_json for p in ctx.placements.values()}
    have_train = {p.train_json for p in ctx.placements.values() if p.name == TRAIN_JSON}
    for rel in sorted(wanted - have_train):
        where = "beside the root weights" if rel == TRAIN_JSON else "in this data-version directory"
        yield Problem(
            "layout.missing-train-json",
            rel,
            f"no train.json {where}",
            f'write it (trainer, hyperparameters, command, data identity: docs/formats.md, "train.json") at {rel}',
        )


def check_train_json(ctx: Context) -> Iterator[Problem]:
    entries_by_dir: dict[str, set[tuple[str | None, str | None]]] = {}
    for entry in ctx.index.entries:
        placed = ctx.placements.get(entry.path)
        if placed:
            data = entry.data
            entries_by_dir.setdefault(placed.train_json, set()).add(
                (data.sha256, None) if data.sha256 else (data.dataset_repo, data.dataset_revision)
            )
    for rel, placed in sorted(ctx.placements.items()):
        if placed.name != TRAIN_JSON:
            continue
        try:
            train = read_train(ctx.root / rel, rel)
        except RegistryError as err:
            yield from err.problems
            continue
        base = ctx.index.base_by_name(placed.base)
        if base is not None:
            yield from train_problems(train, rel, base, placed.version)
        written = (train.data_sha256, None) if train.data_sha256 else (train.data.repo, train.data.revision)
        for cited in sorted(entries_by_dir.get(rel, set()) - {written}, key=str):
            said = "data " + (
                f"sha256 {str(cited[0])[:12]}…" if cited[1] is None else f"{cited[0]}@{str(cited[1])[:12]}…"
            )
            yield Problem(
                "train.data-mismatch",
                rel,
                f"names other training data than an entry here ({said})",
                "make train.json and the entries name the same training data",
            )


def check_author_evaluations(ctx: Context) -> Iterator[Problem]:
    placed = {rel for rel, p in ctx.placements.items() if p.name == EVALUATION_NAME}
    yield from author_evaluation_problems(ctx.root, ctx.index, placed)


def check_entries(ctx: Context) -> Iterator[Problem]:
    index = ctx.index
    yield from entry_problems(index)
    base_by_sha = {b.sha256: b for b in index.bases}
    listed = set(weight_paths(index)) | listed_files(index)
    files = set(ctx.scan.files)
    for entry in index.entries:
        base = base_by_sha.get(entry.base_sha256)
        if entry.path not in files:
            yield Problem(
                "index.missing-file",
                entry.path,
                "listed in index.json but not on disk",
                "restore the file or remove the entry",
            )
            continue
        placed = ctx.placements.get(entry.path)
        if (
            placed
            and base
            and (placed.base, placed.method, placed.version) != (base.name, entry.method, entry.data.version)
        ):
            yield Problem(
                "index.misplaced",
                entry.path,
                f"entry says {base.name}/{entry.method}/{entry.data.version}",
                "move the file to its canonical path or fix the entry",
            )
    for rel in ctx.scan.files:
        if is_weight(rel) and rel not in listed:
            yield Problem(
                "index.unlisted-weight",
                rel,
                "weight file is not listed in index.json",
                f"register it with `registry add {rel} ...` or delete it",
            )


# Where a changed weight or published file leads: `registry sums` alone would leave the entry's
# sha256 (or the immutability record) disagreeing, and `registry add` refuses a registered path.
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
            if actual is None or path in ctx.pointers:  # a pointer's oid and size: check_pointers
                continue
            if actual != sha:
                yield Problem(
                    "index.sha-mismatch",
                    path,
                    f"index.json says sha256 {sha[:12]}… but the file is {actual[:12]}…",
                    ACCEPT_BYTES,
                )
            elif (ctx.root / path).stat().st_size != size:
                yield Problem("index.size-mismatch", path, f"index.json says {size} bytes", ACCEPT_BYTES)


def check_shards(ctx: Context) -> Iterator[Problem]:
    """A sharded checkpoint's index, shards and weight_map agree with each other and the entry."""
    files = set(ctx.scan.files)
    for entry in ctx.index.entries:
        if entry.format != "safetensors-sharded" or entry.path not in files:
            continue
        listed = {s.path.rsplit("/", 1)[-1] for s in entry.shards}
        for problem in shard_set_problems(ctx.root / entry.path, listed):
            yield Problem("shards.invalid", entry.path, problem, "re-run `registry convert --force` on the source .pth")


def check_exports(ctx: Context) -> Iterator[Problem]:
    """Transformers exports against their sources and their folders (:mod:`registry.hf.check`)."""
    yield from export_problems(ctx.root, ctx.index, ctx.scan.files, ctx.digests)


def check_gitattributes(ctx: Context) -> Iterator[Problem]:
    """.gitattributes sends every weight and GGUF file through Git LFS (SHA256SUMS covers its bytes)."""
    path = ctx.root / GITATTRIBUTES_NAME
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return  # the tree walk reports it
    text = ctx.repo.read_bytes(path).decode("utf-8", errors="replace") if path.is_file() else None
    yield from lfs_problems(text, [rel for rel in ctx.scan.files if rel.endswith(LFS_SUFFIXES)])


def check_ggufs(ctx: Context) -> Iterator[Problem]:
    """GGUF files against their records, their sources and their headers (:mod:`registry.gguf.check`)."""
    yield from gguf_problems(ctx.root, ctx.index, ctx.scan.files, ctx.digests)


def _recorded(index: Index) -> dict[str, tuple[str, int]]:
    """Every file index.json records with its sha256 and size (entries, shards, exports, GGUFs)."""
    found: dict[str, tuple[str, int]] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            path, sha, size = node.get("path"), node.get("sha256"), node.get("size")
            if isinstance(path, str) and isinstance(sha, str) and isinstance(size, int):
                found[path] = (sha, size)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(index.model_dump(mode="json"))
    return found


def check_pointers(ctx: Context) -> Iterator[Problem]:
    """Pointer mode: each Git LFS pointer's oid and size against what index.json records for the
    file (SHA256SUMS's sha256 is compared in :func:`check_sums`)."""
    recorded = _recorded(ctx.index)
    for rel, pointer in sorted(ctx.pointers.items()):
        if rel not in recorded:
            continue
        sha, size = recorded[rel]
        if pointer.oid != sha and ctx.listed_sums is not None and ctx.listed_sums.get(rel) == pointer.oid:
            yield Problem(
                "lfs.oid-mismatch",
                rel,
                f"the Git LFS pointer's oid is {pointer.oid[:12]}… but index.json says {sha[:12]}…",
                POINTER_FIX,
            )
        if pointer.size != size:
            yield Problem(
                "lfs.size-mismatch",
                rel,
                f"the Git LFS pointer says {pointer.size} bytes but index.json says {size}",
                POINTER_FIX,
            )


def check_signature(ctx: Context) -> Iterator[Problem]:
    """model.sig against SHA256SUMS (as checked against the files) and index.json's signer: it
    parses, signs exactly what SHA256SUMS lists with the same sha256, by the recorded key hint; with
    ``--public-key`` also that the key signed it.  A recorded signer needs a model.sig."""
    if ctx.listed_sums is None or not ctx.options.get("signature"):
        return  # SHA256SUMS's own finding says what to do first; the signature is compared with it then
    public_key = ctx.options.get("public_key")
    policy = SignaturePolicy(public_key, required=public_key is not None)
    yield from policy.folder_problems(ctx.repo, ctx.listed_sums, signer=ctx.index.registry.signer, fix=STALE_FIX)


def check_card(ctx: Context) -> Iterator[Problem]:
    yield from check_rendered(ctx.repo, ctx.index)


def check_dataset_links(ctx: Context) -> Iterator[Problem]:
    """Every entry's data sha256 against a linked dataset registry (``--linked``, ``--linked-hub``)."""
    if not (ctx.options.get("linked") or ctx.options.get("linked_hub")):
        return  # the pre-commit hook's plain validate: no link, nothing more to import
    yield from model_link_findings(ctx.index, ctx.options)


CHECKS: list[Check] = [
    check_bases,
    check_references,
    check_layout,
    check_train_json,
    check_author_evaluations,
    check_entries,
    check_sums,
    check_pointers,
    check_signature,
    check_entry_hashes,
    check_twins,
    check_shards,
    check_exports,
    check_gitattributes,
    check_ggufs,
    check_immutable,
    check_card,
    check_dataset_links,
]


def validate_index_file(path: Path) -> list[Problem]:
    """Check one index.json on its own (schema and base rules), e.g. the known-bases catalog."""
    path = Path(path)
    repo = Repo(path.parent.absolute())
    if path.name != INDEX_NAME:
        raise RegistryError(
            "layout.no-index", path, "expected a file named index.json", "pass the path of an index.json"
        )
    findings, index = check_index(repo)
    if index is not None:
        findings.extend(check_bases(Context(repo=repo, scan=TreeScan(), index=index)))
    return findings


# The checks that read a file's bytes beyond its sha256 (tensor inspection: safetensors and GGUF
# headers, shard sets, Transformers exports): in pointer mode their findings about a pointer (or a
# folder holding one) are dropped, and the report names them as skipped.
NEEDS_BYTES: tuple[Check, ...] = (check_twins, check_shards, check_exports, check_ggufs)


def validate(
    root: Path,
    progress: Progress | None = None,
    linked: Path | None = None,
    linked_hub: bool = False,
    hub_progress: bool = True,
) -> list[Problem]:
    """All findings for the registry at ``root`` (empty when clean); with ``linked`` (a local
    registry) or ``linked_hub`` its data links too (``hub_progress``: the Hub client's bars).
    For the commands that go on to use the files (publish, pull, the demo): a Git LFS pointer is a
    finding, and model.sig is left to their own signature policy (the fix differs by side)."""
    return validate_report(
        root, progress, linked, linked_hub, hub_progress, require_bytes=True, signature=False
    ).problems


def validate_report(
    root: Path,
    progress: Progress | None = None,
    linked: Path | None = None,
    linked_hub: bool = False,
    hub_progress: bool = True,
    require_bytes: bool = False,
    public_key: Path | None = None,
    signature: bool = True,
) -> Validation:
    """:func:`validate` with what it did.  Where Git LFS pointers stand for files (a checkout made
    with ``GIT_LFS_SKIP_SMUDGE=1``), each pointer's oid and size are checked against SHA256SUMS and
    index.json and the checks that need bytes are skipped (``require_bytes``: each pointer is a
    finding instead).  ``signature``: check model.sig (``public_key``: it must verify with that key,
    the signing extra)."""
    repo = Repo.open(root, must_exist=False)
    if not repo.index_path.is_file():
        return Validation([no_registry(repo.root).problem()])
    if is_dataset(repo.root):  # "kind": "dataset": seed 002's repo shape (registry/dataset/)
        return Validation(validate_dataset(repo, progress, linked, linked_hub, hub_progress))
    scan = scan_tree(repo.root)
    findings, index = check_index(repo)
    if index is None:
        return Validation(findings)
    options = {
        "linked": linked,
        "linked_hub": linked_hub,
        "hub_progress": hub_progress,
        "public_key": public_key,
        "signature": signature,
    }
    ctx = Context(repo=repo, scan=scan, index=index, progress=progress, options=options)
    found = pointers(repo.root, scan.files)
    if require_bytes:
        found = []
    for rel in found:
        pointer = read_pointer(repo.root, rel)
        if isinstance(pointer, Problem):
            findings.append(pointer)
        else:
            ctx.pointers[rel] = pointer
    for check in CHECKS:
        results = list(check(ctx))
        if ctx.pointers and check in NEEDS_BYTES:
            results = [f for f in results if not _needs_pointed_bytes(f.file, ctx.pointers)]
        findings.extend(results)
    checked = None
    if (
        signature
        and ctx.listed_sums is not None
        and (repo.root / SIGNATURE_NAME).is_file()
        and not (repo.root / SIGNATURE_NAME).is_symlink()
    ):
        checked = "public-key" if public_key else "consistency"
    if require_bytes:
        findings = _pointers_named_once(repo, scan, findings)
    return Validation(_pointer_findings_first(findings, set(found)), sorted(found), checked)


def _needs_pointed_bytes(file: str | None, found: dict[str, Pointer]) -> bool:
    """Whether a byte check's finding is about a pointer, or a folder (an export) holding one."""
    return file is not None and any(rel == file or rel.startswith(file.rstrip("/") + "/") for rel in found)


def _pointer_findings_first(findings: list[Problem], found: set[str]) -> list[Problem]:
    """A pointer whose oid or size disagrees is said once, as that: the index and immutability
    findings the other oid causes (which advise rewrites) are dropped for it."""
    named = {f.file for f in findings if f.code.startswith("lfs.") and f.file in found}
    return [f for f in findings if f.file not in named or f.code.startswith("lfs.")]


def _pointers_named_once(repo: Repo, scan: TreeScan, findings: list[Problem]) -> list[Problem]:
    """A Git LFS pointer where a file belongs is one finding with the fix that works, instead of
    the checksum, index and immutability findings its other bytes cause (which advise rewrites)."""
    found = set(pointers(repo.root, scan.files))
    if not found:
        return findings
    return [pointer_problem(rel) for rel in sorted(found)] + [f for f in findings if f.file not in found]


@dataclass
class Adopted:
    """What ``--allow-rewrite`` did: rewrites recorded, entries given new bytes, what was dropped."""

    rewrites: list[Rewrite] = field(default_factory=list)
    updated: set[str] = field(default_factory=set)
    dropped: set[str] = field(default_factory=set)  # deleted twins' files, no longer listed
    notes: list[str] = field(default_factory=list)


def _files(entry: Entry) -> list[Entry | FileRef]:
    """The entry's main file and its shards."""
    return [entry, *entry.shards]


def _changed(entry: Entry, digests: dict[str, str]) -> bool:
    return any(digests.get(r.path) not in (None, r.sha256) for r in _files(entry))


def _stale_twins(index: Index, changed: list[Entry], files: set[str]) -> tuple[list[Entry], list[Problem]]:
    """Twins of changed sources: already deleted ones are dropped; the rest refuse the rewrite."""
    sources = {e.path for e in changed if e.derived_from is None}
    twins = [e for e in index.entries if e.derived_from in sources]
    missing = [t for t in twins if t.path not in files]
    problems = [
        Problem(
            "rewrite.stale-twin",
            twin.path,
            f"converted from {twin.derived_from}, whose bytes changed",
            f"delete {twin.path}, run `registry validate --allow-rewrite REASON` again (it drops the stale twin), then `registry convert {twin.derived_from}`",
        )  # fmt: skip
        for twin in twins
        if twin.path in files
    ]
    return missing, problems


def _accept(root: Path, index: Index, entry: Entry, digests: dict[str, str]) -> None:
    """add's acceptance rule on the new bytes; a twin's bytes come from its source and are not accepted."""
    if entry.derived_from is not None:
        raise RegistryError(
            "rewrite.twin-changed",
            entry.path,
            f"a safetensors twin of {entry.derived_from} changed",
            f"restore it with `registry convert {entry.derived_from} --force`",
        )
    base = index.base_by_sha(entry.base_sha256)
    if base is None:
        raise RegistryError(
            "rewrite.unknown-base",
            entry.path,
            "the entry's base is not in index.json",
            "restore the original bytes, or add its base first",
        )
    path = root / entry.path
    try:
        inspection = accept_weight(path, entry.method, base, entry.path)
    except RegistryError as err:
        raise err.naming(str(path), entry.path) from err
    entry.content_version = content_version(inspection)
    for ref in _files(entry):
        ref.sha256, ref.size = digests.get(ref.path, ref.sha256), (root / ref.path).stat().st_size
    entry.gate = None  # the receipt was for the old bytes: publish asks for a new one


def adopt_entry_bytes(root: Path, index: Index, digests: dict[str, str]) -> Adopted:
    """Give every entry whose file changed its new bytes, re-checked as ``registry add`` checks them.

    Refused (nothing changed) when the new bytes do not fit the base, when a safetensors twin
    changed, when a changed source still has a twin on disk, or when two entries would share one
    sha256.  Twins of a changed source that were deleted are dropped; the changed weight's old
    results were measured on other bytes, so they are dropped too (``notes`` says which)."""
    done = Adopted()
    changed = [e for e in index.entries if _changed(e, digests)]
    missing, problems = _stale_twins(index, changed, set(digests))
    if problems:
        raise RegistryError.of(problems)
    for entry in changed:
        _accept(root, index, entry, digests)
        done.updated.update(r.path for r in _files(entry))
        if entry.scores:
            done.notes.append(
                f"dropped {len(entry.scores)} result(s) of {entry.path}: measured on its old bytes; record them again with `registry score`"
            )
            entry.scores = []
    for twin in missing:
        index.entries.remove(twin)
        done.dropped.update(r.path for r in _files(twin))
        done.notes.append(
            f"dropped the stale twin {twin.path}; make a new one with `registry convert {twin.derived_from}`"
        )
    by_sha: dict[str, str] = {}
    for entry in index.entries:
        other = by_sha.setdefault(entry.sha256, entry.path)
        if other != entry.path and (entry.path in done.updated or other in done.updated):
            raise RegistryError(
                "entry.duplicate",
                entry.path,
                f"the new bytes are the same as {other}'s",
                "restore the original bytes: one file is registered once",
            )
    return done


def allow_rewrite(root: Path, reason: str) -> Adopted:
    """Accept the changed bytes of registered and published files: record every unrecorded change
    to a published file with ``reason``, update the entries of changed weights (re-checked like
    ``registry add``), then refresh the derived files (index.json, card, evaluation.json,
    SHA256SUMS) in one transaction.  A refusal changes nothing."""
    repo = Repo.open(root)
    if is_dataset(repo.root):
        raise RegistryError(
            "dataset.no-rewrite",
            INDEX_NAME,
            "a dataset's published files are not rewritten in place",
            "restore the published bytes: changed data is a new version (`registry dataset add`), trained into new weights",
        )
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        digests = digest_tree(repo.root, scan_tree(repo.root).files, StatCache(repo.stat_cache_path))
        done = adopt_entry_bytes(repo.root, index, digests)
        done.rewrites = record_rewrites(repo, index, digests, reason)
        if done.rewrites or done.updated or done.notes:
            txn.write(INDEX_NAME, render_index(index))
            stage_derived(repo, txn, index, absorb={r.path for r in done.rewrites} | done.updated | done.dropped)
    return done
