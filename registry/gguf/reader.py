"""A strict reader of a GGUF file's header, in plain Python (no torch, no numpy, no ``gguf``
package): what the light install's ``validate`` checks a GGUF file with.

The format (ggml's ``docs/gguf.md``, versions 2 and 3, little-endian): the magic ``GGUF``, a
``u32`` version, ``u64`` tensor and metadata counts; each metadata pair a string key, a ``u32``
value type and the value (integers, floats, a bool, a string, or an array of one type); each
tensor a string name, a ``u32`` dimension count (at most four), its ``u64`` dimensions (ggml's
order: the row length first), a ``u32`` ggml type and a ``u64`` offset into the data section,
which starts at the next multiple of ``general.alignment`` (32 by default) after the header.

Strict: a string must be UTF-8, a bool 0 or 1, no key or tensor name twice, every count and
length within the bytes the file has, every offset aligned, every tensor's rows whole blocks of
its type, and the tensors' data inside the file without overlapping.  Only what the header says
is read; the tensor data never is.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ARRAY_DEPTH = 2  # an array of arrays is legal; deeper nesting is no file the registry reads

# Metadata value types: id -> struct format (8 string, 9 array are read apart).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9

# ggml tensor types a GGUF the registry writes can hold (export-gguf's direct types and what
# llama.cpp's quantizer makes for its k-quants, fallbacks included): id -> (name, values per
# block, bytes per block), as ggml.c's type traits give them.
GGML_TYPES = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    20: ("IQ4_NL", 32, 18),
    30: ("BF16", 1, 2),
}


class GgufFormatError(ValueError):
    """The file is not a well-formed GGUF file; the message says where and why."""


@dataclass(frozen=True)
class Tensor:
    name: str
    dims: tuple[int, ...]  # ggml's order: the row length first (reversed, numpy's shape)
    type_name: str
    offset: int  # from the start of the file
    n_bytes: int

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape in numpy's (row-major) order."""
        return tuple(reversed(self.dims))


@dataclass(frozen=True)
class Header:
    version: int
    fields: dict[str, Any]  # scalars as int/float/bool/str, arrays as lists
    tensors: list[Tensor]
    alignment: int
    data_offset: int
    size: int  # the file's size in bytes

    @property
    def data_end(self) -> int:
        """Where the last tensor's data ends (the data section's start when there are none)."""
        return max((t.offset + t.n_bytes for t in self.tensors), default=self.data_offset)


class _Cursor:
    def __init__(self, data: mmap.mmap | bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise GgufFormatError(
                f"is truncated: {what} at byte {self.at} needs {n} bytes, and the file "
                f"has {len(self.data) - self.at} left"
            )
        chunk = self.data[self.at : self.at + n]
        self.at += n
        return bytes(chunk)

    def unpack(self, fmt: str, what: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def u32(self, what: str) -> int:
        return int(self.unpack("<I", what))

    def u64(self, what: str) -> int:
        return int(self.unpack("<Q", what))

    def string(self, what: str) -> str:
        raw = self.take(self.u64(f"the length of {what}"), what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GgufFormatError(f"{what} at byte {self.at - len(raw)} is not UTF-8") from exc

    def left(self) -> int:
        return len(self.data) - self.at


def _value(cur: _Cursor, kind: int, what: str, depth: int = 0) -> Any:
    if kind in _SCALARS:
        if kind == 7:
            byte = cur.take(1, what)[0]
            if byte > 1:
                raise GgufFormatError(f"{what} is a bool holding {byte}, not 0 or 1")
            return bool(byte)
        return cur.unpack(_SCALARS[kind], what)
    if kind == STRING:
        return cur.string(what)
    if kind == ARRAY and depth < MAX_ARRAY_DEPTH:
        item = cur.u32(f"the element type of {what}")
        count = cur.u64(f"the length of {what}")
        smallest = struct.calcsize(_SCALARS[item]) if item in _SCALARS else 8 if item in (STRING, ARRAY) else 1
        if count * smallest > cur.left():
            raise GgufFormatError(
                f"is truncated: {what} claims {count} elements, more than the {cur.left()} bytes left hold"
            )
        if item in _SCALARS and item != 7:
            fmt = "<" + _SCALARS[item][1] * count
            return list(struct.unpack(fmt, cur.take(struct.calcsize(fmt), what)))
        return [_value(cur, item, what, depth + 1) for _ in range(count)]
    raise GgufFormatError(f"{what} has value type {kind}, which GGUF does not define")


def _tensor(cur: _Cursor, number: int) -> tuple[str, tuple[int, ...], int, int]:
    name = cur.string(f"tensor {number}'s name")
    n_dims = cur.u32(f"tensor {name!r}'s dimension count")
    if not 1 <= n_dims <= MAX_DIMS:
        raise GgufFormatError(f"tensor {name!r} has {n_dims} dimensions (ggml takes 1 to {MAX_DIMS})")
    dims = tuple(cur.u64(f"tensor {name!r}'s dimensions") for _ in range(n_dims))
    kind = cur.u32(f"tensor {name!r}'s type")
    offset = cur.u64(f"tensor {name!r}'s offset")
    return name, dims, kind, offset


def _sized(name: str, dims: tuple[int, ...], kind: int, offset: int, data_offset: int, alignment: int) -> Tensor:
    if kind not in GGML_TYPES:
        raise GgufFormatError(f"tensor {name!r} has ggml type {kind}, which no GGUF the registry writes holds")
    type_name, block, block_bytes = GGML_TYPES[kind]
    if 0 in dims:
        raise GgufFormatError(f"tensor {name!r} has a dimension of 0 ({list(dims)})")
    if dims[0] % block:
        raise GgufFormatError(
            f"tensor {name!r} has dimensions {list(dims)}, not whole {type_name} rows (blocks of {block})"
        )
    if offset % alignment:
        raise GgufFormatError(f"tensor {name!r}'s offset {offset} is not a multiple of the alignment {alignment}")
    values = 1
    for d in dims:
        values *= d
    return Tensor(name, dims, type_name, data_offset + offset, values // block * block_bytes)


def read_header(path: Path) -> Header:
    """The header of the GGUF file at ``path``; :class:`GgufFormatError` when it is not a well-formed one."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size < 24:
            raise GgufFormatError(f"is {size} bytes, shorter than a GGUF header")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _parse(_Cursor(data), size)


def _parse(cur: _Cursor, size: int) -> Header:
    if cur.take(4, "the magic") != MAGIC:
        raise GgufFormatError("is not a GGUF file (no GGUF magic)")
    version = cur.u32("the version")
    if version not in VERSIONS:
        raise GgufFormatError(f"is GGUF version {version}; the versions in use are {' and '.join(map(str, VERSIONS))}")
    n_tensors, n_kv = cur.u64("the tensor count"), cur.u64("the metadata count")
    if n_tensors * 24 > cur.left() or n_kv * 13 > cur.left():  # the smallest tensor entry and key/value pair
        raise GgufFormatError(
            f"is truncated: its header claims {n_tensors} tensors and {n_kv} metadata keys, more than "
            f"its {size} bytes hold"
        )
    fields: dict[str, Any] = {}
    for number in range(n_kv):
        key = cur.string(f"metadata key {number}")
        if key in fields:
            raise GgufFormatError(f"names metadata key {key!r} twice")
        fields[key] = _value(cur, cur.u32(f"{key}'s value type"), key)
    alignment = fields.get("general.alignment", DEFAULT_ALIGNMENT)
    if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1) or alignment % 8:
        raise GgufFormatError(f"says general.alignment {alignment!r}, not a power of two that is a multiple of 8")
    raw = [_tensor(cur, number) for number in range(n_tensors)]
    data_offset = -(-cur.at // alignment) * alignment
    tensors: list[Tensor] = []
    seen: set[str] = set()
    for name, dims, kind, offset in raw:
        if name in seen:
            raise GgufFormatError(f"names tensor {name!r} twice")
        seen.add(name)
        tensors.append(_sized(name, dims, kind, offset, data_offset, alignment))
    spans = sorted((t.offset, t.offset + t.n_bytes, t.name) for t in tensors)
    for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
        if start < end:
            raise GgufFormatError(f"tensors {first!r} and {second!r} overlap in the data section")
    header = Header(version, fields, tensors, alignment, data_offset, size)
    if header.data_end > size:
        raise GgufFormatError(f"is truncated: its tensors end at byte {header.data_end} but the file has {size}")
    return header
