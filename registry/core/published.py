"""What the registry remembers of the Hub (``.registry/published/``), and immutability: files once
published stay byte-identical.

``.registry/published/SHA256SUMS`` is the SHA256SUMS of the last publish, and
``.registry/published/remote.json`` says which repo, revision and commit it describes; publish
writes both after verifying the remote, ``registry pull`` after verifying the download.  A
published file whose bytes changed, or that disappeared, is a finding unless a rewrite was
recorded in index.json with a reason (:func:`unrecorded_change`, the one rule, used by validate
here and by publish's plan in :mod:`registry.hub.plan`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import date

from pydantic import BaseModel, ConfigDict

from .errors import Problem
from .files import atomic_write
from .models import Index, Rewrite
from .names import MUTABLE, PUBLISHED_SEAL_NAME, REMOTE_NAME, SUMS_NAME
from .repo import Repo
from .sums import parse_sums, render_sums
from .userkey import seal, sealed_here

SEAL_PURPOSE = "published record"


class RemoteRecord(BaseModel):
    """Which repo, revision and commit the published SHA256SUMS describes."""

    model_config = ConfigDict(extra="forbid")

    repo_id: str
    revision: str
    commit: str


def published_sums(repo: Repo) -> dict[str, str]:
    """The record of the last publish or pull, when this user's tool wrote it (sealed): one that
    arrived with the folder, or was edited, counts as none, so it can neither spare a published
    file the immutability check nor make another's file on the Hub look like the registry's own."""
    path, sealed = repo.published_dir / SUMS_NAME, repo.published_dir / PUBLISHED_SEAL_NAME
    if not (path.is_file() and not path.is_symlink() and sealed.is_file() and not sealed.is_symlink()):
        return {}
    data = path.read_bytes()
    return parse_sums(data, path) if sealed_here(SEAL_PURPOSE, data, sealed.read_text("ascii", errors="replace").strip()) else {}


def record_published(repo: Repo, digests: dict[str, str]) -> None:
    repo.published_dir.mkdir(parents=True, exist_ok=True)
    data = render_sums(digests)
    atomic_write(repo.published_dir / SUMS_NAME, data)
    atomic_write(repo.published_dir / PUBLISHED_SEAL_NAME, (seal(SEAL_PURPOSE, data) + "\n").encode())


def record_remote(repo: Repo, sums: dict[str, str], remote: RemoteRecord) -> None:
    """Remember ``sums`` as published, at ``remote`` (once the remote was seen holding them)."""
    record_published(repo, sums)
    atomic_write(repo.published_dir / REMOTE_NAME, (remote.model_dump_json(indent=2) + "\n").encode())


def recorded_rewrite(rewrites: Iterable[Rewrite], path: str, new_sha256: str | None) -> Rewrite | None:
    """The rewrite in index.json that produced exactly these bytes of ``path`` (None: its deletion), if any."""
    return next((r for r in rewrites if r.path == path and r.new_sha256 == new_sha256), None)


def unrecorded_change(path: str, new_sha256: str | None, rewrites: Iterable[Rewrite]) -> bool:
    """Whether a published file's change (to ``new_sha256``; None: deleted) breaks immutability:
    the tool does not re-render it (:data:`MUTABLE`) and index.json records no rewrite to exactly
    these bytes."""
    return path not in MUTABLE and recorded_rewrite(rewrites, path, new_sha256) is None


def rewrite_violations(repo: Repo, index: Index, digests: dict[str, str]) -> Iterator[tuple[str, str, str | None]]:
    """(path, published sha256, current sha256 or None) for every unrecorded change."""
    for path, sha in sorted(published_sums(repo).items()):
        current = digests.get(path)
        if current != sha and unrecorded_change(path, current, index.rewrites):
            yield path, sha, current


def immutability_findings(repo: Repo, index: Index, digests: dict[str, str]) -> Iterator[Problem]:
    for path, _, current in rewrite_violations(repo, index, digests):
        what = "was deleted" if current is None else "changed"
        yield Problem(
            "immutable.rewritten",
            path,
            f"published file {what} since the last publish",
            "restore the published bytes, or record why with `registry validate --allow-rewrite REASON`",
        )


def record_rewrites(repo: Repo, index: Index, digests: dict[str, str], reason: str) -> list[Rewrite]:
    """Add a Rewrite record for every unrecorded change to a published file."""
    added = [
        Rewrite(path=path, old_sha256=old, new_sha256=new, reason=reason, date=date.today().isoformat())
        for path, old, new in rewrite_violations(repo, index, digests)
    ]
    index.rewrites.extend(added)
    return added


