"""A streaming safetensors writer: header first, then each tensor's own bytes, hashed as written.

safetensors' ``save_file`` needs every tensor in memory at once; this writer needs one tensor at
a time.  The format: an 8-byte little-endian header length, a JSON header (padded with spaces to
a multiple of 8) mapping names to dtype, shape and [start, end) offsets, then the raw data.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

import torch

from ..errors import RegistryError
from .residency import populate_pages, release_pages

WRITE_CHUNK = 64 << 20  # bytes written (and then released from the source mapping) at a time

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


def check_dtypes(tensors: dict[str, torch.Tensor], source: str) -> None:
    for name, tensor in tensors.items():
        if tensor.dtype not in SAFETENSORS_DTYPES:
            raise RegistryError(
                "convert.unsupported-dtype",
                source,
                f"tensor {name} has dtype {tensor.dtype}, which safetensors cannot store",
                "cast it to bf16/fp16/fp32 before converting",
            )


def raw_bytes(tensor: torch.Tensor) -> memoryview:
    """The tensor's own bytes (not its whole shared storage), without a copy when contiguous."""
    flat = tensor.contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else memoryview(b"")


def build_header(tensors: list[tuple[str, torch.Tensor]], metadata: dict[str, str]) -> bytes:
    entries: dict[str, object] = {"__metadata__": metadata}
    offset = 0
    for name, tensor in tensors:
        size = tensor.numel() * tensor.element_size()
        entries[name] = {"dtype": SAFETENSORS_DTYPES[tensor.dtype], "shape": list(tensor.shape), "data_offsets": [offset, offset + size]}
        offset += size
    header = json.dumps(entries, separators=(",", ":"), ensure_ascii=True).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header


def read_offsets(path) -> tuple[int, dict[str, tuple[int, int]]]:
    """Where the data section starts and each tensor's [start, end) within it."""
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    header.pop("__metadata__", None)
    return 8 + length, {name: tuple(entry["data_offsets"]) for name, entry in header.items()}


class HashingWriter:
    """Pass-through writer that hashes and counts every byte on its way to disk.

    Hashing runs on a second thread while the same bytes are written (both release the GIL), so
    the sha256 costs no extra pass and little extra time.
    """

    def __init__(self, sink: BinaryIO):
        self.sink = sink
        self.digest = hashlib.sha256()
        self.size = 0
        self._hasher = ThreadPoolExecutor(max_workers=1)

    def write(self, data) -> None:
        hashed = self._hasher.submit(self.digest.update, data)
        try:
            self.sink.write(data)
        finally:
            hashed.result()  # the caller may release ``data`` after we return
        self.size += len(data)

    def close(self) -> None:
        self._hasher.shutdown()


def write_safetensors(
    sink: BinaryIO,
    tensors: list[tuple[str, torch.Tensor]],
    metadata: dict[str, str],
    progress: Callable[[int], None] | None = None,
) -> tuple[str, int]:
    """Write one safetensors file to ``sink``; return (sha256, size) of what was written."""
    out = HashingWriter(sink)
    try:
        _write_all(out, tensors, metadata, progress)
    finally:
        out.close()
    return out.digest.hexdigest(), out.size


def _write_all(out: HashingWriter, tensors: list[tuple[str, torch.Tensor]], metadata: dict[str, str], progress) -> None:
    out.write(build_header(tensors, metadata))
    for _, tensor in tensors:
        data = raw_bytes(tensor)
        for offset in range(0, len(data), WRITE_CHUNK):
            if tensor.is_contiguous():
                populate_pages(tensor, offset, WRITE_CHUNK)
            out.write(data[offset : offset + WRITE_CHUNK])
            if tensor.is_contiguous():  # else ``data`` is a private copy, freed below
                release_pages(tensor, offset, WRITE_CHUNK)
            if progress:
                progress(min(WRITE_CHUNK, len(data) - offset))
        del data
