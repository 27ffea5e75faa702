"""``registry sums``: rewrite (or check) SHA256SUMS for the files on disk."""

from __future__ import annotations

from pathlib import Path

from ..core.atomic import transaction
from ..core.errors import Problem
from ..core.hashing.engine import Progress
from ..core.names import SUMS_NAME
from ..core.repo import Repo
from ..core.staged_sums import stage_sums
from .validate import validate


def write_sums(root: Path, progress: Progress | None = None) -> dict[str, str]:
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        repo.require_current_format()  # SHA256SUMS of an older registry is migrate's to write
        return stage_sums(repo, txn, progress, absorb=True)


def check_sums(root: Path, progress: Progress | None = None) -> list[Problem]:
    """validate's findings about SHA256SUMS and the files it lists, and any about the file itself
    (a symlinked SHA256SUMS is never read: it could vouch for anything)."""
    return [p for p in validate(root, progress=progress) if p.code.startswith("sums.") or p.file == SUMS_NAME]
