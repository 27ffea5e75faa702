"""Read an input through one open file, so what is checked is what is registered.

A path can be re-pointed between two opens (a rename swaps in another file).  :func:`pinned`
opens the input once; every later read — inspection, hashing, copying, ``torch.load`` — goes
through ``/proc/self/fd/<n>``, which names that open file and not whatever the path names now.
A change made in place to the same file while it is pinned (its size or mtime moved) is refused
when the block ends.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import RegistryError
from .files import naming
from .hashing.cache import StatCache
from .hashing.engine import CHUNK, HashingWriter, Progress, hash_file
from .lfs import refuse_pointer
from .safepath import open_file
from .sigbus import reading


@dataclass(frozen=True)
class Pinned:
    path: Path  # what the user named: for messages
    fd: int
    stat: os.stat_result

    @property
    def stable(self) -> Path:
        """A path that opens this very file, whatever ``path`` names by now (Linux)."""
        return Path(f"/proc/self/fd/{self.fd}")

    def read_bytes(self) -> bytes:
        return os.pread(self.fd, self.stat.st_size + 1, 0)[: self.stat.st_size]


def _signature(st: os.stat_result) -> tuple[int, int]:
    # Not ctime: a second hard link (add --move) changes it without touching the bytes.
    return st.st_size, st.st_mtime_ns


def unchanged(handle: Pinned) -> bool:
    """The pinned file's size and mtime are what they were when it was opened."""
    return _signature(os.fstat(handle.fd)) == _signature(handle.stat)


@contextmanager
def pinned(path: Path, what: str = "file", opener: Callable[[], int] | None = None) -> Iterator[Pinned]:
    """Open ``path`` (a regular file) once for the block; refusals name ``path``, not the fd.

    ``opener`` opens it instead (e.g. :func:`~registry.core.safepath.open_file` inside a registry).
    """
    path = Path(path)
    try:
        fd = (
            opener() if opener else os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        )  # a FIFO would block a plain open
    except FileNotFoundError as exc:
        raise RegistryError("args.missing-file", path, f"no such {what}", "check the path") from exc
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise RegistryError("args.not-a-file", path, f"the {what} is not a regular file", "pass a regular file")
        os.set_blocking(fd, True)
        handle = Pinned(path, fd, before)
        try:
            with reading(path):
                yield handle
        except RegistryError as err:
            raise err.naming(str(handle.stable), str(path)) from err
        if not unchanged(handle):
            raise RegistryError(
                "fs.changed",
                path,
                f"the {what} changed while it was being read",
                "run the command again once nothing else writes to it",
            )
    finally:
        os.close(fd)


def open_registered(root: Path, relpath: str) -> AbstractContextManager[Pinned]:
    """A registered file, opened once without following links (its bytes not yet checked)."""
    return pinned(root / relpath, "registered file", lambda: open_file(root, relpath))


def check_registered(relpath: str, actual: str, expected: str) -> None:
    """Refuse bytes that are not what index.json registered."""
    if actual != expected:
        raise RegistryError(
            "index.sha-mismatch",
            relpath,
            f"sha256 is {actual[:12]}… but index.json says {expected[:12]}…; nothing was run on these bytes",
            "restore the registered file (`registry validate` shows every difference)",
        )


@contextmanager
def registered(
    root: Path, relpath: str, sha256: str, cache: StatCache, progress: Progress | None = None
) -> Iterator[Pinned]:
    """A registered file, opened once and checked to be the bytes index.json names.

    Commands that read registered weights (convert, smoke) work on what this yields, so bytes
    swapped in behind the index are refused before anything runs on them, and a swap during the
    command is never read.  The stat cache makes the check a stat for an unchanged file.
    """
    with open_registered(root, relpath) as handle:
        actual = cache.lookup(relpath, handle.stat)
        if actual is None:
            actual = hash_file(handle.stable, progress)
            cache.store(relpath, handle.stat, actual)
            cache.save()
        if actual != sha256:
            refuse_pointer(handle.stable, relpath)
        check_registered(relpath, actual, sha256)
        yield handle


@contextmanager
def read_view(pins: Mapping[str, Pinned]) -> Iterator[Path]:
    """A private directory where each name links to its pinned open file.

    For readers that need a path with the file's own name: suffix-based format detection,
    shards beside their index, the official runtime (which appends ``.pth``).  The links resolve
    to this process's open files, so a swap of the public path meanwhile is never read.
    """
    with tempfile.TemporaryDirectory(prefix="registry-pinned-") as tmp:
        for name, handle in pins.items():
            link = Path(tmp, name)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(handle.stable)
        yield Path(tmp)


def copy_hashing(source: Pinned, destination: Path, progress: Progress | None) -> str:
    """Copy while hashing, so a multi-GB weight file is read once."""
    with open(source.stable, "rb") as src, open(destination, "wb") as dst, naming(destination):
        out = HashingWriter(dst)
        try:
            while chunk := src.read(CHUNK):
                out.write(chunk)
                if progress:
                    progress(len(chunk))
        finally:
            out.close()
        dst.flush()
        os.fsync(dst.fileno())
    shutil.copystat(source.stable, destination)
    return out.digest.hexdigest()
