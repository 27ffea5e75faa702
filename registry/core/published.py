"""What the registry remembers of the Hub (``.registry/published/``), and immutability: files once
published stay byte-identical.

``.registry/published/SHA256SUMS`` is the SHA256SUMS of the last publish, and
``.registry/published/remote.json`` says which repo, revision and commit it describes; publish
writes both after verifying the remote, ``registry pull`` after verifying the download, and keeps
the release in ``.registry/published/releases/<commit>/`` (its SHA256SUMS, index.json and card,
then ``release.json``), which ``registry history --offline`` and ``registry diff`` read.  A
published file whose bytes changed, or that disappeared, is a finding unless a rewrite was
recorded in index.json with a reason (:func:`unrecorded_change`, the one rule, used by validate
here and by publish's plan in :mod:`registry.hub.plan`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import Problem, RegistryError
from .files import atomic_write
from .models import Index, Rewrite
from .names import (
    CARD_NAME,
    INDEX_NAME,
    MUTABLE,
    PUBLISHED_SEAL_NAME,
    RELEASE_RECORD_NAME,
    RELEASES_DIR,
    REMOTE_NAME,
    SUMS_NAME,
)
from .repo import Repo
from .schemas import read_json
from .sums import parse_sums, render_sums
from .userkey import seal, sealed_here

SEAL_PURPOSE = "published record"

_COMMIT = re.compile(r"[0-9a-f]{40}")


class RemoteRecord(BaseModel):
    """Which repo, revision and commit the published SHA256SUMS describes."""

    model_config = ConfigDict(extra="forbid")

    repo_id: str
    revision: str
    commit: str


class ReleaseRecord(RemoteRecord):
    """A release kept here, and when it was recorded (UTC, ISO 8601)."""

    recorded: str


def published_sums(repo: Repo) -> dict[str, str]:
    """The record of the last publish or pull, when this user's tool wrote it (sealed): one that
    arrived with the folder, or was edited, counts as none, so it can neither spare a published
    file the immutability check nor make another's file on the Hub look like the registry's own."""
    path, sealed = repo.published_dir / SUMS_NAME, repo.published_dir / PUBLISHED_SEAL_NAME
    if not (path.is_file() and not path.is_symlink() and sealed.is_file() and not sealed.is_symlink()):
        return {}
    data = path.read_bytes()
    return (
        parse_sums(data, path)
        if sealed_here(SEAL_PURPOSE, data, sealed.read_text("ascii", errors="replace").strip())
        else {}
    )


def recorded_remote(repo: Repo) -> RemoteRecord | None:
    """The repo, revision and commit of the last publish or pull, if one is recorded (read as the
    untrusted input it is: a folder may arrive with its ``.registry/``)."""
    path = repo.published_dir / REMOTE_NAME
    if not path.is_file():
        return None
    try:
        return RemoteRecord.model_validate(read_json(repo.refuse_link(path), repo.rel(path)))
    except ValidationError as err:
        raise RegistryError(
            "published.bad-record",
            repo.rel(path),
            f"not a record of a publish ({err.error_count()} error(s))",
            "delete it; the next publish or pull writes it again",
        ) from err


def record_published(repo: Repo, digests: dict[str, str]) -> None:
    repo.published_dir.mkdir(parents=True, exist_ok=True)
    data = render_sums(digests)
    atomic_write(repo.published_dir / SUMS_NAME, data)
    atomic_write(repo.published_dir / PUBLISHED_SEAL_NAME, (seal(SEAL_PURPOSE, data) + "\n").encode())


def record_remote(repo: Repo, sums: dict[str, str], remote: RemoteRecord) -> None:
    """Remember ``sums`` as published, at ``remote`` (once the remote was seen holding them)."""
    record_published(repo, sums)
    atomic_write(repo.published_dir / REMOTE_NAME, (remote.model_dump_json(indent=2) + "\n").encode())
    _keep_release(repo, sums, remote)


def _keep_release(repo: Repo, sums: dict[str, str], remote: RemoteRecord) -> None:
    """The release's SHA256SUMS, index.json and card as they are now (just published or pulled) in
    ``releases/<commit>/``, then its record, last: a folder without one is debris, never read."""
    if not _COMMIT.fullmatch(remote.commit):  # the Hub's answer names the folder: nothing else may
        return
    folder = repo.published_dir / RELEASES_DIR / remote.commit
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / SUMS_NAME, render_sums(sums))
    for name in (INDEX_NAME, CARD_NAME):
        if (repo.root / name).is_file():
            atomic_write(folder / name, repo.read_bytes(repo.root / name))
    record = ReleaseRecord(**remote.model_dump(), recorded=datetime.now(UTC).isoformat(timespec="microseconds"))
    atomic_write(folder / RELEASE_RECORD_NAME, (record.model_dump_json(indent=2) + "\n").encode())


def kept_releases(repo: Repo) -> list[tuple[ReleaseRecord, Path]]:
    """Every release kept here with its folder, newest first (a record that does not parse, or
    names another commit than its folder, is skipped: ``.registry/`` may arrive with a folder)."""
    found = []
    top = repo.published_dir / RELEASES_DIR
    for folder in sorted(top.iterdir()) if top.is_dir() and not top.is_symlink() else ():
        path = folder / RELEASE_RECORD_NAME
        if folder.is_symlink() or not _COMMIT.fullmatch(folder.name) or not path.is_file() or path.is_symlink():
            continue
        try:
            record = ReleaseRecord.model_validate(read_json(path, repo.rel(path)))
        except (ValidationError, RegistryError):
            continue
        if record.commit == folder.name:
            found.append((record, folder))
    return sorted(found, key=lambda kept: kept[0].recorded, reverse=True)


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
