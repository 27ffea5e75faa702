"""Versions whose row check passed, remembered by what was checked: re-validating an unchanged
dataset (the pre-commit hook, every commit) reads no row again.

The key of a version is the sha256 of the rules' format, the version as index.json states it, and
the sha256 of every file in its folder (from SHA256SUMS's hashing, which the stat cache speeds up
and vouches for the same way).  Any change to a statement, a file or the rules is another key, so
the version is checked again.  Only clean results are remembered; a read-only registry keeps none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..core.hashing.digest import sha256_hex
from ..core.userkey import read_sealed, save_sealed
from .models import DataVersion

RULES_VERSION = 2  # bump when a check of registry.dataset.versions, .rows or .content changes


def check_key(version: DataVersion, files: Mapping[str, str]) -> str:
    state = {"rules": RULES_VERSION, "version": version.model_dump(mode="json"), "files": dict(sorted(files.items()))}
    return sha256_hex(json.dumps(state, sort_keys=True, ensure_ascii=False).encode("utf-8"))


class CheckedVersions:
    """``{version: key}`` of the versions last found clean, in the registry's private folder."""

    def __init__(self, path: Path):
        self.path = path
        # Sealed with this user's key: a record that arrived with the folder (anyone can compute a
        # key) skips no check.  None, broken or foreign: every version is checked.
        data = read_sealed(path, "dataset checked")
        self.clean: dict[str, str] = (
            data if isinstance(data, dict) and all(isinstance(v, str) for v in data.values()) else {}
        )
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
        if self._dirty and self.path.parent.parent.exists():
            save_sealed(self.path, "dataset checked", self.clean)  # no record only costs a re-check
