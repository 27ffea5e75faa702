"""Crash-safe writes: a registry is either as it was or as the command meant to leave it.

Every file the tool owns (index.json, SHA256SUMS, README.md, its private state) is written to a
temporary file in the same directory, fsynced, and renamed over the target.  A command that
changes several files stages them all in a :class:`Transaction` and renames them only once every
check has passed, under an exclusive lock, so a failing command leaves the registry byte-identical.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from .errors import Exit, RegistryError

PRIVATE_DIR = ".registry"


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates 0600 files; registry files get the mode a plain open() would give them.
FILE_MODE = 0o666 & ~_current_umask()
LOCK_NAME = "lock"


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temp_in(directory: Path, target: Path) -> tuple[int, Path]:
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    return fd, Path(name)


def write_temp(target: Path, data: bytes, directory: Path | None = None) -> Path:
    """Write ``data`` to a fsynced temporary file (next to ``target`` unless ``directory`` is
    given, which must be on the same filesystem) and return its path."""
    fd, tmp = _temp_in(directory or target.parent, target)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def atomic_write(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data`` so readers see the old or the new file, never a mix."""
    target = Path(target)
    tmp = write_temp(target, data)
    try:
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


def ensure_writable(directory: Path) -> None:
    """Refuse early, before anything is staged, when the registry cannot be written.

    The mode bits are checked as well as access(2): root may write anywhere, but a directory a
    user marked read-only is a statement that it must not change.
    """
    mode = directory.stat().st_mode
    if not (mode & stat.S_IWUSR) or not os.access(directory, os.W_OK):
        raise RegistryError(
            "fs.read-only", directory, "the registry directory is read-only", f"make it writable (chmod u+w {directory})", Exit.MACHINE
        )


@contextmanager
def registry_lock(root: Path, timeout: float = 30.0) -> Iterator[None]:
    """Exclusive lock so two commands never interleave their writes to one registry."""
    private = root / PRIVATE_DIR
    private.mkdir(exist_ok=True)
    lock = FileLock(str(private / LOCK_NAME))
    try:
        lock.acquire(timeout=timeout)
    except Timeout as exc:
        raise RegistryError(
            "fs.locked", private / LOCK_NAME, "another registry command holds the lock", "wait for it to finish and retry"
        ) from exc
    try:
        yield
    finally:
        lock.release()


class Transaction:
    """Stage file writes and moves; apply them all at the end or none of them.

    Staging writes every new file to a fsynced temp file beside its target; :meth:`commit`
    renames them in order.  Renames within one filesystem cannot fail half-way for lack of space,
    which is why all the bytes are written before the first rename.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        # Temp files live in the private folder, which the tree walk and SHA256SUMS skip.
        self.staging = self.root / PRIVATE_DIR / "staging"
        self.staging.mkdir(parents=True, exist_ok=True)
        self._staged: list[tuple[Path, Path, bool]] = []  # (source, target, source is our temp file)
        self._digests: dict[str, str] = {}
        self._made_dirs: list[Path] = []
        self._after_commit: list[Callable[[], None]] = []

    def write(self, relpath: str | Path, data: bytes) -> None:
        target = self.root / relpath
        self._mkdirs(target.parent)
        self._staged.append((write_temp(target, data, self.staging), target, True))
        self._digests[Path(relpath).as_posix()] = hashlib.sha256(data).hexdigest()

    def move(self, source: Path, relpath: str | Path, sha256: str) -> None:
        """Stage moving an existing file (same filesystem) whose sha256 is known to ``relpath``."""
        target = self.root / relpath
        self._mkdirs(target.parent)
        self._staged.append((Path(source), target, False))
        self._digests[Path(relpath).as_posix()] = sha256

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once every staged file is in place (e.g. remember their hashes)."""
        self._after_commit.append(action)

    def staged_files(self) -> dict[str, str]:
        """sha256 of every file this transaction will create or replace, by relative path."""
        return dict(self._digests)

    def mkdir(self, relpath: str | Path) -> None:
        self._mkdirs(self.root / relpath)

    def _mkdirs(self, directory: Path) -> None:
        missing = []
        current = directory
        while not current.exists():
            missing.append(current)
            current = current.parent
        for path in reversed(missing):
            path.mkdir()
            self._made_dirs.append(path)

    def commit(self) -> None:
        touched = set()
        for source, target, _ in self._staged:
            os.replace(source, target)
            touched.add(target.parent)
        for directory in touched | {p.parent for p in self._made_dirs}:
            fsync_dir(directory)
        self._staged.clear()
        self._digests.clear()
        self._made_dirs.clear()
        for action in self._after_commit:
            action()
        self._after_commit.clear()

    def rollback(self) -> None:
        for source, _, is_temp in self._staged:
            if is_temp:
                source.unlink(missing_ok=True)
        for directory in reversed(self._made_dirs):
            try:
                directory.rmdir()
            except OSError:
                pass
        self._staged.clear()
        self._digests.clear()
        self._after_commit.clear()
        self._made_dirs.clear()


@contextmanager
def transaction(root: Path) -> Iterator[Transaction]:
    """Lock the registry, stage changes, and commit them only if the block succeeds."""
    root = Path(root)
    ensure_writable(root)
    with registry_lock(root):
        txn = Transaction(root)
        try:
            yield txn
        except BaseException:
            txn.rollback()
            raise
        txn.commit()
