"""Keep a memory-mapped checkpoint from filling the process's RSS.

``torch.load(mmap=True)`` maps the whole file; every page read while converting would stay
mapped (and count in RSS) until the end.  After each tensor is written and verified, its pages
are dropped from the mapping with madvise(MADV_DONTNEED): the data stays in the page cache, the
mapping is private and never written, so nothing is lost — the next read simply faults it in.
"""

from __future__ import annotations

import ctypes
import mmap
import os

import torch

_MADV_DONTNEED = 4
_MADV_POPULATE_READ = 22  # Linux >= 5.14: fault a whole range in with one call
_libc = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None


def _advise(tensor: torch.Tensor, offset: int, length: int | None, advice: int, whole_pages_only: bool) -> None:
    if _libc is None or tensor.device.type != "cpu" or tensor.numel() == 0:
        return
    nbytes = tensor.numel() * tensor.element_size()
    start = tensor.data_ptr() + offset
    end = start + (nbytes - offset if length is None else min(length, nbytes - offset))
    page = mmap.PAGESIZE
    if whole_pages_only:  # never drop a page shared with a neighbouring tensor
        first, last = (start + page - 1) // page * page, end // page * page
    else:
        first, last = start // page * page, (end + page - 1) // page * page
    if last > first:
        _libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), advice)


def release_pages(tensor: torch.Tensor, offset: int = 0, length: int | None = None) -> None:
    """Drop the resident pages behind ``tensor``'s bytes [offset, offset+length).

    Only for tensors from ``torch.load(mmap=True)``: on anonymous memory MADV_DONTNEED would
    zero the data.  Only whole pages inside the range are dropped.
    """
    _advise(tensor, offset, length, _MADV_DONTNEED, whole_pages_only=True)


def populate_pages(tensor: torch.Tensor, offset: int = 0, length: int | None = None) -> None:
    """Fault a range in with one syscall instead of one page fault per 4 KiB (a hint: a kernel
    without MADV_POPULATE_READ just ignores it and the reads fault as usual)."""
    _advise(tensor, offset, length, _MADV_POPULATE_READ, whole_pages_only=False)
