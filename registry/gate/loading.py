"""Reading checkpoints once: their sha256 is computed while they load, or recognised unchanged.

A weight file is read for two reasons, proving which bytes it holds (sha256) and loading its
tensors.  Both happen in one pass: threads hash the pinned open files (hashlib releases the GIL,
so several files hash in parallel) while the loader maps and copies the same pages, and nothing
runs on what was loaded until every hash is known.  A file hashed before is recognised by a stat
cache (a registry's own for registered files; a per-user one, keyed by the real path, for base
checkpoints), trusted only while device, inode, size, mtime and ctime are all unchanged and the
file is older than the racy window (see :mod:`registry.core.hashing.cache`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from ..core.errors import RegistryError
from ..core.hashing import StatCache, hash_file
from ..core.pinned import Pinned, unchanged
from ..core.resources import user_cache

T = TypeVar("T")


def user_hash_cache() -> StatCache:
    """sha256 of files outside any registry (base checkpoints), for this user."""
    return StatCache(user_cache("file-hashes.json"))


@dataclass(frozen=True)
class ToHash:
    """A pinned file, and the stat cache (and key in it) that may already know its sha256."""

    pin: Pinned
    cache: StatCache
    key: str


@dataclass(frozen=True)
class Hashed:
    sha256: str
    from_cache: bool


def load_hashed(files: Sequence[ToHash], load: Callable[[], T]) -> tuple[T, list[Hashed]]:
    """``load()``'s result and each file's sha256, the files hashed while ``load`` runs.

    A file that changes while it is hashed and loaded (size or mtime moves) is refused: neither
    its hash nor what was loaded would describe one file.
    """
    known = [f.cache.lookup(f.key, f.pin.stat) for f in files]
    missing = [i for i, sha in enumerate(known) if sha is None]
    with ThreadPoolExecutor(max(1, len(missing)), thread_name_prefix="hash") as pool:
        hashing = {i: pool.submit(hash_file, files[i].pin.stable) for i in missing}
        loaded = load()
        hashed = {i: future.result() for i, future in hashing.items()}
    for f in files:
        if not unchanged(f.pin):
            raise RegistryError(
                "fs.changed",
                f.pin.path,
                "the file changed while it was being hashed and loaded",
                "run the command again once nothing else writes to it",
            )
    for i, sha in hashed.items():
        files[i].cache.store(files[i].key, files[i].pin.stat, sha)
    for cache in {id(f.cache): f.cache for f in files}.values():
        cache.save()
    return loaded, [Hashed(known[i] or hashed[i], known[i] is not None) for i in range(len(files))]
