"""init and sums: creating a registry and recomputing its checksums."""

from __future__ import annotations

from pathlib import Path

from ..atomic import Transaction, transaction
from ..card import stage_card
from ..errors import RegistryError
from ..hashing import StatCache
from ..hashing.engine import Progress
from ..layout import is_excluded, scan_tree
from ..models import Index, RegistryInfo
from ..repo import GITATTRIBUTES, GITATTRIBUTES_NAME, INDEX_NAME, Repo, render_index
from ..sums import SUMS_NAME, digest_tree, render_sums


def init_registry(root: Path, title: str | None = None, license: str | None = None) -> Repo:
    """Create an empty registry: index.json, .gitattributes, SHA256SUMS (and the card)."""
    root = Path(root).absolute()
    if root.exists() and not root.is_dir():
        raise RegistryError("fs.not-a-directory", root, "exists and is not a directory", "choose another path")
    root.mkdir(parents=True, exist_ok=True)
    if (root / INDEX_NAME).exists():
        raise RegistryError("init.exists", root / INDEX_NAME, "a registry already exists here", "use the existing registry or choose an empty directory")
    visible = [p for p in root.iterdir() if not p.name.startswith(".git")]
    if visible:
        raise RegistryError("init.not-empty", root, f"directory is not empty ({visible[0].name})", "choose an empty directory")
    info = RegistryInfo(license=license) if title is None else RegistryInfo(title=title, license=license)
    index = Index(registry=info)
    repo = Repo(root)
    with transaction(root) as txn:
        txn.write(INDEX_NAME, render_index(index))
        txn.write(GITATTRIBUTES_NAME, GITATTRIBUTES.encode())
        stage_derived(repo, txn, index)
    return repo


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


def write_sums(root: Path, progress: Progress | None = None) -> dict[str, str]:
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        return stage_sums(repo, txn, progress)
