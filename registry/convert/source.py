"""Find each tensor's bytes in the ``.pth`` file, so they can be copied as ``cp`` copies a file.

A torch-zip checkpoint stores every storage as an uncompressed zip member, and the tensors of
official files are contiguous slices of those storages, so a tensor's bytes are a plain byte
range of the file.  ``torch.load(mmap=True, weights_only=True)`` tells us the tensors; their
storages' addresses inside the mapping, lined up with the members' offsets, tell us where each
range starts.  Those ranges are copied file to file by the kernel and compared through short-lived
mappings of a few MiB, never through torch's mapping of the whole file, so memory stays flat
whatever the checkpoint's size.  A tensor that is not such a range (non-contiguous, or an archive
laid out differently) is taken from the loaded tensor instead.
"""

from __future__ import annotations

import os
import struct
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..libc import mapped

if TYPE_CHECKING:
    from .writer import OutputFile

_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, ..., name length, extra length


def _member_data_offsets(path: Path) -> dict[int, int]:
    """{file offset of the data: size} of every stored (uncompressed) storage member."""
    found: dict[int, int] = {}
    with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
        for info in archive.infolist():
            if "/data/" not in info.filename or info.compress_type != zipfile.ZIP_STORED:
                continue
            raw.seek(info.header_offset)
            signature, name_len, extra_len = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size))
            if signature != b"PK\x03\x04":
                return {}
            found[info.header_offset + _LOCAL_HEADER.size + name_len + extra_len] = info.file_size
    return found


def locate_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> dict[str, int]:
    """File offset of each tensor whose bytes lie as one range in the file (others are absent)."""
    members = _member_data_offsets(path)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors.values() if t.untyped_storage().nbytes()}
    if not members or not storages:
        return {}
    base = min(storages) - min(members)  # where the file starts in the mapping
    if any(members.get(ptr - base) != size for ptr, size in storages.items()):
        return {}  # not the layout we understand: read everything from memory
    return {
        name: t.untyped_storage().data_ptr() - base + int(t.storage_offset()) * t.element_size()
        for name, t in tensors.items()
        if t.is_contiguous() and t.numel()
    }


class SourceBytes:
    """Each tensor's bytes: a range of the file where possible, the loaded tensor otherwise."""

    def __init__(self, path: Path, tensors: dict[str, torch.Tensor]):
        self.tensors = tensors
        self.offsets = locate_tensors(path, tensors)
        self._fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # bigger readahead
        self._in_memory: tuple[str, memoryview] | None = None  # the last such tensor, flattened

    def in_file(self, name: str) -> bool:
        """Whether the tensor's bytes are a range of the file (and its memory that file's mapping)."""
        return name in self.offsets

    def copy_to(self, name: str, offset: int, length: int, out: OutputFile, at: int) -> None:
        """Put the tensor's bytes [offset, offset + length) at ``at`` in ``out``."""
        start = self.offsets.get(name)
        if start is not None:
            out.copy_from(self._fd, start + offset, length, at)
        else:
            out.write_at(self._memory_bytes(name)[offset : offset + length], at)

    @contextmanager
    def window(self, name: str, offset: int, length: int) -> Iterator[memoryview]:
        """The tensor's bytes [offset, offset + length), read where they lie, copied nowhere."""
        start = self.offsets.get(name)
        if start is not None:
            with mapped(self._fd, start + offset, length) as view:
                yield view
        else:
            yield self._memory_bytes(name)[offset : offset + length]

    def _memory_bytes(self, name: str) -> memoryview:
        if self._in_memory is None or self._in_memory[0] != name:
            flat = self.tensors[name].contiguous().reshape(-1)
            self._in_memory = (name, flat.view(torch.uint8).numpy().data if flat.numel() else memoryview(b""))
        return self._in_memory[1]

    def close(self) -> None:
        os.close(self._fd)
        self._in_memory = None

    def __enter__(self) -> SourceBytes:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
