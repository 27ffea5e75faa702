"""The publish plan: a pure function of the local files and the remote tree.

Nothing here talks to the Hub or reads a file, so every decision publish makes (what to send,
what to keep, what to refuse) can be tested and printed (``--dry-run``) without a network.

Files are compared the way the Hub stores them: an LFS file by its sha256 (the LFS oid), a plain
git file by its git blob sha1, which the caller computes for exactly the paths the remote holds as
plain blobs (:func:`plain_paths`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..core.errors import Problem
from ..core.models import Rewrite
from ..core.names import MUTABLE
from ..core.published import unrecorded_change

Status = Literal["new", "changed", "unchanged", "remote-only"]
RESTORE_FIX = (
    "the Hub changed behind the registry, which holds the bytes it published there: put them back with `registry "
    "publish --restore`"
)
REWRITE_FIX = (
    "restore the published bytes; to replace them, record why with `registry validate --allow-rewrite REASON`"
    " in a registry that knows the published state (one that published or pulled this repo)"
)


@dataclass(frozen=True)
class LocalFile:
    """A file of the registry as it would be uploaded."""

    path: str
    sha256: str
    size: int
    git_sha1: str | None = None  # only needed where the remote holds the path as a plain git blob


@dataclass(frozen=True)
class RemoteFile:
    """A file in the remote tree: its git blob id, for LFS files the sha256 of the content, and for
    Xet-stored files the Xet file hash (see :mod:`registry.hub.content`)."""

    path: str
    size: int
    blob_id: str
    lfs_sha256: str | None = None
    xet_hash: str | None = None

    @property
    def content_id(self) -> str:
        return self.lfs_sha256 or self.blob_id


@dataclass(frozen=True)
class RemoteState:
    """One revision of the remote repo. ``head`` is None when the repo does not exist (or is assumed empty)."""

    repo_id: str
    revision: str
    head: str | None
    files: Mapping[str, RemoteFile] = field(default_factory=dict)
    access: str | None = None  # who may see the repo (core.models.Access), as the Hub says; None: no repo

    @property
    def exists(self) -> bool:
        return self.head is not None


@dataclass(frozen=True)
class ExistingState(RemoteState):
    """A revision of a repo that exists, so its head commit is known."""

    head: str


def plain_paths(local: Iterable[str], remote: Mapping[str, RemoteFile]) -> set[str]:
    """Local paths that can only be compared by git blob sha1 (the remote holds them as plain git files)."""
    return {p for p in local if p in remote and remote[p].lfs_sha256 is None}


def same_content(local: LocalFile, remote: RemoteFile) -> bool:
    """Equal bytes, judged by the id the Hub keeps: the LFS sha256, else the git blob sha1."""
    if remote.lfs_sha256 is not None:
        return local.sha256 == remote.lfs_sha256
    if local.git_sha1 is None:
        raise ValueError(f"{local.path}: the remote holds a plain git file; its local git sha1 is needed")
    return local.git_sha1 == remote.blob_id


@dataclass(frozen=True)
class PlannedFile:
    """One path, what each side holds, and the verdict: new and changed files are uploaded."""

    path: str
    status: Status
    local: LocalFile | None
    remote: RemoteFile | None

    @property
    def local_file(self) -> LocalFile:
        """``local``, which every status but remote-only has."""
        assert self.local is not None, f"{self.path} is {self.status}"
        return self.local

    @property
    def remote_file(self) -> RemoteFile:
        """``remote``, which every status but new has."""
        assert self.remote is not None, f"{self.path} is {self.status}"
        return self.remote

    def as_dict(self) -> dict:
        return {
            "path": self.path,
            "status": self.status,
            "sha256": self.local.sha256 if self.local else None,
            "size": self.local.size if self.local else self.remote_file.size,
            "remote_id": self.remote.content_id if self.remote else None,
        }


@dataclass(frozen=True)
class Plan:
    """Every path, local or remote, classified; plus what publish would refuse (immutability)."""

    repo_id: str
    revision: str
    head: str | None
    files: tuple[PlannedFile, ...]
    delete_extra: bool = False
    problems: tuple[Problem, ...] = ()
    restored: frozenset[str] = frozenset()  # changed files that put the registry's own bytes back (--restore)

    def with_status(self, *statuses: Status) -> tuple[PlannedFile, ...]:
        return tuple(f for f in self.files if f.status in statuses)

    @property
    def uploads(self) -> tuple[PlannedFile, ...]:
        return self.with_status("new", "changed")

    @property
    def deletions(self) -> tuple[PlannedFile, ...]:
        return self.with_status("remote-only") if self.delete_extra else ()

    @property
    def upload_bytes(self) -> int:
        return sum(f.local_file.size for f in self.uploads)

    @property
    def empty(self) -> bool:
        """Nothing to send and nothing to delete: publishing would make no commit."""
        return not self.uploads and not self.deletions

    def expected_tree(self) -> dict[str, str | None]:
        """What the remote must hold after the commit: each local path (None: compare with the local
        file) and each remote-only path that is kept (its content id must not change)."""
        tree: dict[str, str | None] = {f.path: None for f in self.files if f.local}
        if not self.delete_extra:
            tree.update({f.path: f.remote_file.content_id for f in self.with_status("remote-only")})
        return tree

    def as_dict(self) -> dict:
        return {
            "repo_id": self.repo_id,
            "revision": self.revision,
            "head": self.head,
            "files": [f.as_dict() for f in self.files],
            "upload": {"files": len(self.uploads), "bytes": self.upload_bytes},
            "delete": [f.path for f in self.deletions],
            "problems": [p.as_dict() for p in self.problems],
        }


def _classify(path: str, local: LocalFile | None, remote: RemoteFile | None) -> PlannedFile:
    if remote is None:
        status: Status = "new"
    elif local is None:
        status = "remote-only"
    else:
        status = "unchanged" if same_content(local, remote) else "changed"
    return PlannedFile(path, status, local, remote)


def rewrites_needed(files: Iterable[PlannedFile]) -> list[PlannedFile]:
    """Changed files that the Hub already holds and that the tool does not re-render."""
    return [f for f in files if f.status == "changed" and f.path not in MUTABLE]


def immutability_problems(
    files: Iterable[PlannedFile], rewrites: Iterable[Rewrite], restorable: frozenset[str] = frozenset()
) -> list[Problem]:
    """A changed file that the Hub already holds is refused, unless index.json records the rewrite;
    where the local bytes are the registry's own (``restorable``), the fix is ``--restore``."""
    rewrites = list(rewrites)
    return [
        Problem(
            "immutable.on-hub",
            f.path,
            f"already on the Hub with other bytes ({f.remote_file.content_id[:12]}…)",
            RESTORE_FIX if f.path in restorable else REWRITE_FIX,
        )
        for f in files
        if f.status == "changed" and unrecorded_change(f.path, f.local_file.sha256, rewrites)
    ]


def make_plan(
    local: Mapping[str, LocalFile],
    remote: RemoteState,
    rewrites: Iterable[Rewrite] = (),
    delete_extra: bool = False,
    restorable: frozenset[str] = frozenset(),
    restore: bool = False,
) -> Plan:
    """Classify every local and remote path as new, changed, unchanged or remote-only.  With
    ``restore``, a changed file in ``restorable`` (the registry's own bytes, which the Hub no longer
    holds) is sent back instead of refused."""
    files = tuple(_classify(p, local.get(p), remote.files.get(p)) for p in sorted(set(local) | set(remote.files)))
    restored = frozenset(f.path for f in rewrites_needed(files) if f.path in restorable) if restore else frozenset()
    problems = [p for p in immutability_problems(files, rewrites, restorable) if p.file not in restored]
    return Plan(remote.repo_id, remote.revision, remote.head, files, delete_extra, tuple(problems), restored)


def verify_tree(plan: Plan, local: Mapping[str, LocalFile], after: Mapping[str, RemoteFile]) -> list[Problem]:
    """Compare the remote tree after the commit with :meth:`Plan.expected_tree`; empty when they agree.

    ``local`` must carry the git sha1 of every path that ``after`` holds as a plain git file.
    """
    expected = plan.expected_tree()
    findings = [
        Problem("verify.missing", p, "planned but not in the new commit", "run `registry publish` again")
        for p in sorted(set(expected) - set(after))
    ]
    findings += [
        Problem("verify.unexpected", p, "in the new commit but not planned", "inspect the commit on the Hub")
        for p in sorted(set(after) - set(expected))
    ]
    for path in sorted(set(expected) & set(after)):
        kept, got = expected[path], after[path]
        if not (got.content_id == kept if kept is not None else same_content(local[path], got)):
            findings.append(
                Problem(
                    "verify.mismatch",
                    path,
                    f"the Hub holds {got.content_id[:12]}…, not the planned bytes",
                    "run `registry publish` again",
                )
            )
    return findings
