"""``registry dataset init``: create an empty dataset registry (seed 002's repo shape)."""

from __future__ import annotations

from pathlib import Path

from ..core.atomic import Transaction
from ..core.create import create_registry
from ..core.gitfiles import stage_git_files
from ..core.names import DATASET_INIT_KEPT, INDEX_NAME
from ..core.repo import Repo, render_index
from ..dataset import store
from ..dataset.layout import GITATTRIBUTES
from ..dataset.models import DatasetIndex, DatasetInfo


def init_dataset(root: Path, title: str | None = None, license: str | None = None) -> Repo:
    """index.json (``kind: dataset``), .gitattributes (jsonl and logs through LFS), .gitignore, the card, SHA256SUMS."""
    info = DatasetInfo(license=license) if title is None else DatasetInfo(title=title, license=license)
    index = DatasetIndex(dataset=info)

    def stage(repo: Repo, txn: Transaction) -> None:
        txn.write(INDEX_NAME, render_index(index))
        stage_git_files(repo, txn, GITATTRIBUTES)
        store.stage_derived(repo, txn, index, absorb=True)

    # the dataset card has no hand-written section and the dataset layout no LICENSE/docs: a folder
    # holding them is refused, never overwritten
    return create_registry(root, stage, DATASET_INIT_KEPT, "registry dataset adopt")
