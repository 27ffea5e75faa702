"""A new registry on disk: ``registry init`` and ``registry dataset init`` create one in a new folder,
an empty one, or one holding only the files a Hub repo keeps (README.md, LICENSE, git's files)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from .atomic import Transaction, transaction
from .errors import RegistryError
from .names import GIT_DIR, INDEX_NAME, INIT_KEPT
from .registry_root import find_root
from .repo import Repo


def _check_place(root: Path, kept: frozenset[str], adopt: str) -> None:
    if (root / INDEX_NAME).exists():
        raise RegistryError(
            "init.exists",
            root / INDEX_NAME,
            "an index.json already exists here",
            f"use the existing registry, or run `{adopt} {root}` if the index.json was written by hand",
        )
    others = sorted(p.name for p in root.iterdir() if p.name not in kept and not p.name.startswith(GIT_DIR))
    if others:
        raise RegistryError(
            "init.not-empty",
            root,
            f"the directory holds files init does not keep ({others[0]})",
            f"run `{adopt} {root}` to bring existing files in, or choose an empty directory",
        )


def create_registry(
    root: Path,
    stage: Callable[[Repo, Transaction], None],
    kept: frozenset[str] = INIT_KEPT,
    adopt: str = "registry adopt",
) -> Repo:
    """Create a registry in ``root`` (new, empty, or holding only ``kept`` and git's files) with the
    files ``stage`` writes, in one transaction; a folder holding other files is refused naming ``adopt``."""
    root = Path(root).absolute()
    if root.exists() and not root.is_dir():
        raise RegistryError("fs.not-a-directory", root, "exists and is not a directory", "choose another path")
    enclosing = find_root(root.parent) if root.parent != root else None
    if enclosing is not None:  # checked before any folder is made
        raise RegistryError(
            "init.inside-registry",
            root,
            f"this folder is inside the registry at {enclosing}",
            "work in that registry, or create the new one outside it",
        )
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    repo = Repo(root)
    private_existed = repo.private.exists()
    try:
        _check_place(root, kept, adopt)
        with transaction(root) as txn:
            stage(repo, txn)
    except BaseException:
        # A failed init leaves nothing behind, so the next one starts from the same empty place.
        if created or not private_existed:
            shutil.rmtree(root if created else repo.private, ignore_errors=True)
        raise
    return repo
