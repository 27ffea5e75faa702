"""A stat cache so re-checking an unchanged multi-GB tree re-hashes nothing.

A file's cached sha256 is trusted only while its (size, mtime_ns, device, inode, ctime_ns) are
all unchanged: any write, truncate, rename-over or chmod changes ctime.  Like git's index, a file
modified within the timestamp granularity of the moment it was hashed could look unchanged, so
files younger than ``RACY_SECONDS`` are never cached and are always re-hashed.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

from ..files import atomic_write

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
        if path is not None and path.is_file():
            try:
                data = json.loads(path.read_text("utf-8"))
                if data.get("version") == CACHE_VERSION:
                    self._entries = data.get("files", {})
            except (OSError, ValueError):
                self._entries = {}  # a broken cache only costs a re-hash

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
        """Persist if changed; a read-only registry simply keeps no cache."""
        if not self._dirty or self.path is None:
            return
        try:
            root = self.path.parent.parent
            if root.exists() and not root.stat().st_mode & stat.S_IWUSR:  # a read-only registry
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps({"version": CACHE_VERSION, "files": self._entries}).encode())
        except OSError:
            return
        self._dirty = False
