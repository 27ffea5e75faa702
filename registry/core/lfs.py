"""Git LFS pointer files: what a checkout made without git-lfs holds in place of each weight.

A pointer is a small text file (``version https://git-lfs.github.com/spec/v1``, the object's
sha256 and size).  Hashing it and comparing with SHA256SUMS would call it tampering, and
``--allow-rewrite`` could never accept it; every place that reads a weight asks here first and
says what it is, with the one fix that works.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .errors import Problem, RegistryError

SPEC = b"version https://git-lfs.github.com/spec/"
MAX_POINTER_BYTES = 1024  # git-lfs never writes a pointer this large
MESSAGE = "a Git LFS pointer, not the file"
FIX = "git lfs pull"


def is_pointer(path: Path) -> bool:
    """True when ``path`` is a regular file holding a Git LFS pointer.  Callers pass files of the
    tree walk (never links) or a pinned file's ``/proc/self/fd`` path, which must be followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        return stat.S_ISREG(st.st_mode) and st.st_size <= MAX_POINTER_BYTES and os.pread(fd, len(SPEC), 0) == SPEC
    finally:
        os.close(fd)


# git-lfs's spec v1: the version line, then the keys in order, one `key value` line each, LF ends.
_POINTER = re.compile(
    rb"version https://git-lfs\.github\.com/spec/v1\noid sha256:([0-9a-f]{64})\nsize (0|[1-9][0-9]{0,18})\n"
)


@dataclass(frozen=True)
class Pointer:
    """What a pointer says of the file it stands for: its sha256 (the LFS oid) and size."""

    oid: str
    size: int


def read_pointer(root: Path, rel: str) -> Pointer | Problem:
    """The pointer at ``rel`` (a regular file of the tree walk, :func:`is_pointer`), or why it is
    not one git-lfs would resolve (anything beyond version, oid sha256 and size is refused)."""
    fd = os.open(root / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        data = os.pread(fd, MAX_POINTER_BYTES + 1, 0)
    finally:
        os.close(fd)
    match = _POINTER.fullmatch(data)
    if match is None:
        return Problem(
            "lfs.malformed-pointer",
            rel,
            "a Git LFS pointer that is not `version`, `oid sha256:<64 hex>` and `size <bytes>` lines",
            "check the file out again (`git checkout -- FILE`), or `git lfs pull` it",
        )
    return Pointer(match.group(1).decode(), int(match.group(2)))


def pointer_problem(rel: str) -> Problem:
    return Problem("lfs.pointer", rel, MESSAGE, FIX)


def pointers(root: Path, relpaths: Iterable[str]) -> list[str]:
    """The paths among ``relpaths`` that are LFS pointers."""
    return [rel for rel in relpaths if is_pointer(root / rel)]


def refuse_pointers(root: Path, relpaths: Iterable[str]) -> None:
    """Refuse, naming each, when any of ``relpaths`` is an LFS pointer."""
    found = pointers(root, relpaths)
    if found:
        raise RegistryError.of([pointer_problem(rel) for rel in found])


def refuse_pointer(path: Path, shown: str | Path | None = None) -> None:
    if is_pointer(path):
        raise RegistryError("lfs.pointer", shown or path, MESSAGE, FIX)
