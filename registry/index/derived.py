"""The files derived from index.json and the tree (the card, evaluation.json, the GGUF files'
Ollama Modelfiles, SHA256SUMS), staged
into a writing command's transaction after its own writes."""

from __future__ import annotations

from collections.abc import Set

from ..card import stage_rendered
from ..core.atomic import Transaction
from ..core.hashing.engine import Progress
from ..core.models import Index
from ..core.repo import Repo
from ..core.staged_sums import stage_sums
from ..gguf.modelfile import modelfiles


def stage_derived(
    repo: Repo, txn: Transaction, index: Index, progress: Progress | None = None, absorb: bool | Set[str] = False
) -> dict[str, str]:
    """Stage the files derived from the index (card, evaluation.json, Modelfiles, SHA256SUMS) after
    the other staged writes.

    SHA256SUMS must cover the new index, card and evaluation.json, so they are hashed from the
    staged bytes (``absorb``: see :func:`stage_sums`).
    """
    stage_rendered(repo, txn, index)
    stage_modelfiles(repo, txn, index)
    return stage_sums(repo, txn, progress, absorb)


def stage_modelfiles(repo: Repo, txn: Transaction, index: Index) -> None:
    """Stage the Ollama Modelfile of every GGUF file where it is missing or not the one it derives
    (:mod:`registry.gguf.modelfile`: it depends only on the GGUF's path)."""
    for rel, text in modelfiles([g.path for g in index.ggufs]).items():
        data, path = text.encode("utf-8"), repo.root / rel
        if txn.staged_source(rel) is None and not (
            path.is_file() and not path.is_symlink() and repo.read_bytes(path) == data
        ):
            txn.write(rel, data)
