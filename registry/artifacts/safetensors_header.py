"""The package's one reader of safetensors headers and of ``model.safetensors.index.json``.

A safetensors file is accepted only where the safetensors library's own loader accepts it: the
rules below are those of ``SafeTensors::read_metadata`` and ``Metadata::validate`` in
``safetensors/src/tensor.rs`` (huggingface/safetensors, the 0.8 line), checked on the header alone
(tensor data is never read).  Where the loader tolerates an ambiguous encoding the registry is
stricter, and says so below; it never accepts a file the loader refuses.

The loader's rules:

* the file starts with ``N_LEN`` = 8 bytes, the header length ``n`` as a little-endian u64
  (fewer than 8 bytes: ``HeaderTooSmall``);
* ``n <= MAX_HEADER_SIZE`` = 100_000_000 (``HeaderTooLarge``), checked before the file size; then
  ``8 + n`` must not pass the end of the file (``InvalidHeaderLength``);
* the ``n`` header bytes are UTF-8 (``InvalidHeader``) holding one JSON object (serde_json: leading
  and trailing JSON whitespace, i.e. the spaces writers pad with, is allowed; anything else after
  the object is not);
* ``__metadata__``, if present, is null or a map of strings to strings; every other key is a
  tensor with ``dtype`` (one of :data:`DTYPE_BITS`), ``shape`` (a list of u64) and
  ``data_offsets`` (exactly two u64);
* sorted by ``data_offsets``, the tensors are contiguous from offset 0: each begins where the
  previous one ended and ends at or after its begin (``InvalidOffset``): no gap, no overlap;
* each tensor's byte size, ``prod(shape) * bitsize / 8`` computed in checked u64 arithmetic
  (``ValidationOverflow``) and a whole number of bytes (``MisalignedSlice``), equals
  ``end - begin`` (``TensorInvalidInfo``);
* the last tensor's end (0 when there are none) is exactly the size of the data section, the
  file's bytes after the header (``MetadataIncompleteBuffer``): nothing missing, nothing trailing.
  A header with no tensors at all (``{}``) is a valid, empty file.

Stricter than the loader (it accepts these; each is an ambiguity no writer produces):

* a key listed twice in any JSON object is refused (the loader keeps the last tensor of a name,
  another reader may keep the first);
* a tensor entry must be an object with exactly ``dtype``, ``shape`` and ``data_offsets`` (the
  loader ignores extra fields and also takes serde's array form and ``{"F32": null}`` dtypes).

This module imports neither torch nor safetensors: light commands read headers with it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from ..core.errors import RegistryError

MAX_HEADER_SIZE = 100_000_000  # tensor.rs: const MAX_HEADER_SIZE: usize = 100_000_000
N_LEN = 8  # tensor.rs: const N_LEN: usize = size_of::<u64>()
USIZE_MAX = (1 << 64) - 1  # tensor.rs reads sizes and offsets as usize (u64 on 64-bit machines)
METADATA_KEY = "__metadata__"
ENTRY_FIELDS = ("dtype", "shape", "data_offsets")

# tensor.rs: enum Dtype and Dtype::bitsize — every dtype the loader knows, with its size in bits.
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}

_FIX = "download or convert the file again (write it with safetensors' save_file or `registry convert`)"
_INDEX_FIX = "regenerate model.safetensors.index.json from the shards (e.g. `registry convert --force`)"


@dataclass(frozen=True)
class HeaderTensor:
    """One tensor as the header describes it (``dtype`` is the safetensors name, ``BF16``)."""

    dtype: str
    shape: tuple[int, ...]
    begin: int  # data_offsets, relative to the start of the data section
    end: int


@dataclass(frozen=True)
class SafetensorsHeader:
    """A header the loader would accept, read without touching the tensor data."""

    path: Path
    header_size: int  # n: the JSON header's length in bytes, padding included
    data_size: int  # the bytes after the header (= the last tensor's end)
    tensors: dict[str, HeaderTensor]  # in the header's order
    metadata: dict[str, str] | None
    raw: dict[str, Any]  # the parsed JSON object

    @property
    def data_start(self) -> int:
        return N_LEN + self.header_size


class _Refused(Exception):
    """Raised inside the JSON hooks; turned into a RegistryError naming the file."""


def _show(name: str, limit: int = 80) -> str:
    text = repr(name)
    return text if len(text) <= limit else text[: limit - 4] + "…'"


def _no_surrogates(text: str) -> None:
    """serde_json refuses a lone UTF-16 surrogate escape (``"\\ud800"``); Python's json keeps it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise _Refused(
            f"string {_show(text)} holds a lone UTF-16 surrogate escape, which is not valid Unicode"
        ) from error


def _strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object hook: a key listed twice is refused, and so is a string that is not Unicode."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        _no_surrogates(key)
        if isinstance(value, str):
            _no_surrogates(value)
        if key in result:
            raise _Refused(f"lists the key {_show(key)} twice in one JSON object")
        result[key] = value
    return result


def _parse_int(text: str) -> int | float:
    # serde_json reads "-0" as a float; no negative number is valid anywhere in either file.
    return float(text) if text.startswith("-") else int(text)


def _no_constant(text: str) -> NoReturn:
    raise _Refused(f"{text} is not JSON")


def _strict_json(raw: bytes, fail: Callable[[str], RegistryError]) -> Any:
    """``raw`` as strict JSON: UTF-8, no NaN/Infinity, no duplicate keys, no lone surrogates."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise fail(f"is not valid UTF-8 (byte {raw[error.start]:#04x} at offset {error.start})") from error
    try:
        return json.loads(text, object_pairs_hook=_strict_object, parse_int=_parse_int, parse_constant=_no_constant)
    except _Refused as error:
        raise fail(str(error)) from error
    except RecursionError as error:
        raise fail("is not valid JSON (nested too deeply)") from error
    except ValueError as error:  # JSONDecodeError, and ints past Python's digit limit
        raise fail(f"is not valid JSON ({str(error).splitlines()[0]})") from error


def _is_u64(value: Any) -> bool:
    return type(value) is int and 0 <= value <= USIZE_MAX


# ----------------------------------------------------------------------------------------------
# safetensors headers


def read_safetensors_header(path: str | Path) -> SafetensorsHeader:
    """The header of ``path``, refused with ``weights.bad-safetensors`` wherever the loader would."""
    path = Path(path)

    def refuse(message: str) -> RegistryError:
        return RegistryError("weights.bad-safetensors", path, message, _FIX)

    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        prefix = handle.read(N_LEN)
        if len(prefix) < N_LEN:
            raise refuse(f"is {size} bytes, shorter than the {N_LEN}-byte header length")
        n = int.from_bytes(prefix, "little")
        if n > MAX_HEADER_SIZE:
            raise refuse(f"declares a {n}-byte header, over the safetensors limit of {MAX_HEADER_SIZE} bytes")
        if N_LEN + n > size:
            raise refuse(f"declares a {n}-byte header but the file is {size} bytes (truncated?)")
        raw = handle.read(n)
    if len(raw) != n:
        raise refuse(f"declares a {n}-byte header but only {len(raw)} bytes could be read (the file shrank?)")

    header = _strict_json(raw, lambda message: refuse(f"header {message}"))
    if not isinstance(header, dict):
        raise refuse(f"header is a JSON {_json_type(header)}, not an object")
    metadata = _metadata(header.get(METADATA_KEY), refuse)
    tensors = {name: _tensor(name, entry, refuse) for name, entry in header.items() if name != METADATA_KEY}
    data_size = size - N_LEN - n
    _check_layout(tensors, data_size, refuse)
    return SafetensorsHeader(path, n, data_size, tensors, metadata, header)


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _metadata(value: Any, refuse: Callable[[str], RegistryError]) -> dict[str, str] | None:
    if value is None:  # absent, or null: the loader reads both as no metadata
        return None
    if not isinstance(value, dict):
        raise refuse(f"{METADATA_KEY} is a JSON {_json_type(value)}; it must map strings to strings")
    for key, item in value.items():
        if not isinstance(item, str):
            raise refuse(f"{METADATA_KEY}[{_show(key)}] is a JSON {_json_type(item)}; it must map strings to strings")
    return value


def _tensor(name: str, entry: Any, refuse: Callable[[str], RegistryError]) -> HeaderTensor:
    where = f"tensor {_show(name)}"
    if not isinstance(entry, dict):
        raise refuse(f"{where} is a JSON {_json_type(entry)}, not an object with {', '.join(ENTRY_FIELDS)}")
    missing = [field for field in ENTRY_FIELDS if field not in entry]
    extra = [field for field in entry if field not in ENTRY_FIELDS]
    if missing or extra:
        what = f"lacks {', '.join(missing)}" if missing else f"has unknown field {_show(extra[0])}"
        raise refuse(f"{where} {what}; an entry holds exactly {', '.join(ENTRY_FIELDS)}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise refuse(f"{where} has unknown dtype {dtype!r:.40}")
    if not isinstance(shape, list) or not all(_is_u64(d) for d in shape):
        raise refuse(f"{where}: shape {json.dumps(shape)[:60]} is not a list of integers in 0..2^64-1")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_u64(o) for o in offsets):
        raise refuse(f"{where}: data_offsets {json.dumps(offsets)[:60]} is not [begin, end] with integers in 0..2^64-1")
    return HeaderTensor(dtype, tuple(shape), offsets[0], offsets[1])


def tensor_bytes(info: HeaderTensor) -> int | str:
    """``prod(shape) * bitsize / 8`` as Metadata::validate computes it (u64 checked_mul, one
    dimension at a time), or why it cannot be computed."""
    elements = 1
    for dim in info.shape:
        elements *= dim
        if elements > USIZE_MAX:
            return "has more elements than a 64-bit count holds"
    bits = elements * DTYPE_BITS[info.dtype]
    if bits > USIZE_MAX:
        return "has more bits than a 64-bit count holds"
    if bits % 8:
        return f"is {bits} bits, not a whole number of bytes"
    return bits // 8


def _shape(shape: tuple[int, ...]) -> str:
    return str(list(shape)) if len(shape) <= 8 else f"[{', '.join(map(str, shape[:8]))}, … ({len(shape)} dimensions)]"


def _check_layout(tensors: dict[str, HeaderTensor], data_size: int, refuse: Callable[[str], RegistryError]) -> None:
    """Metadata::validate, then read_metadata's last check: contiguous from 0, sizes exact, and
    the data section exactly as long as the tensors."""
    start = 0
    for name, info in sorted(tensors.items(), key=lambda item: (item[1].begin, item[1].end)):
        where = f"tensor {_show(name)}"
        if info.begin > start:
            raise refuse(
                f"{where} starts at data offset {info.begin}, leaving a gap of {info.begin - start} bytes "
                f"after offset {start}"
            )
        if info.begin < start:
            raise refuse(
                f"{where} starts at data offset {info.begin}, overlapping bytes up to offset {start} that "
                "another tensor holds"
            )
        if info.end < info.begin:
            raise refuse(f"{where} has data_offsets [{info.begin}, {info.end}]: it ends before it begins")
        start = info.end
        nbytes = tensor_bytes(info)
        if isinstance(nbytes, str):
            raise refuse(f"{where}: {info.dtype} {_shape(info.shape)} {nbytes}")
        if info.end - info.begin != nbytes:
            raise refuse(
                f"{where}: {info.dtype} {_shape(info.shape)} needs {nbytes} bytes but data_offsets "
                f"[{info.begin}, {info.end}] hold {info.end - info.begin}"
            )
    if start < data_size:
        raise refuse(f"the tensors end at data offset {start} but {data_size - start} more bytes follow them")
    if start > data_size:
        raise refuse(
            f"the tensors need {start} bytes of data but the file holds {data_size} after its header (truncated?)"
        )


# ----------------------------------------------------------------------------------------------
# model.safetensors.index.json


@dataclass(frozen=True)
class ShardIndex:
    """A sharded checkpoint's index (Hugging Face's layout): ``weight_map`` tensor → shard file
    name; ``metadata`` is free-form except ``total_size``."""

    path: Path
    weight_map: dict[str, str]
    metadata: dict[str, Any]

    @property
    def total_size(self) -> int | None:
        return self.metadata.get("total_size")

    @property
    def shard_names(self) -> list[str]:
        return sorted(set(self.weight_map.values()))

    def shard_path(self, name: str) -> Path:
        return self.path.parent / name


def read_shard_index(path: str | Path) -> ShardIndex:
    """``model.safetensors.index.json``, refused with ``weights.bad-shard-index`` unless it is
    strict UTF-8 JSON (no duplicate keys) with a non-empty ``weight_map`` of strings to plain
    file names (the shards sit beside the index) and, if present, an object ``metadata`` whose
    ``total_size`` is a non-negative integer."""
    path = Path(path)

    def refuse(message: str) -> RegistryError:
        return RegistryError("weights.bad-shard-index", path, message, _INDEX_FIX)

    index = _strict_json(path.read_bytes(), lambda message: refuse(f"not a shard index: {message}"))
    if not isinstance(index, dict):
        raise refuse(f"not a shard index: a JSON {_json_type(index)}, not an object")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise refuse("not a shard index: weight_map must be a non-empty object of tensor name → shard file")
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str):
            raise refuse(f"weight_map[{_show(tensor)}] is a JSON {_json_type(shard)}, not a shard file name")
        if not shard or "/" in shard or "\\" in shard or shard.startswith("."):
            raise refuse(f"weight_map names shard {_show(shard)}, which is not a file name beside the index")
    metadata = index.get("metadata", {})
    if not isinstance(metadata, dict):
        raise refuse(f"metadata is a JSON {_json_type(metadata)}, not an object")
    if "total_size" in metadata and not _is_u64(metadata["total_size"]):
        raise refuse(f"metadata.total_size is {json.dumps(metadata['total_size'])[:40]}, not a non-negative integer")
    return ShardIndex(path, weight_map, metadata)
