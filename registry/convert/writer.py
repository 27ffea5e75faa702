"""A streaming safetensors writer: header first, then each tensor's own bytes, hashed as written.

safetensors' ``save_file`` needs every tensor in memory at once; this writer needs one tensor at
a time.  The format: an 8-byte little-endian header length, a JSON header (padded with spaces to
a multiple of 8) mapping names to dtype, shape and [start, end) offsets, then the raw data.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import BinaryIO

import torch

from ..errors import RegistryError
from ..hashing.engine import HashingWriter
from .source import SourceBytes

WRITE_CHUNK = 64 << 20  # bytes read, hashed and written at a time

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


def write_safetensors(
    sink: BinaryIO,
    names: list[str],
    source: SourceBytes,
    metadata: dict[str, str],
    progress: Callable[[int], None] | None = None,
) -> tuple[str, int]:
    """Write one safetensors file holding ``names`` to ``sink``; return (sha256, size) written."""
    out = HashingWriter(sink)
    try:
        out.write(build_header([(n, source.tensors[n]) for n in names], metadata))
        _copy_tensors(out, names, source, progress)
    finally:
        out.close()
    return out.digest.hexdigest(), out.size


def _copy_tensors(out: HashingWriter, names: list[str], source: SourceBytes, progress) -> None:
    """Each tensor's bytes in chunks through two alternating buffers: one is being hashed and
    written while the next chunk is read into the other."""
    buffers = [memoryview(bytearray(WRITE_CHUNK)) for _ in range(2)]
    turn = 0
    for name in names:
        size = source.nbytes(name)
        for offset in range(0, size, WRITE_CHUNK):
            length = min(WRITE_CHUNK, size - offset)
            out.write(source.read_into(name, offset, buffers[turn][:length]))
            turn ^= 1
            if progress:
                progress(length)
