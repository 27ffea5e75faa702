"""``registry init``: create an empty registry (in a new folder, or beside the files a Hub repo
keeps: README.md, LICENSE, git's files); ``registry dataset init`` builds on :func:`registry.core.create.create_registry`."""

from __future__ import annotations

from pathlib import Path

from ..card.sync import stage_kept_card
from ..core.atomic import Transaction
from ..core.create import create_registry
from ..core.gitfiles import stage_git_files
from ..core.models import Index, RegistryInfo
from ..core.names import INDEX_NAME
from ..core.repo import Repo, render_index
from ..index.derived import stage_derived


def init_registry(root: Path, title: str | None = None, license: str | None = None) -> Repo:
    """Create an empty registry: index.json, .gitattributes, .gitignore, SHA256SUMS (and the card)."""
    info = RegistryInfo(license=license) if title is None else RegistryInfo(title=title, license=license)
    index = Index(registry=info)

    def stage(repo: Repo, txn: Transaction) -> None:
        txn.write(INDEX_NAME, render_index(index))
        stage_git_files(repo, txn)
        stage_kept_card(repo, txn)
        stage_derived(repo, txn, index, absorb=True)  # a new registry: nothing to check yet

    return create_registry(root, stage)
