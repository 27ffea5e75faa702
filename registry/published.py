"""Immutability: files once published stay byte-identical.

The SHA256SUMS of the last publish is kept in ``.registry/published/SHA256SUMS`` (publish writes
it after verifying the remote; ``registry pull`` writes it too).  A published file whose bytes
changed, or that disappeared, is a finding unless a rewrite was recorded in index.json with a
reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

from .atomic import atomic_write
from .errors import Problem
from .models import Index, Rewrite
from .names import MUTABLE, SUMS_NAME
from .repo import Repo
from .sums import parse_sums, render_sums


def published_sums(repo: Repo) -> dict[str, str]:
    path = repo.published_dir / SUMS_NAME
    return parse_sums(path.read_bytes(), path) if path.is_file() else {}


def record_published(repo: Repo, digests: dict[str, str]) -> None:
    repo.published_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(repo.published_dir / SUMS_NAME, render_sums(digests))


def _covered(index: Index, path: str, current: str | None) -> bool:
    return any(r.path == path and r.new_sha256 == current for r in index.rewrites)


def rewrite_violations(repo: Repo, index: Index, digests: dict[str, str]) -> Iterator[tuple[str, str, str | None]]:
    """(path, published sha256, current sha256 or None) for every unrecorded change."""
    for path, sha in sorted(published_sums(repo).items()):
        if path in MUTABLE:
            continue
        current = digests.get(path)
        if current != sha and not _covered(index, path, current):
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


