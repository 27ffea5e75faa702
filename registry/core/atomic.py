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
from pathlib import Path, PurePosixPath
from typing import Any

from filelock import FileLock, Timeout

from .collisions import too_long
from .errors import Exit, RegistryError
from .files import atomic_write, fsync_dir, write_temp, writes_allowed
from .hashing.digest import sha256_hex
from .names import JOURNAL_NAME, LOCK_NAME, PRIVATE_DIR, STAGING_NAME
from .safepath import check_dir, directory
from .schemas import parse_json, read_bounded
from .userkey import seal, sealed_here

JOURNAL_PURPOSE = "journal"  # the purpose a journal is sealed under (registry.core.userkey)
JOURNAL = f"{PRIVATE_DIR}/{JOURNAL_NAME}"
STAGING = f"{PRIVATE_DIR}/{STAGING_NAME}"
MAX_JOURNAL_BYTES = 64 << 20


def ensure_writable(directory: Path) -> None:
    """Refuse early, before anything is staged, when the registry cannot be written.

    The mode bits are checked as well as access(2): root may write anywhere, but a directory a
    user marked read-only is a statement that it must not change.
    """
    mode = directory.stat().st_mode
    if not (mode & stat.S_IWUSR) or not os.access(directory, os.W_OK):
        raise RegistryError(
            "fs.read-only",
            directory,
            "the registry directory is read-only",
            f"make it writable (chmod u+w {directory})",
            Exit.MACHINE,
        )


def _private_dir(root: Path) -> Path | None:
    """The private folder, None while there is none; refused when it is a link or not a folder
    (links inside a registry are never followed: a private folder elsewhere would be written there)."""
    private = root / PRIVATE_DIR
    try:
        st = private.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        what = "a link" if stat.S_ISLNK(st.st_mode) else "a file"
        raise RegistryError(
            "fs.private-not-dir",
            PRIVATE_DIR,
            f"{PRIVATE_DIR} is {what}, but the tool keeps its private folder there",
            f"remove or rename the {what[2:]} {PRIVATE_DIR} (it is no part of the registry's content)",
        )
    for name in (LOCK_NAME, STAGING_NAME):
        try:
            entry = (private / name).lstat()
        except FileNotFoundError:
            continue
        # the lock is opened for writing (and truncated): a link, or a second name of a file, would reach that file
        wrong = (
            not stat.S_ISDIR(entry.st_mode)
            if name == STAGING_NAME
            else not stat.S_ISREG(entry.st_mode) or entry.st_nlink != 1
        )
        if wrong:
            raise RegistryError(
                "fs.private-not-own",
                f"{PRIVATE_DIR}/{name}",
                "is not what the tool keeps there (a link, another name of a file, or another kind of file)",
                f"remove {PRIVATE_DIR}/{name} (it is no part of the registry's content)",
            )
    return private


def pending_commit(root: Path) -> bool:
    """Whether a commit journal lies in the registry (one of its own, or one that arrived with it)."""
    return os.path.lexists(Path(root) / JOURNAL)


def finish_interrupted(root: Path) -> None:
    """Finish a commit an interrupted command left, before anything reads the registry: under the
    lock, only a journal this registry wrote (:func:`recover`).  In a dry run nothing is finished:
    the command refuses until a real one has done it."""
    if not pending_commit(root):
        return
    _journal_plan(Path(root))  # a foreign journal is refused before the lock file is made
    if not writes_allowed():
        raise RegistryError(
            "fs.commit-pending",
            JOURNAL,
            "an interrupted command left a commit to finish, and a dry run changes nothing",
            "run the command once without --dry-run (or any other registry command) to finish it",
        )
    with registry_lock(root):
        pass


@contextmanager
def registry_lock(root: Path, timeout: float = 30.0) -> Iterator[None]:
    """Exclusive lock so two commands never interleave their writes to one registry.

    Whoever takes it first finishes what an interrupted command left (:func:`recover`).
    """
    root = Path(root)
    if pending_commit(root):
        _journal_plan(root)  # refuse a foreign journal before anything is created
    private = _private_dir(root)
    if private is None:
        private = root / PRIVATE_DIR
        try:
            private.mkdir(exist_ok=True)
        except FileExistsError as exc:  # a file (or a link to one) where the private folder belongs
            raise RegistryError(
                "fs.private-not-dir",
                private,
                f"{PRIVATE_DIR} is a file, but the tool keeps its private folder there",
                f"remove or rename the file {PRIVATE_DIR}",
            ) from exc
        _private_dir(root)
    lock = FileLock(str(private / LOCK_NAME))
    try:
        lock.acquire(timeout=timeout)
    except Timeout as exc:
        raise RegistryError(
            "fs.locked",
            private / LOCK_NAME,
            "another registry command holds the lock",
            "wait for it to finish and retry",
        ) from exc
    try:
        recover(root)
        yield
    finally:
        lock.release()


def _identity_of_private(root: Path) -> list[int]:
    """What binds a journal to this copy of the registry: its private folder's device and inode
    (a copy, a clone or an extracted archive has other ones; a folder moved within a disk keeps them)."""
    st = (root / PRIVATE_DIR).lstat()
    return [st.st_dev, st.st_ino]


def _foreign(reason: str) -> RegistryError:
    return RegistryError(
        "fs.foreign-journal",
        JOURNAL,
        f"a commit journal this registry did not write ({reason}); nothing was replayed or changed",
        f"if the folder was copied, cloned or downloaded, delete {JOURNAL} (it is no part of the content) "
        "and run the command again",
    )


def _journal_body(plan: dict[str, Any]) -> bytes:
    return json.dumps(plan, sort_keys=True, ensure_ascii=True).encode("ascii")


def _staged_name(rel: object) -> bool:
    """Whether ``rel`` names a file right inside this registry's staging folder."""
    if not isinstance(rel, str):
        return False
    parts = PurePosixPath(rel).parts
    return (
        len(parts) == 3
        and f"{parts[0]}/{parts[1]}" == STAGING
        and parts[2] not in (".", "..")
        and rel == "/".join(parts)
    )


def _inside(rel: object) -> bool:
    """Whether ``rel`` is a plain relative path inside the registry, outside the tool's own journal, lock and
    staging."""
    if not isinstance(rel, str) or not rel:
        return False
    parts = PurePosixPath(rel).parts
    if rel != "/".join(parts) or any(p in (".", "..", "") for p in parts) or rel.startswith("/"):
        return False
    return not (parts[0] == PRIVATE_DIR and len(parts) > 1 and parts[1] in (JOURNAL_NAME, LOCK_NAME, STAGING_NAME))


def _journal_plan(root: Path) -> dict[str, Any] | None:
    """The plan of the journal in ``root``, if there is one, once it proved to be this registry's own:
    sealed with this user's key (:mod:`registry.core.userkey`) for this copy of the registry, every
    rename out of its staging folder, every removal into it.  Anything else is refused, untouched."""
    try:
        st = (root / JOURNAL).lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise _foreign("it is not a regular file")
    if not stat.S_ISDIR((root / PRIVATE_DIR).lstat().st_mode):
        raise _foreign(f"{PRIVATE_DIR} is a link")
    try:
        data = parse_json(read_bounded(root / JOURNAL, MAX_JOURNAL_BYTES, JOURNAL, "journal", "fs"), JOURNAL)
    except RegistryError as exc:
        raise _foreign(exc.problem.message) from exc
    plan = data.get("plan") if isinstance(data, dict) else None
    if not isinstance(plan, dict) or set(data) != {"plan", "seal"}:
        raise _foreign("it is not a journal of this tool")
    if not sealed_here(JOURNAL_PURPOSE, _journal_body(plan), data["seal"]):
        raise _foreign("its seal does not check under this user's key: it was written elsewhere, or edited")
    if plan.get("registry") != _identity_of_private(root):
        raise _foreign("it was written for another copy of this folder")
    renames, removals, dirs = plan.get("renames"), plan.get("removals"), plan.get("dirs")
    if not (isinstance(renames, list) and isinstance(removals, list) and isinstance(dirs, list)):
        raise _foreign("it is not a journal of this tool")
    if not all(isinstance(r, list) and len(r) == 2 and _staged_name(r[0]) and _inside(r[1]) for r in renames):
        raise _foreign(f"a rename does not come out of {STAGING}")
    if not all(
        isinstance(r, list) and len(r) == 3 and _inside(r[0]) and _staged_name(r[1]) and isinstance(r[2], list)
        for r in removals
    ):
        raise _foreign(f"a removal does not go into {STAGING}")
    if not all(_inside(d) for d in dirs):
        raise _foreign("a folder it makes is not inside the registry")
    return plan


def recover(root: Path) -> bool:
    """Finish an interrupted commit and remove staging debris; call only under the lock.

    A commit writes its journal (every rename it is about to do) only once all the new bytes are
    fsynced in staging, so the journal can always be rolled forward: each rename whose source is
    still there is done again, and each removal whose file is still the one the commit meant.
    Only a journal this registry wrote is replayed (:func:`_journal_plan`); any other is refused
    before anything is touched.  Without a journal, nothing public was touched yet and whatever
    is in staging is debris of a command that died while staging (or was refused).
    True when a commit was rolled forward.
    """
    private = root / PRIVATE_DIR
    plan = _journal_plan(root)
    if plan is not None:
        removals = [(root / rel, root / trash, identity) for rel, trash, identity in plan["removals"]]
        _apply(
            root,
            [root / d for d in plan["dirs"]],
            [(root / src, root / dst) for src, dst in plan["renames"]],
            removals,
            skip_done=True,
        )
        (root / JOURNAL).unlink()
        fsync_dir(private)
    staging = private / STAGING_NAME
    if _private_dir(root) is not None and staging.is_dir():  # checked: neither is a link
        for debris in staging.iterdir():
            shutil.rmtree(debris) if debris.is_dir() and not debris.is_symlink() else debris.unlink()
    return plan is not None


Removal = tuple[Path, Path, list[int]]  # (public file, its name in staging, its identity)


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _apply(
    root: Path, dirs: list[Path], renames: list[tuple[Path, Path]], removals: list[Removal], skip_done: bool = False
) -> None:
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
        with (
            directory(root, source.parent.relative_to(root)) as src,
            directory(root, target.parent.relative_to(root), create=True) as dst,
        ):
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
        with (
            directory(root, public.parent.relative_to(root)) as src,
            directory(root, trash.parent.relative_to(root)) as dst,
        ):
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
        _private_dir(self.root)  # neither the private folder nor staging is a link
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
                raise RegistryError(
                    "fs.name-too-long",
                    self._relative(path)[:120] + "…",
                    f"a name in this path {long}",
                    "pass a shorter name",
                )
        for directory_path in [*self._dirs, *(target.parent for _, target, _ in self._staged)]:
            check_dir(self.root, directory_path.relative_to(self.root))
        for _, target, _ in self._staged:
            if target.is_dir() and not target.is_symlink():
                raise RegistryError(
                    "fs.eisdir",
                    target,
                    "a directory stands where the command writes a file",
                    "remove or rename that directory",
                    Exit.MACHINE,
                )

    def _removal_identity(self, rel: str) -> list[int]:
        """The identity of the regular file ``rel`` to remove (journaled, so a replay removes only
        that file); refused, before the journal, when it is reached through a link or is not one."""
        check_dir(self.root, Path(rel).parent)
        try:
            st = (self.root / rel).lstat()
        except FileNotFoundError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            raise RegistryError(
                "fs.not-a-file",
                rel,
                "the command removes this file, but it is not a regular file",
                "remove or rename it yourself",
                Exit.MACHINE,
            )
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
            "registry": _identity_of_private(self.root),
            "dirs": [rel(d) for d in self._dirs],
            "renames": [[rel(source), rel(target)] for source, target in renames],
            "removals": [[rel(public), rel(trash), identity] for public, trash, identity in removals],
        }
        atomic_write(
            private / JOURNAL_NAME,
            json.dumps({"plan": plan, "seal": seal(JOURNAL_PURPOSE, _journal_body(plan))}).encode(),
        )
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
