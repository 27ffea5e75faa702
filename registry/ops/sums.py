"""``registry sums``: rewrite SHA256SUMS for the files on disk."""

from __future__ import annotations

from pathlib import Path

from ..atomic import transaction
from ..derived import stage_sums
from ..hashing.engine import Progress
from ..repo import Repo


def write_sums(root: Path, progress: Progress | None = None) -> dict[str, str]:
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        return stage_sums(repo, txn, progress, absorb=True)
