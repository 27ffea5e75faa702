"""A streaming safetensors writer: each tensor's own bytes go straight to their place in the file.

safetensors' ``save_file`` needs every tensor in memory at once; this writer needs none.  The
format: an 8-byte little-endian header length, a JSON header (padded with spaces to a multiple
of 8) mapping names to dtype, shape and [start, end) offsets, then the raw data.

Every byte goes to a fixed offset (:class:`OutputFile`), which buys two things.  The tensor
bytes are copied file to file inside the kernel (``copy_file_range``, what ``cp`` does), never
through a Python buffer.  And they can be copied before the header exists: a standalone
conversion records the source's sha256 in the header, and that hash is still being computed
while the data is copied (its hex form has a fixed length, so the offsets do not depend on it).
"""

from __future__ import annotations

import errno
import json
import os
import queue
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from ..artifacts.dtypes import little_endian_bytes
from ..core.errors import RegistryError
from ..core.hashing.engine import Progress
from ..core.libc import mapped, same_bytes, start_writeback
from .source import SourceBytes

PIECE = 32 << 20  # bytes copied, then read back and compared, at a time
WRITEBACK_EVERY = 256 << 20  # written bytes handed to the background writeback at a time
_FALLBACK_CHUNK = 8 << 20

SAFETENSORS_DTYPES: dict[torch.dtype, str] = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
    torch.float8_e4m3fn: "F8_E4M3",
    torch.float8_e5m2: "F8_E5M2",
}

# copy_file_range refusals that mean "not between these two files": copy through memory instead.
_NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL, errno.EBADF}


def check_dtypes(tensors: dict[str, torch.Tensor], source: str) -> None:
    for name, tensor in tensors.items():
        if tensor.dtype not in SAFETENSORS_DTYPES:
            raise RegistryError(
                "convert.unsupported-dtype",
                source,
                f"tensor {name} has dtype {tensor.dtype}, which safetensors cannot store",
                "cast it to bf16/fp16/fp32 before converting",
            )


@dataclass(frozen=True)
class Layout:
    """One output file's bytes: the header, then each tensor at its [start, end) in the data."""

    header: bytes
    spans: dict[str, tuple[int, int]]  # in file order

    @property
    def data_start(self) -> int:
        return len(self.header)


def plan_layout(tensors: list[tuple[str, torch.Tensor]], metadata: dict[str, str]) -> Layout:
    entries: dict[str, object] = {"__metadata__": metadata}
    spans: dict[str, tuple[int, int]] = {}
    offset = 0
    for name, tensor in tensors:
        size = tensor.numel() * tensor.element_size()
        spans[name] = (offset, offset + size)
        entries[name] = {
            "dtype": SAFETENSORS_DTYPES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    header = json.dumps(entries, separators=(",", ":"), ensure_ascii=True).encode()
    header += b" " * (-len(header) % 8)
    return Layout(struct.pack("<Q", len(header)) + header, spans)


def safetensors_bytes(tensors: Mapping[str, torch.Tensor], metadata: dict[str, str]) -> bytes:
    """A small safetensors file whole, in memory (an adapter): tensors in name order, the same
    header :func:`plan_layout` writes, so the same tensors always give the same bytes."""
    ordered = sorted(tensors.items())
    return plan_layout(ordered, metadata).header + b"".join(bytes(little_endian_bytes(t)) for _, t in ordered)


class OutputFile:
    """An output file written by offset.  Tests subclass it to fail or corrupt writes.

    Every :data:`WRITEBACK_EVERY` bytes written, a background thread asks the kernel to start
    writing them to disk, so the disk works from the start and :meth:`sync` waits for the last
    stretch only.  On a thread of its own because the call blocks while the disk queue is full:
    made by the copying thread, it slowed copy plus fsync of 3 GiB here (3.6 s, against 3.2-3.5 s
    with no hint and 2.7-2.8 s from a thread of its own).
    """

    def __init__(self, path: Path):
        self.path = path
        self.fd = os.open(path, os.O_RDWR)  # read too: see holds()
        self._kernel_copy = hasattr(os, "copy_file_range")
        self._written_back = 0
        self._writeback: queue.SimpleQueue[tuple[int, int] | None] = queue.SimpleQueue()
        self._flusher: threading.Thread | None = None

    def write_at(self, data: bytes | memoryview, offset: int) -> None:
        view = memoryview(data).cast("B")
        while view:
            n = os.pwrite(self.fd, view, offset)
            view, offset = view[n:], offset + n
        self._wrote_up_to(offset)

    def copy_from(self, source_fd: int, source_offset: int, length: int, offset: int) -> None:
        """Copy ``length`` bytes of ``source_fd`` at ``source_offset`` to ``offset`` here."""
        while length and self._kernel_copy:
            try:
                n = os.copy_file_range(source_fd, self.fd, length, source_offset, offset)
            except OSError as exc:
                if exc.errno not in _NO_KERNEL_COPY:
                    raise
                self._kernel_copy = False
                break
            if n == 0:  # the source ended early: the copy through memory reports it
                break
            source_offset, offset, length = source_offset + n, offset + n, length - n
        if length:
            self._copy_through_memory(source_fd, source_offset, length, offset)
        self._wrote_up_to(offset + length)

    def _copy_through_memory(self, source_fd: int, source_offset: int, length: int, offset: int) -> None:
        buffer = memoryview(bytearray(min(length, _FALLBACK_CHUNK)))
        while length:
            chunk = buffer[: min(length, len(buffer))]
            if os.preadv(source_fd, [chunk], source_offset) != len(chunk):
                raise OSError(errno.EIO, "the source file is shorter than its tensors")
            self.write_at(chunk, offset)
            source_offset, offset, length = source_offset + len(chunk), offset + len(chunk), length - len(chunk)

    def holds(self, at: int, expected: memoryview) -> bool:
        """Whether the file's bytes at ``at`` are ``expected``, as read back through a mapping."""
        try:
            with mapped(self.fd, at, len(expected)) as written:
                return same_bytes(written, expected)
        except EOFError:
            return False

    def sync(self) -> None:
        self._stop_writeback()
        os.fsync(self.fd)

    def close(self) -> None:
        self._stop_writeback()
        os.close(self.fd)

    def _wrote_up_to(self, end: int) -> None:
        if end - self._written_back < WRITEBACK_EVERY:
            return
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._write_back, name=f"writeback {self.path.name}", daemon=True)
            self._flusher.start()
        self._writeback.put((self._written_back, end - self._written_back))
        self._written_back = end

    def _write_back(self) -> None:
        while (stretch := self._writeback.get()) is not None:
            start_writeback(self.fd, *stretch)

    def _stop_writeback(self) -> None:
        if self._flusher is not None:
            self._writeback.put(None)
            self._flusher.join()
            self._flusher = None

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def copy_tensors(
    out: OutputFile,
    layout: Layout,
    source: SourceBytes,
    landed: Callable[[int, int], None],
    progress: Progress | None,
    stop: threading.Event,
) -> str | None:
    """Put every tensor's bytes at its place in ``out``, a :data:`PIECE` at a time, in file order,
    and compare each piece, read back from the file, with the source.

    ``landed(at, length)`` hears of each piece once it is in the file and checked.  Returns the
    first tensor that differs from the source (and stops there), else None; returns early when
    ``stop`` is set.
    """
    for name, (begin, end) in layout.spans.items():
        for offset in range(0, end - begin, PIECE):
            if stop.is_set():
                return None
            length = min(PIECE, end - begin - offset)
            at = layout.data_start + begin + offset
            source.copy_to(name, offset, length, out, at)
            with source.window(name, offset, length) as expected:
                if not out.holds(at, expected):
                    return f"tensor {name} differs from the source"
            landed(at, length)
            if progress:
                progress(length)
    return None
