"""Paths inside a registry, resolved without ever following a symlink.

Every directory on the way from the registry root to a file the tool writes (or a registered
file it reads) is opened one component at a time with ``O_NOFOLLOW`` relative to its parent
(``openat``), so a directory replaced by a link to somewhere else — even between a check and the
write — makes the command refuse instead of writing or reading outside the root.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePath, PurePosixPath

from .errors import RegistryError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _refuse_link(path: Path) -> RegistryError:
    return RegistryError(
        "fs.symlink",
        path,
        "is a symlink or not a directory, and links inside a registry are never followed",
        "replace it with a real directory (or remove it)",
    )


def check_dir(root: Path, rel: str | PurePath) -> None:
    """Refuse when a component of ``root/rel`` that exists is a link (missing ones are fine)."""
    try:
        os.close(open_dir(root, rel))
    except FileNotFoundError:
        pass


def open_dir(root: Path, rel: str | PurePath, create: bool = False) -> int:
    """An fd of the directory ``root/rel``; ``create`` makes missing components.  Close it."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    walked = Path(root)
    try:
        for part in PurePosixPath(rel).parts:
            if part in (".", "..", "/"):
                raise RegistryError(
                    "fs.outside-root", walked / part, "a path component leaves the registry", "use plain relative paths"
                )
            walked /= part
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refuse_link(walked) from exc
                raise
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def directory(root: Path, rel: str | PurePath, create: bool = False) -> Iterator[int]:
    fd = open_dir(root, rel, create)
    try:
        yield fd
    finally:
        os.close(fd)


def open_file(root: Path, rel: str) -> int:
    """An fd of the regular file ``root/rel`` opened read-only, no link followed on the way."""
    parent = PurePosixPath(rel).parent
    with directory(root, parent) as dir_fd:
        try:
            return os.open(PurePosixPath(rel).name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise RegistryError(
                    "layout.symlink",
                    rel,
                    "is a symlink (links are never followed)",
                    "replace the link with the real file",
                ) from exc
            raise
