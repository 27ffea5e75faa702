"""The files derived from index.json and the tree (the card, SHA256SUMS), staged into a writing
command's transaction after its own writes."""

from __future__ import annotations

from .atomic import Transaction
from .card import stage_card
from .hashing import StatCache
from .hashing.engine import Progress
from .layout import is_excluded, scan_tree
from .models import Index
from .repo import Repo
from .sums import SUMS_NAME, digest_tree, render_sums


def stage_derived(repo: Repo, txn: Transaction, index: Index, progress: Progress | None = None) -> dict[str, str]:
    """Stage the files derived from the index (card, SHA256SUMS) after the other staged writes.

    SHA256SUMS must cover the new index and card, so they are hashed from the staged bytes.
    """
    stage_card(repo, txn, index)
    return stage_sums(repo, txn, progress)


def stage_sums(repo: Repo, txn: Transaction, progress: Progress | None = None) -> dict[str, str]:
    """Stage SHA256SUMS for the tree as it will be once ``txn`` commits."""
    staged = {rel: sha for rel, sha in txn.staged_files().items() if not is_excluded(rel)}
    on_disk = [rel for rel in scan_tree(repo.root).files if rel not in staged]
    digests = digest_tree(repo.root, on_disk, StatCache(repo.stat_cache_path), progress)
    digests.update(staged)
    txn.write(SUMS_NAME, render_sums(digests))
    txn.after_commit(lambda: remember_digests(repo, staged))
    return digests


def remember_digests(repo: Repo, digests: dict[str, str]) -> None:
    """Put files the tool just wrote or moved in the stat cache: their hashes are known, so the
    next command need not read a freshly added multi-GB weight again."""
    cache = StatCache(repo.stat_cache_path)
    for rel, sha in digests.items():
        cache.store(rel, (repo.root / rel).stat(), sha)
    cache.save()


