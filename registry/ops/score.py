"""``registry score``: record an evaluation result on an entry."""

from __future__ import annotations

from pathlib import Path

from ..atomic import transaction
from ..derived import stage_derived
from ..index_rules import index_to_change
from ..models import Entry, Score
from ..repo import INDEX_NAME, Repo, render_index, resolve_entry


def add_score(root: Path, path: str, score: Score) -> Entry:
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        entry = resolve_entry(repo, index, path)
        entry.scores.append(score)
        entry.scores.sort(key=lambda s: (s.date, s.backend, s.benchmark))
        txn.write(INDEX_NAME, render_index(index))
        stage_derived(repo, txn, index)
    return entry
