"""The digests of a registry's files: sha256 (or another hasher's) of each, hashing only the files
the stat cache cannot vouch for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .cache import StatCache
from .engine import Progress, hash_files


def digest_tree(
    root: Path,
    relpaths: list[str],
    cache: StatCache | None = None,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
    hasher: Callable[[list[Path], Progress | None], dict[Path, str]] | None = None,
) -> dict[str, str]:
    """sha256 (or ``hasher``'s digest) of each relpath under root, hashing only files the stat cache cannot vouch
    for."""
    digests: dict[str, str] = {}
    stats = {}
    todo: list[Path] = []
    for rel in relpaths:
        st = (root / rel).stat()
        cached = cache.lookup(rel, st) if cache else None
        if cached:
            digests[rel] = cached
        else:
            stats[rel] = st
            todo.append(root / rel)
    if on_total:
        on_total(sum(stats[rel].st_size for rel in stats))
    hashed = (hasher or hash_files)(todo, progress)
    for path, sha in hashed.items():
        rel = path.relative_to(root).as_posix()
        digests[rel] = sha
        if cache:
            cache.store(rel, stats[rel], sha)
    if cache:
        cache.prune(set(relpaths))
        cache.save()
    return digests
