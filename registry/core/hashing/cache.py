"""A stat cache so re-checking an unchanged multi-GB tree re-hashes nothing.

A file's cached sha256 is trusted only while its (size, mtime_ns, device, inode, ctime_ns) are
all unchanged: any write, truncate, rename-over or chmod changes ctime.  Like git's index, a file
modified within the timestamp granularity of the moment it was hashed could look unchanged, so
files younger than ``RACY_SECONDS`` are never cached and are always re-hashed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..userkey import read_sealed, save_sealed

CACHE_VERSION = 2
RACY_SECONDS = 2.0


def _fingerprint(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_ctime_ns]


class StatCache:
    """sha256 by relative path, valid only for an identical stat fingerprint."""

    def __init__(self, path: Path | None):
        self.path = path
        self._entries: dict[str, list] = {}
        self._dirty = False
        # Sealed with this user's key: a cache that arrived with the folder vouches for nothing.
        data = read_sealed(path, f"cache {path.name}") if path is not None else None
        if isinstance(data, dict) and data.get("version") == CACHE_VERSION and isinstance(data.get("files"), dict):
            self._entries = {rel: entry for rel, entry in data["files"].items() if isinstance(entry, list)}

    def lookup(self, relpath: str, st: os.stat_result) -> str | None:
        entry = self._entries.get(relpath)
        fingerprint = _fingerprint(st)
        if entry and entry[: len(fingerprint)] == fingerprint:
            return entry[len(fingerprint)]
        return None

    def store(self, relpath: str, st: os.stat_result, sha256: str) -> None:
        if time.time_ns() - st.st_mtime_ns < RACY_SECONDS * 1e9:
            self._entries.pop(relpath, None)
            return
        self._entries[relpath] = [*_fingerprint(st), sha256]
        self._dirty = True

    def prune(self, keep: set[str]) -> None:
        for relpath in set(self._entries) - keep:
            del self._entries[relpath]
            self._dirty = True

    def save(self) -> None:
        """Persist if changed; a read-only registry (or a dry run) simply keeps no cache."""
        if not self._dirty or self.path is None:
            return
        save_sealed(self.path, f"cache {self.path.name}", {"version": CACHE_VERSION, "files": self._entries})
        self._dirty = False
