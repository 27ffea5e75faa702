"""Releases of a registry, and what changed between two of them (``registry history``, ``diff``,
``rollback``).

A :class:`Release` is what one state of a registry publishes, read from its own files: SHA256SUMS
(every file's sha256), index.json (weights, scores, the recommended ones; a dataset registry's
versions) and the card.  It comes from a commit on the Hub (:func:`hub_release`), from the
working registry (:func:`working_release`), or from the local record of the last publish or pull
(:func:`kept_release`: what publish and pull keep of each release in
``.registry/published/releases/``; :func:`recorded_release`, the last publish's SHA256SUMS alone,
for a registry that published before releases were kept).  :func:`compare` is
pure: two releases in, a :class:`ReleaseDiff` out.

Everything read from a Hub commit is untrusted input: index.json goes through the same schema and
model as a local one, and an index.json that does not parse leaves the release described by its
SHA256SUMS alone (said so in ``notes``), never a crash.
"""

from __future__ import annotations

import difflib
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TypeVar

from ..core.errors import RegistryError
from ..core.hashing import StatCache
from ..core.hashing.digest import sha256_hex
from ..core.hashing.tree import digest_tree
from ..core.models import DATASET_KIND, Index
from ..core.names import CARD_NAME, INDEX_NAME, SUMS_NAME, WEIGHT_SUFFIXES
from ..core.published import ReleaseRecord, kept_releases, published_sums, recorded_remote
from ..core.repo import Repo, is_dataset
from ..core.schemas import load_model, read_json
from ..core.sums import parse_sums
from ..core.tree import scan_tree
from ..dataset import store
from ..dataset.models import DatasetIndex
from ..hub.plan import RemoteFile
from ..hub.remote import Hub

Status = Literal["added", "removed", "changed"]
RELEASE_FILES = (SUMS_NAME, INDEX_NAME, CARD_NAME)  # what a release is read from
K = TypeVar("K", str, tuple[str, str, str | None, str, str])


@dataclass(frozen=True)
class Release:
    """One state of a registry, as its published files describe it."""

    label: str  # "working", "published" or the commit id
    sums: Mapping[str, str]
    index: Index | DatasetIndex | None = None  # None: no readable index.json
    card: str = ""
    commit: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def is_registry(self) -> bool:
        """Whether the state has a SHA256SUMS: a commit without one (the Hub's initial commit, a
        hand-made push) is no release of a registry."""
        return bool(self.sums) or self.index is not None


def _load_index(path: Path, display: str) -> Index | DatasetIndex:
    data = read_json(path, display)
    model: type[Index] | type[DatasetIndex] = (
        DatasetIndex if isinstance(data, dict) and data.get("kind") == DATASET_KIND else Index
    )
    return load_model(path, model, display)


def read_release(label: str, files: Mapping[str, Path], commit: str | None = None, where: str = "") -> Release:
    """A release from its files (``files``: name -> path of those of :data:`RELEASE_FILES` it holds)."""
    notes: list[str] = []
    sums: dict[str, str] = {}
    index: Index | DatasetIndex | None = None
    if SUMS_NAME in files:
        try:
            sums = parse_sums(files[SUMS_NAME].read_bytes(), f"{where}{SUMS_NAME}")
        except RegistryError as err:
            notes.append(err.problems[0].one_line())
    if INDEX_NAME in files:
        try:
            index = _load_index(files[INDEX_NAME], f"{where}{INDEX_NAME}")
        except RegistryError as err:
            notes.append(f"{err.problems[0].one_line()} (compared by SHA256SUMS alone)")
    card = files[CARD_NAME].read_text(encoding="utf-8", errors="replace") if CARD_NAME in files else ""
    return Release(label, sums, index, card, commit, tuple(notes))


def working_release(repo: Repo) -> Release:
    """The working registry: its SHA256SUMS, index.json and card as they are on disk (a note when
    the files' bytes are not what SHA256SUMS says)."""
    files = {name: repo.refuse_link(repo.root / name) for name in RELEASE_FILES if (repo.root / name).is_file()}
    release = read_release("working", files)
    on_disk = digest_tree(repo.root, scan_tree(repo.root).files, StatCache(repo.stat_cache_path))
    stale = sorted(p for p in set(on_disk) | set(release.sums) if on_disk.get(p) != release.sums.get(p))
    if not stale:
        return release
    note = (
        "the working registry's files are not what its SHA256SUMS says "
        f"({', '.join(stale[:3])}{', …' if len(stale) > 3 else ''}): compared by SHA256SUMS; run `registry "
        "validate`"
    )
    return replace(release, notes=(*release.notes, note))


def kept_release(repo: Repo, revision: str) -> Release | None:
    """The release kept here (``.registry/published/releases/``) whose commit is ``revision`` or
    starts with it (at least 7 hex digits, one release only), if any."""
    if len(revision) < 7:
        return None
    matches = [(record, folder) for record, folder in kept_releases(repo) if record.commit.startswith(revision.lower())]
    return read_kept(repo, *matches[0]) if len(matches) == 1 else None


def read_kept(repo: Repo, record: ReleaseRecord, folder: Path) -> Release:
    files = {
        name: folder / name for name in RELEASE_FILES if (folder / name).is_file() and not (folder / name).is_symlink()
    }
    return read_release(record.commit, files, record.commit, f"{repo.rel(folder)}/")


def recorded_release(repo: Repo, commit: str | None) -> Release:
    """The local record of the last publish or pull (``.registry/published/``): its SHA256SUMS only."""
    sums = published_sums(repo)
    if not sums:
        raise RegistryError(
            "history.no-record",
            repo.rel(repo.published_dir),
            "no publish or pull is recorded here",
            "publish the registry first, or name a Hub revision",
        )
    return Release(
        "published",
        sums,
        None,
        "",
        commit,
        ("the local record keeps SHA256SUMS only: weights compared by sha256, no scores or card",),
    )


def hub_release(hub: Hub, commit: str, tree: Mapping[str, RemoteFile] | None = None) -> Release:
    """The release at ``commit`` on the Hub (three small downloads; the weights are never fetched)."""
    tree = hub.tree(commit) if tree is None else tree
    with tempfile.TemporaryDirectory(prefix="registry-release-") as tmp:
        files = {name: hub.download(name, commit, Path(tmp) / commit) for name in RELEASE_FILES if name in tree}
        return read_release(commit, files, commit, f"{hub.repo_id}@{commit[:12]}/")


# -- what changed ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Artifact:
    """A weight (a model registry) or a data version (a dataset registry), by its content."""

    path: str
    sha256: str
    method: str | None = None
    base: str | None = None
    data_version: str | None = None
    files: tuple[str, ...] = ()  # every file of it in SHA256SUMS (shards; a version's folder)

    def as_dict(self) -> dict:
        return {
            "path": self.path,
            "sha256": self.sha256,
            "method": self.method,
            "base": self.base,
            "data_version": self.data_version,
        }


@dataclass(frozen=True)
class ArtifactChange:
    status: Status
    old: Artifact | None
    new: Artifact | None

    @property
    def artifact(self) -> Artifact:
        found = self.new or self.old
        assert found is not None, "a change has a side"
        return found

    def as_dict(self) -> dict:
        return {
            "status": self.status,
            **self.artifact.as_dict(),
            "old_sha256": self.old.sha256 if self.old else None,
            "new_sha256": self.new.sha256 if self.new else None,
        }


@dataclass(frozen=True)
class ScoreChange:
    status: Status
    owner: str  # the entry's path, the base's name, or <base>/<reference>
    benchmark: str
    setup: str | None
    backend: str
    date: str
    old: str | None  # "62.5 %"
    new: str | None

    def as_dict(self) -> dict:
        return {
            "status": self.status,
            "owner": self.owner,
            "benchmark": self.benchmark,
            "setup": self.setup,
            "backend": self.backend,
            "date": self.date,
            "old": self.old,
            "new": self.new,
        }


@dataclass(frozen=True)
class FileChange:
    status: Status
    path: str
    old_sha256: str | None
    new_sha256: str | None

    def as_dict(self) -> dict:
        return {"status": self.status, "path": self.path, "old_sha256": self.old_sha256, "new_sha256": self.new_sha256}


@dataclass(frozen=True)
class CardChange:
    added: int
    removed: int
    sections: tuple[str, ...]  # the headings under which lines changed

    def line(self) -> str:
        where = f" under {', '.join(self.sections)}" if self.sections else ""
        return f"{CARD_NAME}: +{self.added} -{self.removed} line(s){where}"

    def as_dict(self) -> dict:
        return {"added": self.added, "removed": self.removed, "sections": list(self.sections)}


@dataclass(frozen=True)
class ReleaseDiff:
    old: str
    new: str
    kind: Literal["model", "dataset"]
    artifacts: tuple[ArtifactChange, ...] = ()
    scores: tuple[ScoreChange, ...] = ()
    recommended: tuple[tuple[str, ...], tuple[str, ...]] | None = None  # (before, after) when it moved
    files: tuple[FileChange, ...] = ()
    card: CardChange | None = None
    notes: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.artifacts or self.scores or self.recommended or self.files or self.card)

    @property
    def what(self) -> str:
        return "weight" if self.kind == "model" else "data version"

    def summary(self) -> str:
        """One line: weights (data versions) added, removed and replaced, scores, recommended, files, card."""
        if self.empty:
            return "no change"
        parts = []
        for status, verb in (("added", "added"), ("removed", "removed"), ("changed", "replaced")):
            paths = [c.artifact.path for c in self.artifacts if c.status == status]
            if paths:
                parts.append(f"{len(paths)} {self.what}(s) {verb} ({', '.join(paths)})")
        if self.scores:
            counts = {s: sum(c.status == s for c in self.scores) for s in ("added", "changed", "removed")}
            parts.append("scores " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
        if self.recommended:
            before, after = self.recommended
            parts.append(f"recommended {', '.join(before) or 'none'} -> {', '.join(after) or 'none'}")
        if self.files:
            parts.append(f"{len(self.files)} other file(s)")
        if self.card and not parts:
            parts.append(self.card.line())
        return "; ".join(parts)

    def as_dict(self) -> dict:
        key = "weights" if self.kind == "model" else "versions"
        return {
            "old": self.old,
            "new": self.new,
            "kind": self.kind,
            "summary": self.summary(),
            key: [c.as_dict() for c in self.artifacts],
            "scores": [c.as_dict() for c in self.scores],
            "recommended": None
            if self.recommended is None
            else {"before": list(self.recommended[0]), "after": list(self.recommended[1])},
            "files": [c.as_dict() for c in self.files],
            "card": None if self.card is None else self.card.as_dict(),
            "notes": list(self.notes),
        }


def _layout_artifact(path: str, sha: str) -> Artifact:
    """A weight known only from SHA256SUMS: ``<base>/<method>/<data-version>/…`` says the rest."""
    parts = path.split("/")
    return Artifact(
        path,
        sha,
        parts[1] if len(parts) > 3 else None,
        parts[0] if len(parts) > 1 else None,
        parts[2] if len(parts) > 3 else None,
        (path,),
    )


def artifacts(release: Release) -> dict[str, Artifact]:
    """The release's weights (or data versions) by path."""
    index = release.index
    if isinstance(index, DatasetIndex):
        return {
            v.version: Artifact(
                v.version,
                v.trained_file.sha256,
                data_version=v.version,
                files=tuple(p for p in release.sums if p.startswith(f"{v.version}/")),
            )
            for v in index.versions
        }
    if isinstance(index, Index):
        found = {}
        for entry in index.entries:
            base = index.base_by_sha(entry.base_sha256)
            files = (entry.path, *(s.path for s in entry.shards))
            found[entry.path] = Artifact(
                entry.path,
                entry.sha256,
                entry.method,
                base.name if base else entry.path.split("/")[0],
                entry.data.version,
                files,
            )
        for checkpoint in index.checkpoints:  # a Transformers checkpoint: its weight index and shards, as one weight
            weights = checkpoint.weight_files()
            identity = sha256_hex("".join(f"{sha}  {path}\n" for path, sha in sorted(weights.items())).encode())
            found[checkpoint.path] = Artifact(
                checkpoint.path,
                identity,
                "full",
                checkpoint.initialized_from or checkpoint.architecture,
                checkpoint.data.version if checkpoint.data else None,
                tuple(weights),
            )
        return found
    return {p: _layout_artifact(p, sha) for p, sha in release.sums.items() if p.endswith(WEIGHT_SUFFIXES)}


def _scores(index: Index | DatasetIndex | None) -> dict[tuple[str, str, str | None, str, str], str]:
    if not isinstance(index, Index):
        return {}
    owned = [(e.path, e.scores) for e in index.entries]
    owned += [(b.name, b.scores) for b in index.bases]
    owned += [(f"{b.name}/{r.name}", r.scores) for b in index.bases for r in b.references]
    return {
        (owner, s.benchmark, s.setup, s.backend, s.date.isoformat()): f"{s.value:g} {s.unit}".rstrip()
        for owner, scores in owned
        for s in scores
    }


def _recommended(index: Index | DatasetIndex | None) -> tuple[str, ...]:
    return tuple(sorted(e.path for e in index.entries if e.recommended)) if isinstance(index, Index) else ()


_SECTION = re.compile(r"#{1,2} ")  # the card's sections; deeper headings are inside one


def _card_change(old: str, new: str) -> CardChange | None:
    if old == new:
        return None
    a, b = old.splitlines(), new.splitlines()
    added = removed = 0
    sections: dict[str, None] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        removed += i2 - i1
        added += j2 - j1
        heading = next((line.lstrip("#").strip() for line in reversed(b[: max(j1, 1)]) if _SECTION.match(line)), None)
        if heading:
            sections[heading] = None
    return CardChange(added, removed, tuple(sections))


def _changes(old: Mapping[K, str], new: Mapping[K, str]) -> list[tuple[Status, K]]:
    """(status, key) for every key added, removed or changed, in order of its text."""
    found: list[tuple[Status, K]] = []
    for key in sorted(set(old) | set(new), key=str):
        if key not in old:
            found.append(("added", key))
        elif key not in new:
            found.append(("removed", key))
        elif old[key] != new[key]:
            found.append(("changed", key))
    return found


def compare(old: Release, new: Release) -> ReleaseDiff:
    """What changed from ``old`` to ``new``: weights (data versions) by sha256, scores, the
    recommended weights, every other file SHA256SUMS lists, and the card's text."""
    kind: Literal["model", "dataset"] = (
        "dataset" if isinstance(new.index, DatasetIndex) or isinstance(old.index, DatasetIndex) else "model"
    )
    a, b = artifacts(old), artifacts(new)
    changes = tuple(
        ArtifactChange(s, a.get(p), b.get(p))
        for s, p in _changes({p: x.sha256 for p, x in a.items()}, {p: x.sha256 for p, x in b.items()})
    )
    covered = {f for x in (*a.values(), *b.values()) for f in x.files}
    others = [{p: sha for p, sha in sums.items() if p not in covered} for sums in (old.sums, new.sums)]
    files = tuple(FileChange(s, p, old.sums.get(p), new.sums.get(p)) for s, p in _changes(*others))
    sa, sb = _scores(old.index), _scores(new.index)
    scores = tuple(ScoreChange(s, *k, sa.get(k), sb.get(k)) for s, k in _changes(sa, sb))
    ra, rb = _recommended(old.index), _recommended(new.index)
    recommended = (ra, rb) if ra != rb and (old.index is not None and new.index is not None) else None
    card = _card_change(old.card, new.card) if old.index is not None and new.index is not None else None
    return ReleaseDiff(old.label, new.label, kind, changes, scores, recommended, files, card, (*old.notes, *new.notes))


@dataclass(frozen=True)
class HistoryItem:
    """One commit of the branch: what it changed against its parent."""

    commit: str
    date: str
    title: str
    diff: ReleaseDiff | None  # None: not a release (no SHA256SUMS)
    tags: tuple[str, ...] = ()
    published_here: bool = False

    def as_dict(self) -> dict:
        return {
            "commit": self.commit,
            "date": self.date,
            "title": self.title,
            "tags": list(self.tags),
            "release": self.diff is not None,
            "published_here": self.published_here,
            "summary": self.diff.summary() if self.diff else "not a release of this registry (no SHA256SUMS)",
            "changes": self.diff.as_dict() if self.diff else None,
        }


# -- where the releases are ------------------------------------------------------------------------


def registry_hub(repo: Repo, repo_id: str | None, revision: str = "main", progress: bool = True) -> Hub | None:
    """The Hub repo of this registry: ``repo_id``, else the one index.json records, else the one the
    last publish or pull recorded; None when none is known."""
    dataset = is_dataset(repo.root)
    if repo_id is None:
        repo_id = store.load(repo).dataset.repo_id if dataset else repo.load_index().registry.repo_id
    if repo_id is None and (record := recorded_remote(repo)) is not None:
        repo_id = record.repo_id
    return (
        None
        if repo_id is None
        else Hub(repo_id, revision, repo_type="dataset" if dataset else "model", progress=progress)
    )
