"""One file written whole: to a fsynced temporary file beside it, renamed over it, its folder
fsynced, so a reader sees the old bytes or the new, never a mix (:mod:`registry.core.atomic`
builds its transactions from these)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_DRY_RUN: ContextVar[bool] = ContextVar("dry_run", default=False)


@contextmanager
def dry_run(on: bool = True) -> Iterator[None]:
    """While ``on``: nothing under the registry is written or renamed.  An interrupted commit is
    not finished (a command that would need it refuses instead) and the caches are not saved."""
    token = _DRY_RUN.set(on or _DRY_RUN.get())
    try:
        yield
    finally:
        _DRY_RUN.reset(token)


def writes_allowed() -> bool:
    """False inside :func:`dry_run`."""
    return not _DRY_RUN.get()


# mkstemp creates 0600 files; registry files get the mode a plain open() would give them.
FILE_MODE = 0o666 & ~_current_umask()


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """Name ``path`` in an OSError raised without a file (a write or fsync that finds the disk
    full names none), so that the refusal says which file could not be written."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        with naming(directory):
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
        with naming(target), os.fdopen(fd, "wb") as handle:
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
