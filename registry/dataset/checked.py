"""Versions whose row check passed, remembered by what was checked: re-validating an unchanged
dataset (the pre-commit hook, every commit) reads no row again.

The key of a version is the sha256 of the rules' format, the version as index.json states it, and
the sha256 of every file in its folder (from SHA256SUMS's hashing, which the stat cache speeds up
and vouches for the same way).  Any change to a statement, a file or the rules is another key, so
the version is checked again.  Only clean results are remembered; a read-only registry keeps none.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Mapping
from pathlib import Path

from ..core.files import atomic_write
from ..core.hashing.digest import sha256_hex
from .models import DataVersion

RULES_VERSION = 1  # bump when a check of registry.dataset.versions or .rows changes


def check_key(version: DataVersion, files: Mapping[str, str]) -> str:
    state = {"rules": RULES_VERSION, "version": version.model_dump(mode="json"), "files": dict(sorted(files.items()))}
    return sha256_hex(json.dumps(state, sort_keys=True, ensure_ascii=False).encode("utf-8"))


class CheckedVersions:
    """``{version: key}`` of the versions last found clean, in the registry's private folder."""

    def __init__(self, path: Path):
        self.path = path
        try:
            data = json.loads(path.read_text("utf-8"))
            self.clean: dict[str, str] = data if isinstance(data, dict) and all(isinstance(v, str) for v in data.values()) else {}
        except (OSError, ValueError):
            self.clean = {}  # none or broken: every version is checked
        self._dirty = False

    def is_clean(self, version: str, key: str) -> bool:
        return self.clean.get(version) == key

    def record(self, version: str, key: str | None) -> None:
        """Remember ``key`` as clean, or (None) forget the version."""
        if self.clean.get(version) != key:
            self._dirty = True
            if key is None:
                self.clean.pop(version, None)
            else:
                self.clean[version] = key

    def save(self) -> None:
        root = self.path.parent.parent
        if not self._dirty or not root.exists() or not root.stat().st_mode & stat.S_IWUSR:
            return
        try:
            self.path.parent.mkdir(exist_ok=True)
            atomic_write(self.path, json.dumps(self.clean, sort_keys=True).encode())
        except OSError:
            return  # no cache only costs a re-check
