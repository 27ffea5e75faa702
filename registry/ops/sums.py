"""``registry sums``: rewrite (or check) SHA256SUMS for the files on disk."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import Problem
from ..core.names import SUMS_NAME
from ..core.verdict import vouching

if TYPE_CHECKING:
    from ..core.hashing.engine import Progress


def write_sums(root: Path, progress: Progress | None = None) -> dict[str, str]:
    from ..core.atomic import transaction
    from ..core.repo import Repo
    from ..core.staged_sums import stage_sums

    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        repo.require_current_format()  # SHA256SUMS of an older registry is migrate's to write
        return stage_sums(repo, txn, progress, absorb=True)


def check_sums(root: Path, progress: Progress | None = None) -> list[Problem]:
    """validate's findings about SHA256SUMS and the files it lists, and any about the file itself
    (a symlinked SHA256SUMS is never read: it could vouch for anything).  On a tree unchanged since
    a clean validate or check (:mod:`registry.core.verdict`): clean, without reading a file."""
    verdicts = vouching(root)
    if verdicts is not None and [] in (verdicts.recall("validate"), verdicts.recall("sums-check")):
        return []
    from .validate import validate  # models, schemas and templates: only for a tree that changed

    problems = [p for p in validate(root, progress=progress) if p.code.startswith("sums.") or p.file == SUMS_NAME]
    if verdicts is not None and not problems:
        verdicts.remember("sums-check", [])
    return problems
