"""``registry adopt``: a hand-made Hub repo (a clone or a download) becomes a registry in place.

Everything is checked before anything is written, without the lock and without creating the
private folder, so a refusal leaves the folder exactly as it was:

1. the tree: no links, special files or Git LFS pointers (``git lfs pull`` first);
2. every file is hashed once, and an existing SHA256SUMS must agree with the files, each
   difference named;
3. a hand-written index.json is read for what maps (:mod:`registry.index.handmade`);
4. each ``<base>/`` folder gets its base from ``--base-file`` (read, as add-base reads it), the
   known-bases catalog, or ``--sha256 --metadata-only``; each weight is inspected exactly as
   ``registry add`` inspects it (:func:`registry.ops.add.accept_weight`), each train.json is read
   and validated;
5. where the hand-written index and the files disagree, the files win only with ``--trust-files``.

Then one transaction (the lock, then the files re-checked unchanged since step 2) writes index.json,
the card (the hand-written README kept whole as its hand-written section), evaluation.json,
SHA256SUMS, .gitattributes and .gitignore; the replaced originals are kept in ``.registry/adopted/``.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..card import stage_rendered
from ..card.handwritten import split_front_matter
from ..card.render import decode_card
from ..core.atomic import finish_interrupted, transaction
from ..core.errors import Problem, RegistryError
from ..core.files import dry_run
from ..core.hashing import hash_files
from ..core.hashing.engine import Progress
from ..core.layout import Placement, export_folder, is_excluded, is_weight, place
from ..core.lfs import refuse_pointers
from ..core.models import METHODS, Base, DataRef, Entry, Index, RegistryInfo, TrainJson, path_problem
from ..core.names import ADOPTED_DIR, CARD_NAME, DERIVED, DOCS_DIR, INDEX_NAME, PRIVATE_DIR, SHARD_INDEX, SUMS_NAME, TRAIN_JSON
from ..core.repo import Repo, find_root, render_index
from ..core.schemas import load_model, read_json
from ..core.staged_sums import remember_digests, stage_sums
from ..core.sums import parse_sums
from ..core.tree import scan_tree
from ..index.arguments import require_sha
from ..index.catalog import check_against_catalog, known_base, load_catalog
from ..index.handmade import HandIndex, read_hand_index
from ..index.rules import index_problems
from .add import accept_weight, content_version, set_recommended
from .add_base import BaseRequest, fingerprint_base
from .init import git_file_changes, stage_git_files, stage_kept_card

SAVED_DIR = f"{PRIVATE_DIR}/{ADOPTED_DIR}"  # the originals adopt replaced, never published
TRUST_FILES = "--trust-files"
_CJK = re.compile("[\u3400-\u9fff]")


@dataclass(frozen=True)
class AdoptOptions:
    base_files: tuple[Path, ...] = ()
    sha256: str | None = None  # with metadata_only: the one base folder no other source names
    metadata_only: bool = False
    source: str | None = None
    vocab: str | None = None
    trust_files: bool = False  # where the hand-written index.json and the files disagree, the files win
    dry_run: bool = False


@dataclass
class AdoptReport:
    """What adopt found and did (or, with --dry-run, would do)."""

    root: Path
    dry_run: bool
    index: Index
    writes: list[str] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)
    mapped: list[str] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    overridden: list[str] = field(default_factory=list)
    readme: str = "none"
    score_steps: list[str] = field(default_factory=list)  # `registry score` lines for results that did not map

    @property
    def next_steps(self) -> list[str]:
        """The commands for the facts still missing: results, the licence, the gate, publishing."""
        index, root = self.index, shlex.quote(str(self.root))
        steps = list(self.score_steps)
        if not index.registry.license:
            steps.append(f"registry set license SPDX-ID -C {root}")
        for base in index.bases:
            if any(e.base_sha256 == base.sha256 for e in index.entries):
                steps.append(f"registry smoke -C {root} --base-file {shlex.quote(base.filename)}")
        steps.append(f"registry publish -C {root} --repo-id NAMESPACE/NAME")
        return steps

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": True, "dry_run": self.dry_run, "registry": str(self.root),
            "bases": [{"name": b.name, "sha256": b.sha256, "source": b.source, "checked": b.architecture is not None} for b in self.index.bases],
            "entries": [{"path": e.path, "method": e.method, "data_version": e.data.version, "sha256": e.sha256, "recommended": e.recommended, "scores": len(e.scores)} for e in self.index.entries],
            "writes": self.writes, "saved": self.saved, "mapped": self.mapped, "unmapped": self.unmapped,
            "overridden": self.overridden, "readme": self.readme, "next_steps": self.next_steps,
        }  # fmt: skip


@dataclass
class _Plan:
    report: AdoptReport
    digests: dict[str, str]
    identities: dict[str, tuple[int, ...]]
    originals: dict[str, bytes]


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def adopt(root: Path, options: AdoptOptions, catalog: Index | None = None, progress: Progress | None = None) -> AdoptReport:
    """Adopt the folder ``root`` (see the module docstring); a refusal changes nothing."""
    root = Path(root).absolute()
    with dry_run(options.dry_run):  # a dry run writes nothing, caches included
        _check_folder(root)
        plan = _plan(root, options, catalog if catalog is not None else load_catalog(), progress)
    if options.dry_run:
        return plan.report
    repo = Repo(root)
    with transaction(root) as txn:
        _require_unchanged(root, plan.identities)
        txn.write(INDEX_NAME, render_index(plan.report.index))
        for name, data in plan.originals.items():
            txn.write(f"{SAVED_DIR}/{name}", data)
        stage_git_files(repo, txn)
        stage_kept_card(repo, txn)
        stage_rendered(repo, txn, plan.report.index)
        stage_sums(repo, txn, progress, absorb=True, known=plan.digests)
        txn.after_commit(lambda: remember_digests(repo, plan.digests))
    return plan.report


def _require_unchanged(root: Path, identities: dict[str, tuple[int, ...]]) -> None:
    """Under the lock: the folder holds exactly the files adopt read, unchanged since."""
    files = set(scan_tree(root).files)
    changed = sorted(files ^ set(identities)) + [rel for rel in sorted(files & set(identities)) if _identity(os.stat(root / rel, follow_symlinks=False)) != identities[rel]]
    if changed:
        raise RegistryError("fs.changed", changed[0], "changed while adopt was reading the folder", "run `registry adopt` again once nothing else writes to it")


def _check_folder(root: Path) -> None:
    if not root.is_dir():
        raise RegistryError("args.not-a-directory", root, "no such directory", "pass the folder of the cloned or downloaded repo")
    finish_interrupted(root)  # an interrupted adopt: finish it first
    enclosing = find_root(root.parent) if root.parent != root else None
    if enclosing is not None:
        raise RegistryError("adopt.inside-registry", root, f"this folder is inside the registry at {enclosing}", "adopt a folder outside any registry")
    index = root / INDEX_NAME
    if index.is_file() and not index.is_symlink():
        try:  # the tool always writes format_version; a hand-written index need not name it
            if "format_version" not in read_json(index, INDEX_NAME):
                return
            load_model(index, Index, INDEX_NAME)
        except (RegistryError, TypeError):
            return  # hand-written (or not JSON, refused with its line when it is read)
        raise RegistryError("adopt.already-a-registry", root, "index.json was written by registry: this folder is a registry already", f"run `registry validate {root}`")


# ----------------------------------------------------------------------------------------------
# Planning: every check, nothing written


def _plan(root: Path, options: AdoptOptions, catalog: Index, progress: Progress | None) -> _Plan:
    scan = scan_tree(root)
    if scan.findings:
        raise RegistryError.of(scan.findings)
    refuse_pointers(root, scan.files)
    identities = {rel: _identity(os.stat(root / rel, follow_symlinks=False)) for rel in scan.files}
    hashed = hash_files([root / rel for rel in scan.files], progress)
    digests = {path.relative_to(root).as_posix(): sha for path, sha in hashed.items()}
    repo = Repo(root)  # its read_bytes refuses a link (SHA256SUMS is outside the tree walk)
    originals = {name: repo.read_bytes(root / name) for name in (INDEX_NAME, CARD_NAME, SUMS_NAME) if (root / name).is_file() or (root / name).is_symlink()}
    _check_sums(root, originals.get(SUMS_NAME), digests)
    hand = read_hand_index(read_json(root / INDEX_NAME, INDEX_NAME)) if INDEX_NAME in originals else HandIndex()
    report = AdoptReport(root, options.dry_run, Index(), unmapped=list(hand.unmapped), saved=sorted(f"{SAVED_DIR}/{n}" for n in originals))
    bases = _bases(root, scan.files, options, catalog, hand, report, progress)
    entries = _entries(root, scan.files, bases, digests, hand, report)
    report.index = _index(bases, entries, hand, originals.get(CARD_NAME), report)
    _claims(report, options)
    report.writes = sorted({*DERIVED, *git_file_changes(repo), *report.saved})
    return _Plan(report, digests, identities, originals)


def _check_sums(root: Path, data: bytes | None, digests: dict[str, str]) -> None:
    """An existing SHA256SUMS must agree with every file it lists (files it does not list are fine)."""
    if data is None:
        return
    listed = {rel.removeprefix("./"): sha for rel, sha in parse_sums(data, SUMS_NAME).items()}  # `sha256sum ./x` writes ./x
    problems = []
    for rel, sha in sorted(listed.items()):
        actual = digests.get(rel)
        if actual is None and "/" not in rel and path_problem(rel) is None and is_excluded(rel) and (root / rel).is_file() and not (root / rel).is_symlink():
            actual = next(iter(hash_files([root / rel]).values()))  # e.g. a .gitattributes someone listed
        if actual is None:
            problems.append(Problem("adopt.sums-missing", rel, "listed in SHA256SUMS but not in the folder", "restore the file (download it again), or remove its line from SHA256SUMS"))
        elif actual != sha:
            problems.append(Problem("adopt.sums-mismatch", rel, f"sha256 is {actual[:12]}… but SHA256SUMS says {sha[:12]}…", "restore the file (download it again); if the file is right, correct its line in SHA256SUMS"))
    if problems:
        raise RegistryError.of(problems)


def _base_dirs(files: list[str]) -> list[str]:
    """Top-level folders laid out as ``<base>/<method>/…`` (others are checked by the layout rules)."""
    return sorted({rel.split("/")[0] for rel in files if rel.count("/") >= 2 and rel.split("/")[0] != DOCS_DIR and rel.split("/")[1] in METHODS})


def _bases(root: Path, files: list[str], options: AdoptOptions, catalog: Index, hand: HandIndex, report: AdoptReport, progress: Progress | None) -> dict[str, Base]:
    names = _base_dirs(files)
    given = {Path(f).name.removesuffix(".pth"): Path(f) for f in options.base_files}
    for name, path in given.items():
        if name not in names:
            raise RegistryError("adopt.unused-base-file", path, f"no folder {name}/ of weights in {root}", f"pass the base file whose name (without .pth) is one of: {', '.join(names) or 'none here'}")
    unresolved = [n for n in names if n not in given and known_base(catalog, f"{n}.pth") is None]
    if options.metadata_only and len(unresolved) != 1:
        raise RegistryError("adopt.metadata-only", root, f"--sha256 --metadata-only names one base folder, but {len(unresolved)} have no base ({', '.join(unresolved) or 'none'})", "pass --base-file for each base folder")
    bases: dict[str, Base] = {}
    for name in names:
        request = BaseRequest(path=given.get(name), filename=f"{name}.pth", source=options.source, vocab=options.vocab)
        if name in given:
            base = fingerprint_base(request, name, None, progress)
        elif options.metadata_only and name in unresolved:
            if options.sha256 is None:
                raise RegistryError("args.missing", "--sha256", "--metadata-only needs --sha256", "pass the base's published sha256 with --sha256")
            base = fingerprint_base(BaseRequest(None, request.filename, options.source, options.vocab), name, require_sha(options.sha256, "--sha256"), None)
        elif name in unresolved:
            raise RegistryError("adopt.unknown-base", f"{name}/", f"{name}.pth is not in the known-bases catalog, so the weights under {name}/ cannot be checked against it", f"pass --base-file {name}.pth (read, not copied)")
        else:
            base = _catalog_base(catalog, name)
        bases[name] = _with_hand_base(check_against_catalog(base, catalog), hand, report)
    return bases


def _catalog_base(catalog: Index, name: str) -> Base:
    known = known_base(catalog, f"{name}.pth")
    assert known is not None, "a base folder that is not unresolved is in the catalog"
    return known


def _with_hand_base(base: Base, hand: HandIndex, report: AdoptReport) -> Base:
    claim = hand.base(base.name, base.filename)
    if claim is None:
        return base
    facts = claim.facts
    for key in ("source", "vocab"):
        if facts.get(key) and getattr(base, key) is None:
            base = base.model_copy(update={key: facts[key]})
            report.mapped.append(f"{claim.where}.{key} -> bases[{base.name}].{key}")
    if facts.get("sha256") not in (None, base.sha256):
        report.overridden.append(f"{claim.where}.sha256: index.json says {facts['sha256']} but the base is {base.sha256}")
    elif facts.get("sha256"):
        report.mapped.append(f"{claim.where}.sha256 (agrees with the base)")
    return base


def _train_json(root: Path, rel: str, cache: dict[str, TrainJson]) -> TrainJson:
    if rel not in cache:
        if not (root / rel).is_file():
            raise RegistryError("adopt.missing-train-json", rel, "the weights of this data version have no train.json", "write it beside them (trainer, hyperparameters, command, data_sha256: docs/formats.md), then adopt again")
        cache[rel] = load_model(root / rel, TrainJson, rel)
    return cache[rel]


def _entries(root: Path, files: list[str], bases: dict[str, Base], digests: dict[str, str], hand: HandIndex, report: AdoptReport) -> list[Entry]:
    problems: list[Problem] = []
    entries: list[Entry] = []
    trains: dict[str, TrainJson] = {}
    for rel in files:
        placed = place(rel, set(bases))
        if isinstance(placed, Problem) and "/" not in rel and is_weight(rel):
            problems.append(Problem(placed.code, rel, "a weight at the root: adopt reads weights from <base>/<method>/<data-version>/", f"move it there (e.g. mkdir -p <base-stem>/full/v1 && git mv {rel} <base-stem>/full/v1/), with its train.json beside it, then adopt again"))
        elif isinstance(placed, Problem):
            problems.append(placed)
        elif placed is not None and rel.split("/")[0] in bases and export_folder(rel) is not None:
            problems.append(Problem("adopt.export-folder", rel, "a Transformers export folder made by hand", "move it out of the folder; `registry export-hf` makes one the registry checks"))
        elif placed is not None and placed.name == SHARD_INDEX:
            problems.append(Problem("adopt.sharded", rel, "a sharded checkpoint", "adopt the .pth it was converted from and run `registry convert`"))
        elif placed is not None and placed.name == TRAIN_JSON:
            try:
                _train_json(root, rel, trains)
            except RegistryError as err:
                problems.extend(err.problems)
        elif placed is not None:
            try:
                entries.append(_entry(root, rel, placed, bases[placed.base], digests[rel], trains))
            except RegistryError as err:
                problems.extend(err.naming(str(root / rel), rel).problems)
    by_sha: dict[str, str] = {}
    for entry in entries:
        other = by_sha.setdefault(entry.sha256, entry.path)
        if other != entry.path:
            problems.append(Problem("entry.duplicate", entry.path, f"the same bytes as {other}", "keep one of the two files"))
    if problems:
        raise RegistryError.of(problems)
    return entries


def _entry(root: Path, rel: str, placed: Placement, base: Base, sha: str, trains: dict[str, TrainJson]) -> Entry:
    if base.architecture is None:
        raise RegistryError("adopt.needs-base-file", rel, f"the base {base.name} was not read, so its shapes are unknown and this weight cannot be checked", f"pass --base-file {base.filename} (read, not copied)")
    inspection = accept_weight(root / rel, placed.method, base, rel)
    train = _train_json(root, f"{placed.version_dir}/{TRAIN_JSON}", trains)
    return Entry(
        path=rel, method=placed.method, base_sha256=base.sha256, data=DataRef(version=placed.version, sha256=train.data_sha256),
        sha256=sha, size=(root / rel).stat().st_size, format="safetensors" if rel.endswith(".safetensors") else "pth",
        content_version=content_version(inspection),
    )  # fmt: skip


# ----------------------------------------------------------------------------------------------
# The hand-written index and README against the files


def _index(bases: dict[str, Base], entries: list[Entry], hand: HandIndex, readme: bytes | None, report: AdoptReport) -> Index:
    info = RegistryInfo()
    text = decode_card(readme) if readme is not None else ""
    front, body = split_front_matter(text)
    title = hand.facts.get("title") or next((line[2:].strip() for line in body.splitlines() if line.startswith("# ")), None)
    if title:
        info.title = title
    license_match = re.search(r"^license:\s*(\S+)\s*$", front, re.MULTILINE)
    info.license = hand.facts.get("license") or (license_match.group(1) if license_match else None)
    if body.strip() and not _CJK.search(body):
        info.languages = ["en"]
    report.readme = "kept whole as the card's hand-written section" if body.strip() else "none: the card starts from the default"
    index = Index(registry=info, bases=list(bases.values()), entries=entries)
    for entry in entries:
        _apply_hand_entry(index, entry, hand, report)
    for claim in hand.entries:
        if index.entry_by_path(claim.path) is None:
            report.unmapped.append(f"{claim.where}: {claim.path} (no such weight in the folder)")
    try:
        index = Index.model_validate(index.model_dump(mode="json"))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise RegistryError("adopt.invalid", INDEX_NAME, f"the adopted index would be invalid at {err['loc']}: {err['msg']}", "correct the value in the hand-written index.json") from exc
    problems = index_problems(index)
    if problems:
        raise RegistryError.of(problems)
    return index


# Hand-written facts about an entry, and what the files say of each.
def _file_facts(entry: Entry, base: Base) -> dict[str, Any]:
    return {
        "sha256": entry.sha256, "size": entry.size, "method": entry.method, "data_version": entry.data.version,
        "data_sha256": entry.data.sha256, "base_sha256": entry.base_sha256, "base": base.name, "content_version": entry.content_version,
    }  # fmt: skip


def _apply_hand_entry(index: Index, entry: Entry, hand: HandIndex, report: AdoptReport) -> None:
    claim = hand.entry(entry.path)
    if claim is None:
        return
    base = index.base_by_sha(entry.base_sha256)
    assert base is not None
    actual = _file_facts(entry, base)
    for key, value in claim.facts.items():
        where = f"{claim.where}.{key}"
        value = value.removesuffix(".pth") if key == "base" else value
        if key in actual:
            if value != actual[key]:
                report.overridden.append(f"{where}: index.json says {value} but the file's {key} is {actual[key]}")
            else:
                report.mapped.append(f"{where} (agrees with the file)")
        elif key == "recommended":
            if value:
                set_recommended(index, entry)
            report.mapped.append(f"{where} -> entries[{entry.path}].recommended")
        elif key in ("notes", "dataset_repo"):
            if key == "notes":
                entry.notes = value
            else:
                entry.data.dataset_repo = value
            report.mapped.append(f"{where} -> entries[{entry.path}].{key}")
    for score in claim.scores:
        if score.score is not None:
            entry.scores.append(score.score)
            report.mapped.append(f"{score.where} -> entries[{entry.path}].scores")
        else:
            fields = score.fields
            report.score_steps.append(
                "registry score " + shlex.join([entry.path, "--benchmark", str(fields.get("benchmark", "<BENCHMARK>")), "--value", str(fields.get("value", "<VALUE>")),
                "--date", str(fields.get("date", "<YYYY-MM-DD>")), "--backend", str(fields.get("backend", "<BACKEND>"))])
            )  # fmt: skip


def _claims(report: AdoptReport, options: AdoptOptions) -> None:
    """Refuse where the hand-written index contradicts the files, unless the user let the files win."""
    if report.overridden and not options.trust_files:
        raise RegistryError.of([Problem("adopt.disagrees", INDEX_NAME, line, f"correct index.json or the file, or pass {TRUST_FILES} to record what the files say") for line in report.overridden])
