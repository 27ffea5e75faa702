"""The strict plain-Python GGUF header reader (registry/gguf/reader.py) on hand-built headers: each
way a header can be malformed is refused with what is wrong.  tests/test_gguf.py holds it to the
``gguf`` package's reader on real exports; tests/test_wheel.py runs it in the light install."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from registry.gguf.reader import GgufFormatError, read_header


def _string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def _kv(key: str, kind: int, payload: bytes) -> bytes:
    return _string(key) + struct.pack("<I", kind) + payload


def _tensor(name: str, dims: tuple[int, ...], kind: int, offset: int) -> bytes:
    return (
        _string(name)
        + struct.pack("<I", len(dims))
        + b"".join(struct.pack("<Q", d) for d in dims)
        + struct.pack("<I", kind)
        + struct.pack("<Q", offset)
    )


def build(
    kvs: list[bytes] | None = None,
    tensors: list[bytes] | None = None,
    data: int = 64,
    magic: bytes = b"GGUF",
    version: int = 3,
    counts: tuple[int, int] | None = None,
) -> bytes:
    """A GGUF file: the header, padding to 32, ``data`` bytes of tensor data."""
    kvs = [_kv("general.architecture", 8, _string("rwkv7"))] if kvs is None else kvs
    tensors = [_tensor("a.weight", (8, 2), 0, 0)] if tensors is None else tensors
    n_tensors, n_kv = counts or (len(tensors), len(kvs))
    head = magic + struct.pack("<IQQ", version, n_tensors, n_kv) + b"".join(kvs) + b"".join(tensors)
    return head + b"\0" * (-len(head) % 32) + b"\1" * data


def read(tmp_path: Path, data: bytes):
    path = tmp_path / "x.gguf"
    path.write_bytes(data)
    return read_header(path)


def test_a_well_formed_header_is_read_whole(tmp_path):
    kvs = [
        _kv("general.architecture", 8, _string("rwkv7")),
        _kv("rwkv7.block_count", 4, struct.pack("<I", 2)),
        _kv("rwkv7.attention.layer_norm_epsilon", 6, struct.pack("<f", 1e-5)),
        _kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + _string("a") + _string("\n\n") + _string("中")),
        _kv("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, 3) + struct.pack("<3i", 1, 1, 6)),
        _kv("tokenizer.ggml.add_bos_token", 7, b"\0"),
    ]
    tensors = [_tensor("a.weight", (8, 2), 0, 0), _tensor("b.weight", (32, 1), 8, 64)]
    header = read(tmp_path, build(kvs, tensors, data=64 + 34))
    assert header.fields["general.architecture"] == "rwkv7" and header.fields["rwkv7.block_count"] == 2
    assert header.fields["tokenizer.ggml.tokens"] == ["a", "\n\n", "中"] and header.fields[
        "tokenizer.ggml.token_type"
    ] == [1, 1, 6]
    assert header.fields["tokenizer.ggml.add_bos_token"] is False
    assert abs(header.fields["rwkv7.attention.layer_norm_epsilon"] - 1e-5) < 1e-12
    a, b = header.tensors
    assert (a.name, a.shape, a.type_name, a.n_bytes) == ("a.weight", (2, 8), "F32", 64)
    assert (b.shape, b.type_name, b.n_bytes, b.offset - header.data_offset) == ((1, 32), "Q8_0", 34, 64)
    assert header.data_offset % 32 == 0 and header.data_end == header.size


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"GGU", "shorter than a GGUF header"),
        (build(magic=b"GGML"), "no GGUF magic"),
        (build(version=4), "GGUF version 4"),
        (build(counts=(1, 1 << 40)), "claims 1 tensors and 1099511627776 metadata keys"),
        (build(data=63), "is truncated: its tensors end at byte"),
        (build([_kv("k", 8, _string("x")), _kv("k", 8, _string("y"))]), "names metadata key 'k' twice"),
        (build([_kv("k", 8, _string(b"\xff\xfe"))]), "is not UTF-8"),
        (build([_kv("k", 7, b"\2")]), "a bool holding 2"),
        (build([_kv("k", 13, b"\0")]), "value type 13"),
        (build([_kv("k", 8, struct.pack("<Q", 1 << 50))]), "is truncated"),
        (build([_kv("k", 9, struct.pack("<IQ", 4, 1 << 40))]), "claims 1099511627776 elements"),
        (build([_kv("general.alignment", 4, struct.pack("<I", 24))]), "general.alignment 24"),
        (build(tensors=[_tensor("a", (8, 2, 1, 1, 1), 0, 0)]), "5 dimensions"),
        (build(tensors=[_tensor("a", (8, 2), 99, 0)]), "ggml type 99"),
        (build(tensors=[_tensor("a", (31, 2), 8, 0)]), "not whole Q8_0 rows"),
        (build(tensors=[_tensor("a", (8, 0), 0, 0)]), "a dimension of 0"),
        (build(tensors=[_tensor("a", (2,), 0, 4)]), "offset 4 is not a multiple of the alignment 32"),
        (build(tensors=[_tensor("a", (8, 2), 0, 0), _tensor("a", (8,), 0, 64)], data=128), "names tensor 'a' twice"),
        (
            build(tensors=[_tensor("a", (16, 2), 0, 0), _tensor("b", (8,), 0, 64)], data=128),
            "tensors 'a' and 'b' overlap",
        ),
    ],
    ids=[
        "short",
        "magic",
        "version",
        "counts",
        "truncated-data",
        "key-twice",
        "not-utf8",
        "bool",
        "value-type",
        "string-past-end",
        "array-past-end",
        "alignment",
        "dims",
        "ggml-type",
        "partial-block",
        "zero-dim",
        "misaligned",
        "tensor-twice",
        "overlap",
    ],
)
def test_a_malformed_header_is_refused_with_what_is_wrong(tmp_path, data, said):
    with pytest.raises(GgufFormatError) as refused:
        read(tmp_path, data)
    assert said in str(refused.value)
