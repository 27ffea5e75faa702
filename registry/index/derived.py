"""The files derived from index.json and the tree (the card, evaluation.json, SHA256SUMS), staged
into a writing command's transaction after its own writes."""

from __future__ import annotations

from collections.abc import Set

from ..card import stage_rendered
from ..core.atomic import Transaction
from ..core.hashing.engine import Progress
from ..core.models import Index
from ..core.repo import Repo
from ..core.staged_sums import stage_sums


def stage_derived(repo: Repo, txn: Transaction, index: Index, progress: Progress | None = None, absorb: bool | Set[str] = False) -> dict[str, str]:
    """Stage the files derived from the index (card, evaluation.json, SHA256SUMS) after the other
    staged writes.

    SHA256SUMS must cover the new index, card and evaluation.json, so they are hashed from the
    staged bytes (``absorb``: see :func:`stage_sums`).
    """
    stage_rendered(repo, txn, index)
    return stage_sums(repo, txn, progress, absorb)
