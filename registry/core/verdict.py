"""The last result of a read-only command, given again while nothing it read has changed.

``validate``, ``list``, ``card --check`` and ``sums --check`` read every file of the registry; on a
registry nobody touched since their last run they would import pydantic, jsonschema and jinja2
and re-derive the same answer.  :class:`Verdicts` keeps that answer in ``.registry/verdict.json``
with a fingerprint of the tree it was computed on, and gives it back only for the same fingerprint.

The fingerprint is what the stat cache trusts (:mod:`registry.core.hashing.cache`), taken over
every path under the root: its type, mode, size, mtime, device, inode and ctime.  git's folder
and the tool's own scratch files (the lock, staging, the caches, this file) are left out; the rest
of ``.registry/`` (published sums, receipts, the dataset rows already checked) is in, and so are
the tool's own files.  Any write, rename, chmod or new file changes it.  A fingerprint is taken
only when every path was last modified more than ``RACY_SECONDS`` ago, so a change within the clock's granularity
cannot pass for none (as git's racy-clean rule).  A verdict.json that came with a clone or a
download vouches for nothing: its inodes, devices and ctimes are another machine's, and it carries
no seal of this user's key (:mod:`registry.core.userkey`), which every verdict read must.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import RegistryError
from .files import atomic_write
from .hashing.cache import RACY_SECONDS
from .hashing.digest import sha256
from .names import (
    GIT_DIR,
    INDEX_NAME,
    JOURNAL_NAME,
    LOCK_NAME,
    PRIVATE_DIR,
    STAGING_NAME,
    STAT_CACHE_NAME,
    VERDICT_NAME,
    XET_CACHE_NAME,
)
from .registry_root import find_root
from .userkey import seal, sealed_here

VERDICT_VERSION = 2  # 2: sealed with this user's key
VERDICT_PURPOSE = "verdict"  # what the seal is for (registry.core.userkey)
MAX_VERDICT_BYTES = 16 << 20
_SCRATCH = frozenset({LOCK_NAME, STAGING_NAME, STAT_CACHE_NAME, XET_CACHE_NAME, VERDICT_NAME})
_TOOL = Path(__file__).resolve().parent.parent  # the registry package: a new version (or an edit) is another tree


def _walk(top: Path, skip: Callable[[str], bool], out: list[str], now: int, followlinks: bool = False) -> bool:
    """Append one line per path under ``top`` (``skip`` leaves paths out); False when a path was
    modified less than RACY_SECONDS ago."""
    for dirpath, dirnames, filenames in os.walk(top, followlinks=followlinks):
        for name in sorted(dirnames) + sorted(filenames):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, top)
            if skip(rel):
                if name in dirnames and rel != PRIVATE_DIR:
                    dirnames.remove(name)
                continue
            st = os.stat(path) if followlinks else os.lstat(path)
            if now - st.st_mtime_ns < RACY_SECONDS * 1e9:
                return False
            out.append(
                f"{rel}\0{stat.S_IFMT(st.st_mode)}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_dev}\0{st.st_ino}\0{st.st_ctime_ns}"
            )
        dirnames.sort()
    return True


def _skipped(rel: str) -> bool:
    """git's folder, and the tool's scratch files (the private folder itself, whose times follow
    them, is walked into but not fingerprinted)."""
    parts = rel.split(os.sep)
    return parts[0] == GIT_DIR or (parts[0] == PRIVATE_DIR and (len(parts) == 1 or parts[1] in _SCRATCH))


def fingerprint(root: Path) -> str | None:
    """The fingerprint of the tree at ``root`` and of the tool, or None when it vouches for nothing
    (a path too young, a commit in flight, a path that vanished while it was read)."""
    if (root / PRIVATE_DIR / JOURNAL_NAME).exists():
        return None
    now, lines = time.time_ns(), [f"{VERDICT_VERSION}", sys.version]
    try:
        if not _walk(root, _skipped, lines, now) or not _walk(
            _TOOL, lambda rel: "__pycache__" in rel, lines, now, followlinks=True
        ):
            return None
    except OSError:
        return None
    return sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


class Verdicts:
    """The verdicts kept for one registry, by command."""

    def __init__(self, root: Path):
        self.root = root
        self.path = root / PRIVATE_DIR / VERDICT_NAME
        self.before = fingerprint(root)

    def recall(self, command: str) -> Any:
        """The result ``command`` last gave on this very tree, or None."""
        if self.before is None:
            return None
        kept = self._read().get(command)
        return kept.get("result") if isinstance(kept, dict) and kept.get("tree") == self.before else None

    def remember(self, command: str, result: Any) -> None:
        """Keep ``result`` for the tree as it was before the command, if it is still that tree (a
        file changed while the command ran vouches for nothing).  A read-only registry keeps none."""
        if self.before is None or fingerprint(self.root) != self.before:
            return
        verdicts = {k: v for k, v in self._read().items() if isinstance(v, dict) and v.get("tree") == self.before}
        verdicts[command] = {"tree": self.before, "result": result}
        try:
            if not self.path.parent.is_dir() or self.path.parent.is_symlink():
                return
            atomic_write(
                self.path,
                json.dumps(
                    {"version": VERDICT_VERSION, "verdicts": verdicts, "seal": seal(VERDICT_PURPOSE, _body(verdicts))}
                ).encode(),
            )
        except (OSError, RegistryError):  # no key can be made, no folder to write in: nothing is remembered
            return

    def _read(self) -> dict[str, Any]:
        try:
            with os.fdopen(
                os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW), "rb"
            ) as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    return {}
                raw = handle.read(MAX_VERDICT_BYTES + 1)
            data = json.loads(raw) if len(raw) <= MAX_VERDICT_BYTES else None
        except (OSError, ValueError, RecursionError):
            return {}
        if (
            not isinstance(data, dict)
            or data.get("version") != VERDICT_VERSION
            or not isinstance(data.get("verdicts"), dict)
        ):
            return {}
        if not sealed_here(VERDICT_PURPOSE, _body(data["verdicts"]), data.get("seal")):
            return {}  # not written by this user's tool (it came with the folder, or was edited): vouches for nothing
        return data["verdicts"]


def _body(verdicts: dict[str, Any]) -> bytes:
    return json.dumps(verdicts, sort_keys=True, ensure_ascii=True).encode("ascii")


def vouching(start: Path) -> Verdicts | None:
    """The verdicts of the registry a command run at ``start`` works on (found as
    :func:`~registry.core.registry_root.find_root` finds it), or None when there is none to ask."""
    root = find_root(Path(start)) if Path(start).is_dir() else None  # no such folder: the command says so
    if root is None or not (root / INDEX_NAME).is_file() or (root / INDEX_NAME).is_symlink():
        return None
    return Verdicts(root)
