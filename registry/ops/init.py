"""``registry init``: create an empty registry (a model registry, or with ``--dataset`` a dataset one)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from ..atomic import PRIVATE_DIR, Transaction, transaction
from ..derived import stage_derived
from ..errors import RegistryError
from ..models import Index, RegistryInfo
from ..repo import GITATTRIBUTES, GITATTRIBUTES_NAME, INDEX_NAME, Repo, render_index


def init_registry(root: Path, title: str | None = None, license: str | None = None) -> Repo:
    """Create an empty registry: index.json, .gitattributes, SHA256SUMS (and the card)."""
    info = RegistryInfo(license=license) if title is None else RegistryInfo(title=title, license=license)
    index = Index(registry=info)

    def stage(repo: Repo, txn: Transaction) -> None:
        txn.write(INDEX_NAME, render_index(index))
        txn.write(GITATTRIBUTES_NAME, GITATTRIBUTES.encode())
        stage_derived(repo, txn, index, absorb=True)  # a new registry: nothing to check yet

    return create_registry(root, stage)


def create_registry(root: Path, stage: Callable[[Repo, Transaction], None]) -> Repo:
    """Create a registry in the new or empty ``root`` with the files ``stage`` writes, in one transaction."""
    root = Path(root).absolute()
    if root.exists() and not root.is_dir():
        raise RegistryError("fs.not-a-directory", root, "exists and is not a directory", "choose another path")
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    if (root / INDEX_NAME).exists():
        raise RegistryError("init.exists", root / INDEX_NAME, "a registry already exists here", "use the existing registry or choose an empty directory")
    # git's files may be there; so may the private folder an interrupted init left (no index yet).
    visible = [p for p in root.iterdir() if not p.name.startswith(".git") and p.name != PRIVATE_DIR]
    if visible:
        raise RegistryError("init.not-empty", root, f"directory is not empty ({visible[0].name})", "choose an empty directory")
    repo = Repo(root)
    private_existed = repo.private.exists()
    try:
        with transaction(root) as txn:
            stage(repo, txn)
    except BaseException:
        # A failed init leaves nothing behind, so the next one starts from the same empty place.
        if created or not private_existed:
            shutil.rmtree(root if created else repo.private, ignore_errors=True)
        raise
    return repo
