"""What ``registry card`` does: re-render README.md under the lock, or only compare it.

Kept apart from the rest of the package because it goes through ``stage_derived`` (so SHA256SUMS
follows the new card), and ``stage_derived`` itself imports :func:`~registry.card.stage_card`.
"""

from __future__ import annotations

from pathlib import Path

from ..atomic import transaction
from ..card.sync import CardState, card_state
from ..derived import stage_derived
from ..index_rules import index_to_change
from ..repo import Repo


def write_card(root: Path) -> bool:
    """Render README.md (and refresh SHA256SUMS) in one transaction; True when the card changed."""
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        changed = not card_state(repo, index).fresh
        stage_derived(repo, txn, index)
    return changed


def compare_card(root: Path) -> CardState:
    """The card on disk next to the one index.json renders; changes nothing."""
    repo = Repo.open(root)
    return card_state(repo, repo.load_index())
