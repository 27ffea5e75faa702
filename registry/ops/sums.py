"""``registry sums``: rewrite (or check) SHA256SUMS for the files on disk."""

from __future__ import annotations

from pathlib import Path

from ..core.atomic import transaction
from ..core.hashing.engine import Progress
from ..core.names import SUMS_NAME
from ..core.repo import Repo
from ..core.staged_sums import stage_sums
from .validate import Validation, validate_report


def write_sums(root: Path, progress: Progress | None = None) -> dict[str, str]:
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        return stage_sums(repo, txn, progress, absorb=True)


def check_sums(root: Path, progress: Progress | None = None, require_bytes: bool = False) -> Validation:
    """validate's findings about SHA256SUMS and the files it lists, and any about the file itself
    (a symlinked SHA256SUMS is never read: it could vouch for anything).  Git LFS pointers are
    compared by their oid (pointer mode) unless ``require_bytes``."""
    report = validate_report(root, progress=progress, require_bytes=require_bytes, signature=False)
    problems = [p for p in report.problems if p.code.startswith(("sums.", "lfs.")) or p.file == SUMS_NAME]
    return Validation(problems, report.pointers)
