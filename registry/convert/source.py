"""Find each tensor's bytes in the ``.pth`` file, so they can be copied as ``cp`` copies a file.

A torch-zip checkpoint stores every storage as an uncompressed zip member, and the tensors of
official files are contiguous slices of those storages, so a tensor's bytes are a plain byte
range of the file.  ``torch.load(mmap=True, weights_only=True)`` tells us the tensors; their
storages' addresses inside the mapping, lined up with the members' offsets, tell us where each
range starts.  Those ranges are copied file to file by the kernel and compared through short-lived
mappings of a few MiB, never through torch's mapping of the whole file, so memory stays flat
whatever the checkpoint's size.  A tensor that is not such a range (non-contiguous, or an archive
laid out differently) is taken from the loaded tensor instead; where its storage is the file's
mapping (a transposed view, say), the pages reading it mapped are dropped again afterwards.
"""

from __future__ import annotations

import os
import struct
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from ..core.libc import mapped, unmap_pages


class ByteSink(Protocol):
    """Where :meth:`SourceBytes.copy_to` puts bytes (``convert.writer.OutputFile``)."""

    def copy_from(self, source_fd: int, source_offset: int, length: int, offset: int) -> None: ...

    def write_at(self, data: bytes | memoryview, offset: int) -> None: ...


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


@dataclass(frozen=True)
class FileLayout:
    """Where the tensors lie in the file: ``offsets``, the file offset of each tensor whose bytes
    are one range of it (others are absent); ``mapped``, the address of each storage that is
    torch's mapping of the file (empty when the layout is not one we understand)."""

    offsets: dict[str, int]
    mapped: frozenset[int]


def locate_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> FileLayout:
    members = _member_data_offsets(path)
    storages = {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
        for t in tensors.values()
        if t.untyped_storage().nbytes()
    }
    if not members or not storages:
        return FileLayout({}, frozenset())
    base = min(storages) - min(members)  # where the file starts in the mapping
    if any(members.get(ptr - base) != size for ptr, size in storages.items()):
        return FileLayout({}, frozenset())  # not the layout we understand: read everything from memory
    offsets = {
        name: t.untyped_storage().data_ptr() - base + int(t.storage_offset()) * t.element_size()
        for name, t in tensors.items()
        if t.is_contiguous() and t.numel()
    }
    return FileLayout(offsets, frozenset(storages))


FAULT_AROUND = 64 << 10  # Linux maps up to this much cached file around a faulted page


def unmap_touched(tensor: torch.Tensor) -> None:
    """Reading an mmap-loaded tensor maps its pages (and neighbours) into this process; drop them
    again, so that reading thousands of tensors does not add up to hundreds of MiB of RSS.  Only
    for tensors whose storage is the file's mapping: on anonymous memory this would zero it."""
    storage = tensor.untyped_storage()
    if not storage.nbytes():
        return
    first = tensor.data_ptr()
    last = first + tensor.numel() * tensor.element_size()  # a transposed view spans the same bytes
    start = max(storage.data_ptr(), first - FAULT_AROUND)
    unmap_pages(start, min(storage.data_ptr() + storage.nbytes(), last + FAULT_AROUND) - start)


class SourceBytes:
    """Each tensor's bytes: a range of the file where possible, the loaded tensor otherwise."""

    def __init__(self, path: Path, tensors: dict[str, torch.Tensor]):
        self.tensors = tensors
        layout = locate_tensors(path, tensors)
        self.offsets, self._mapped = layout.offsets, layout.mapped
        self._fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # bigger readahead
        self._in_memory: tuple[str, memoryview] | None = None  # the last such tensor, flattened

    def drop_pages(self, name: str) -> None:
        """Drop the pages that reading the tensor mapped into this process, where its storage is
        the file's mapping (the data stays: it comes back from the file when read again)."""
        tensor = self.tensors[name]
        if tensor.untyped_storage().data_ptr() in self._mapped:
            unmap_touched(tensor)

    def copy_to(self, name: str, offset: int, length: int, out: ByteSink, at: int) -> None:
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
            self.drop_pages(name)  # the copy is made: the source's pages can go
            self._in_memory = (name, flat.view(torch.uint8).numpy().data if flat.numel() else memoryview(b""))
        return self._in_memory[1]

    def close(self) -> None:
        os.close(self._fd)
        self._in_memory = None

    def __enter__(self) -> SourceBytes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
