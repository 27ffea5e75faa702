"""Crash-safe writes: a registry is either as it was or as the command meant to leave it.

Every file the tool owns (index.json, SHA256SUMS, README.md, its private state) is written to a
temporary file in the same directory, fsynced, and renamed over the target.  A command that
changes several files stages them all in a :class:`Transaction` and renames them only once every
check has passed, under an exclusive lock, so a failing command leaves the registry byte-identical.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from filelock import FileLock, Timeout

from .collisions import too_long
from .errors import Exit, RegistryError
from .files import atomic_write, fsync_dir, write_temp
from .hashing.digest import sha256_hex
from .names import JOURNAL_NAME, LOCK_NAME, PRIVATE_DIR, STAGING_NAME
from .safepath import check_dir, directory


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
    """Exclusive lock so two commands never interleave their writes to one registry.

    Whoever takes it first finishes what an interrupted command left (:func:`recover`).
    """
    private = root / PRIVATE_DIR
    try:
        private.mkdir(exist_ok=True)
    except FileExistsError as exc:  # a file (or a link to one) where the private folder belongs
        raise RegistryError(
            "fs.private-not-dir", private, f"{PRIVATE_DIR} is a file, but the tool keeps its private folder there", f"remove or rename the file {PRIVATE_DIR}"
        ) from exc
    lock = FileLock(str(private / LOCK_NAME))
    try:
        lock.acquire(timeout=timeout)
    except Timeout as exc:
        raise RegistryError(
            "fs.locked", private / LOCK_NAME, "another registry command holds the lock", "wait for it to finish and retry"
        ) from exc
    try:
        recover(root)
        yield
    finally:
        lock.release()


def recover(root: Path) -> bool:
    """Finish an interrupted commit and remove staging debris; call only under the lock.

    A commit writes its journal (every rename it is about to do) only once all the new bytes are
    fsynced in staging, so the journal can always be rolled forward: each rename whose source is
    still there is done again, and each removal whose file is still the one the commit meant.
    Without a journal, nothing public was touched yet and whatever is in staging is debris of a
    command that died while staging (or was refused).
    True when a commit was rolled forward.
    """
    private = root / PRIVATE_DIR
    journal = private / JOURNAL_NAME
    rolled = journal.is_file()
    if rolled:
        plan = json.loads(journal.read_bytes())
        removals = [(root / rel, root / trash, identity) for rel, trash, identity in plan.get("removals", [])]
        _apply(root, [root / d for d in plan["dirs"]], [(root / src, root / dst) for src, dst in plan["renames"]], removals, skip_done=True)
        journal.unlink()
        fsync_dir(private)
    staging = private / STAGING_NAME
    if staging.is_dir():
        for debris in staging.iterdir():
            shutil.rmtree(debris) if debris.is_dir() and not debris.is_symlink() else debris.unlink()
    return rolled


Removal = tuple[Path, Path, list[int]]  # (public file, its name in staging, its identity)


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _apply(root: Path, dirs: list[Path], renames: list[tuple[Path, Path]], removals: list[Removal], skip_done: bool = False) -> None:
    """Create ``dirs``, do ``renames`` (skipping those already done when replaying), move each
    removal into staging while it is still the same regular file, fsync every directory touched.
    Directories are reached without following links (:mod:`.safepath`)."""
    touched: set[Path] = set()
    for path in dirs:
        with directory(root, path.relative_to(root), create=True):
            touched.update(_up_to(root, path))
    for source, target in renames:
        if skip_done and not source.exists():
            continue  # done before the interruption
        with directory(root, source.parent.relative_to(root)) as src, directory(root, target.parent.relative_to(root), create=True) as dst:
            os.replace(source.name, target.name, src_dir_fd=src, dst_dir_fd=dst)
        touched.update(_up_to(root, target.parent))
    for public, trash, identity in removals:
        if _remove_into_staging(root, public, trash, identity):
            touched.add(public.parent)
    for path in touched:
        fsync_dir(path)


def _remove_into_staging(root: Path, public: Path, trash: Path, identity: list[int]) -> bool:
    """Rename ``public`` to ``trash`` if it is still the file the commit meant to remove; a file
    put there since (or one already removed before an interruption) is left alone."""
    try:
        with directory(root, public.parent.relative_to(root)) as src, directory(root, trash.parent.relative_to(root)) as dst:
            st = os.stat(public.name, dir_fd=src, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or _identity(st) != identity:
                return False
            os.replace(public.name, trash.name, src_dir_fd=src, dst_dir_fd=dst)
            return True
    except FileNotFoundError:
        return False


def _up_to(root: Path, directory: Path) -> list[Path]:
    """``directory`` and its parents inside ``root``: a new directory's entry lives in its parent."""
    return [p for p in (directory, *directory.parents) if p.is_relative_to(root)]


class Transaction:
    """Stage file writes, moves and removals; apply them all at the end or none of them.

    Staging writes every new file to a fsynced temp file in ``.registry/staging``; nothing public
    changes until :meth:`commit`, which journals the renames, does them (creating the
    directories they need), and drops the journal.  Renames within one filesystem cannot fail
    half-way for lack of space, which is why all the bytes are written before the first rename;
    a kill at any instant leaves either the old registry (plus staging debris) or a journal
    that the next command rolls forward (:func:`recover`).  A removal is one more rename, of the
    file into staging, so the journal replays it too, and staging's debris goes with the rest.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        # Temp files live in the private folder, which the tree walk and SHA256SUMS skip.
        self.staging = self.root / PRIVATE_DIR / STAGING_NAME
        self.staging.mkdir(parents=True, exist_ok=True)
        self._staged: list[tuple[Path, Path, bool]] = []  # (source, target, source is our temp file)
        self._digests: dict[str, str] = {}
        self._dirs: list[Path] = []
        self._removed: dict[str, Path] = {}  # relative path -> its name in staging
        self._after_commit: list[Callable[[], None]] = []

    def write(self, relpath: str | Path, data: bytes) -> None:
        self._not_removed(relpath)
        target = self.root / relpath
        self._staged.append((write_temp(target, data, self.staging), target, True))
        self._digests[Path(relpath).as_posix()] = sha256_hex(data)

    def move(self, source: Path, relpath: str | Path, sha256: str) -> None:
        """Stage moving a file in staging whose sha256 is known to ``relpath``."""
        source = Path(source)
        if source.parent != self.staging:
            raise ValueError(f"{source} is not in {self.staging}: the journal replays only renames out of staging")
        self._not_removed(relpath)
        self._staged.append((source, self.root / relpath, False))
        self._digests[Path(relpath).as_posix()] = sha256

    def remove(self, relpath: str | Path) -> None:
        """Stage removing the file ``relpath``: at commit it is renamed into staging, then deleted.
        (Staging is emptied under the lock before a transaction starts, so the name is free.)"""
        if self.staged_source(relpath) is not None:
            raise ValueError(f"{relpath} is both written and removed by this transaction")
        rel = Path(relpath).as_posix()
        self._removed.setdefault(rel, self.staging / f".removed.{len(self._removed)}.{Path(rel).name}")

    def _not_removed(self, relpath: str | Path) -> None:
        if Path(relpath).as_posix() in self._removed:
            raise ValueError(f"{relpath} is both written and removed by this transaction")

    def removed_files(self) -> set[str]:
        """The relative paths this transaction will remove."""
        return set(self._removed)

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once every staged file is in place (e.g. remember their hashes)."""
        self._after_commit.append(action)

    def staged_files(self) -> dict[str, str]:
        """sha256 of every file this transaction will create or replace, by relative path."""
        return dict(self._digests)

    def staged_source(self, relpath: str | Path) -> Path | None:
        """Where the bytes this transaction will put at ``relpath`` are now, or None when it puts none there."""
        target = self.root / relpath
        return next((source for source, staged, _ in reversed(self._staged) if staged == target), None)

    def mkdir(self, relpath: str | Path) -> None:
        """Create ``relpath`` (and its parents) at commit."""
        self._dirs.append(self.root / relpath)

    def _check_targets(self) -> None:
        """Refuse, before the journal, a target reached through a link, that a rename cannot replace,
        or whose name no file system holds (a journal naming it could never be replayed)."""
        for path in [*self._dirs, *(target for _, target, _ in self._staged)]:
            long = next(filter(None, map(too_long, path.relative_to(self.root).parts)), None)
            if long:
                raise RegistryError("fs.name-too-long", self._relative(path)[:120] + "…", f"a name in this path {long}", "pass a shorter name")
        for directory_path in [*self._dirs, *(target.parent for _, target, _ in self._staged)]:
            check_dir(self.root, directory_path.relative_to(self.root))
        for _, target, _ in self._staged:
            if target.is_dir() and not target.is_symlink():
                raise RegistryError("fs.eisdir", target, "a directory stands where the command writes a file", "remove or rename that directory", Exit.MACHINE)

    def _removal_identity(self, rel: str) -> list[int]:
        """The identity of the regular file ``rel`` to remove (journaled, so a replay removes only
        that file); refused, before the journal, when it is reached through a link or is not one."""
        check_dir(self.root, Path(rel).parent)
        try:
            st = (self.root / rel).lstat()
        except FileNotFoundError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            raise RegistryError("fs.not-a-file", rel, "the command removes this file, but it is not a regular file", "remove or rename it yourself", Exit.MACHINE)
        return _identity(st)

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def commit(self) -> None:
        self._check_targets()
        renames = [(source, target) for source, target, _ in self._staged]
        removals = [(self.root / rel, trash, self._removal_identity(rel)) for rel, trash in self._removed.items()]
        private = self.root / PRIVATE_DIR
        rel = self._relative
        plan = {
            "dirs": [rel(d) for d in self._dirs], "renames": [[rel(source), rel(target)] for source, target in renames],
            "removals": [[rel(public), rel(trash), identity] for public, trash, identity in removals],
        }  # fmt: skip
        atomic_write(private / JOURNAL_NAME, json.dumps(plan).encode())
        _apply(self.root, self._dirs, renames, removals)
        (private / JOURNAL_NAME).unlink()
        fsync_dir(private)
        trash = list(self._removed.values())
        self._staged.clear()
        self._digests.clear()
        self._dirs.clear()
        self._removed.clear()
        for action in self._after_commit:
            action()
        self._after_commit.clear()
        for path in trash:  # committed already: what is left here is debris the next command clears
            with suppress(OSError):
                path.unlink(missing_ok=True)

    def rollback(self) -> None:
        for source, _, is_temp in self._staged:
            if is_temp:
                source.unlink(missing_ok=True)
        self._staged.clear()
        self._digests.clear()
        self._after_commit.clear()
        self._dirs.clear()
        self._removed.clear()


@contextmanager
def transaction(root: Path) -> Iterator[Transaction]:
    """Lock the registry, stage changes, and commit them only if the block succeeds.

    Read the index the change builds on inside the block (under the lock), or a concurrent
    command's change could be lost.
    """
    root = Path(root)
    ensure_writable(root)
    with registry_lock(root), locked_transaction(root) as txn:
        yield txn


@contextmanager
def locked_transaction(root: Path) -> Iterator[Transaction]:
    """A transaction for a caller that already holds the registry lock (e.g. publish, throughout)."""
    txn = Transaction(root)
    try:
        yield txn
    except BaseException:
        txn.rollback()
        raise
    txn.commit()
