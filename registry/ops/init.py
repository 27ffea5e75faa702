"""``registry init``: create an empty registry (in a new folder, or beside the files a Hub repo
keeps: README.md, LICENSE, git's files); ``registry dataset init`` builds on :func:`create_registry`."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from ..card.handwritten import keep_whole
from ..card.render import decode_card
from ..core.atomic import Transaction, transaction
from ..core.errors import RegistryError
from ..core.gitfiles import ignore_private, lfs_attributes
from ..core.models import Index, RegistryInfo
from ..core.names import CARD_NAME, GIT_DIR, GITATTRIBUTES_NAME, GITIGNORE_NAME, INDEX_NAME, INIT_KEPT
from ..core.repo import GITATTRIBUTES, Repo, find_root, render_index
from ..index.derived import stage_derived


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


def git_file_changes(repo: Repo, attributes: str = GITATTRIBUTES) -> dict[str, bytes]:
    """.gitignore and .gitattributes extended (or written) with what a registry needs, where they
    lack it (``attributes``: the LFS lines, a model registry's by default)."""
    changes = {}
    for name, extended in (
        (GITIGNORE_NAME, ignore_private),
        (GITATTRIBUTES_NAME, lambda existing: lfs_attributes(existing, attributes)),
    ):
        path = repo.root / name
        data = extended(repo.read_bytes(path) if path.is_file() or path.is_symlink() else None)
        if data is not None:
            changes[name] = data
    return changes


def stage_git_files(repo: Repo, txn: Transaction, attributes: str = GITATTRIBUTES) -> None:
    for name, data in git_file_changes(repo, attributes).items():
        txn.write(name, data)


def stage_kept_card(repo: Repo, txn: Transaction) -> None:
    """A hand-written README.md staged as the card's hand-written section, so rendering keeps it whole."""
    path = repo.card_path
    if path.is_file() or path.is_symlink():
        kept = keep_whole(decode_card(repo.read_bytes(path)))
        if kept is not None:
            txn.write(CARD_NAME, kept.encode("utf-8"))


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
