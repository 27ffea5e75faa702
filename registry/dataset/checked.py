"""Versions whose row check passed, remembered by what was checked: re-validating an unchanged
dataset (the pre-commit hook, every commit) reads no row again.

The key of a version is the HMAC, under this user's key (outside every registry), of the rules'
format, the version as index.json states it, and the sha256 of every file in its folder (from
SHA256SUMS's hashing, which the stat cache speeds up and vouches for the same way).  Any change to
a statement, a file or the rules is another key, so the version is checked again; an entry written
by hand or copied from another machine matches no key.  Only clean results are remembered; a
read-only registry keeps none.
"""

from __future__ import annotations

import hmac
import json
import stat
from collections.abc import Mapping
from pathlib import Path

from ..core.files import atomic_write
from ..core.hashing.digest import hmac_sha256_hex
from .content import remembering_key
from .models import DataVersion

RULES_VERSION = 2  # bump when a check of registry.dataset.versions, .rows or .content changes


def check_key(version: DataVersion, files: Mapping[str, str]) -> str | None:
    """The HMAC, under this user's key, of what a clean check of the version depends on; None
    without a key (then nothing is remembered).  The file itself is untrusted (.registry/ arrives
    with a clone): an entry its reader cannot forge without the key, and that names no other
    statements or bytes than those it was computed for."""
    key = remembering_key()
    if key is None:
        return None
    state = {"rules": RULES_VERSION, "version": version.model_dump(mode="json"), "files": dict(sorted(files.items()))}
    return hmac_sha256_hex(key, json.dumps(state, sort_keys=True, ensure_ascii=False).encode("utf-8"))


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

    def is_clean(self, version: str, key: str | None) -> bool:
        return key is not None and hmac.compare_digest(self.clean.get(version, ""), key)

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
