"""safetensors files are accepted exactly where the safetensors loader accepts them.

Every bad file here is built by hand (8-byte little-endian length, JSON header, data) and must be
refused twice: by the real loader (``safetensors.safe_open``) and by our header-only inspection,
with one line naming what is wrong.  Valid files must pass both.  The rules are those of
``SafeTensors::read_metadata`` and ``Metadata::validate`` in huggingface/safetensors
``safetensors/src/tensor.rs``; see registry/artifacts/safetensors_header.py.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from registry.artifacts.inspect import inspect_weights
from registry.artifacts.safetensors_header import DTYPE_BITS, MAX_HEADER_SIZE, read_safetensors_header
from registry.artifacts.synthetic import make_base_state_dict, make_state_file, make_state_tensors, save_checkpoint
from registry.cli import main
from registry.core.errors import RegistryError
from registry.core.models import Index
from registry.core.names import INDEX_NAME
from registry.core.repo import render_index
from registry.gate.runtime import load_tensors
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.card import write_card
from registry.ops.convert import convert_entry
from registry.ops.smoke import smoke
from registry.ops.sums import write_sums
from registry.ops.validate import validate

from .conftest import SMALL, sha256_of, snapshot
from .test_ops_artifacts import train_json

F32 = 4


def write(path: Path, header: Any, data: bytes = b"", *, length: int | None = None) -> Path:
    """8-byte little-endian header length, the header (bytes as given, else JSON), the data."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) if length is None else length) + raw + data)
    return path


def entry(begin: int, end: int, shape: list[int] | None = None, dtype: str = "F32") -> dict:
    return {"dtype": dtype, "shape": [(end - begin) // F32] if shape is None else shape, "data_offsets": [begin, end]}


def loader_refuses(path: Path) -> str:
    with pytest.raises(SafetensorError) as caught, safe_open(str(path), "pt"):
        pass
    return str(caught.value)


def loader_accepts(path: Path) -> list[str]:
    with safe_open(str(path), "pt") as handle:
        return list(handle.keys())


def we_refuse(path: Path, code: str = "weights.bad-safetensors") -> RegistryError:
    with pytest.raises(RegistryError) as caught:
        inspect_weights(path)
    error = caught.value
    assert error.code == code, error.one_line()
    assert error.file == str(path) and "\n" not in error.one_line() and error.fix
    return error


def sparse_header(path: Path, length: int) -> Path:
    """A file that declares a ``length``-byte header and is long enough to hold it, written
    sparse (``{}`` then zero bytes) so no 100 MB are written."""
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", length) + b"{}")
        handle.truncate(8 + length + 16)
    return path


TWO = b"\0" * 8  # data for two F32 scalars-of-one

# (id, builder, what our message must say)
BAD: list[tuple[str, Callable[[Path], Path], str]] = [
    ("gap", lambda p: write(p, {"a": entry(0, 4), "b": entry(8, 12)}, b"\0" * 12), "gap of 4 bytes"),
    ("overlap", lambda p: write(p, {"a": entry(0, 8), "b": entry(4, 8)}, TWO), "overlapping"),
    ("offsets-past-the-end", lambda p: write(p, {"a": entry(0, 4), "b": entry(4, 8)}, b"\0" * 6), "truncated"),
    ("trailing-bytes", lambda p: write(p, {"a": entry(0, 4)}, TWO), "4 more bytes follow"),
    ("not-from-offset-0", lambda p: write(p, {"a": entry(4, 8)}, TWO), "gap of 4 bytes after offset 0"),
    (
        "ends-before-it-begins",
        lambda p: write(p, {"a": entry(0, 4), "b": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}}, b"\0" * 4),
        "ends before it begins",
    ),
    (
        "duplicate-tensor-key",
        lambda p: write(
            p, b'{"a":' + json.dumps(entry(0, 4)).encode() + b',"a":' + json.dumps(entry(4, 8)).encode() + b"}", TWO
        ),
        "'a' twice",
    ),
    (
        "duplicate-metadata",
        lambda p: write(
            p,
            b'{"__metadata__":{"x":"1"},"__metadata__":{"x":"2"},"a":' + json.dumps(entry(0, 4)).encode() + b"}",
            b"\0" * 4,
        ),
        "'__metadata__' twice",
    ),
    (
        "duplicate-entry-field",
        lambda p: write(p, b'{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4),
        "'dtype' twice",
    ),
    (
        "header-over-100000000",
        lambda p: sparse_header(p, MAX_HEADER_SIZE + 1),
        "over the safetensors limit of 100000000",
    ),
    ("header-length-past-eof", lambda p: write(p, b"{}", length=64), "truncated"),
    ("shorter-than-8-bytes", lambda p: (p.write_bytes(b"\x02\0\0\0\0"), p)[1], "shorter than the 8-byte header length"),
    ("empty-header", lambda p: write(p, b""), "not valid JSON"),
    (
        "non-utf8-header",
        lambda p: write(p, b'{"a\xff":' + json.dumps(entry(0, 4)).encode() + b"}", b"\0" * 4),
        "not valid UTF-8",
    ),
    ("utf8-bom", lambda p: write(p, b"\xef\xbb\xbf{}"), "not valid JSON"),
    ("non-object-header", lambda p: write(p, [entry(0, 4)], b"\0" * 4), "JSON array, not an object"),
    ("null-header", lambda p: write(p, b"null"), "JSON null, not an object"),
    ("nul-padding", lambda p: write(p, b"{}\0\0\0\0\0\0"), "not valid JSON"),
    ("text-after-the-object", lambda p: write(p, b"{} {}"), "not valid JSON"),
    (
        "lone-surrogate-name",
        lambda p: write(p, b'{"\\ud800":' + json.dumps(entry(0, 4)).encode() + b"}", b"\0" * 4),
        "surrogate",
    ),
    ("unknown-dtype", lambda p: write(p, {"a": entry(0, 4, [1], "F99")}, b"\0" * 4), "unknown dtype 'F99'"),
    ("lowercase-dtype", lambda p: write(p, {"a": entry(0, 4, [1], "f32")}, b"\0" * 4), "unknown dtype 'f32'"),
    ("shape-bytes-mismatch", lambda p: write(p, {"a": entry(0, 8, [1])}, TWO), "needs 4 bytes"),
    (
        "sub-byte-dtype-not-whole-bytes",
        lambda p: write(p, {"a": entry(0, 2, [3], "F4")}, b"\0" * 2),
        "not a whole number of bytes",
    ),
    ("shape-overflows-u64", lambda p: write(p, {"a": entry(0, 0, [1 << 40, 1 << 40, 0])}), "64-bit"),
    ("bits-overflow-u64", lambda p: write(p, {"a": entry(0, 0, [1 << 62])}), "64-bit"),
    ("shape-past-u64", lambda p: write(p, {"a": entry(0, 0, [1 << 64, 0])}), "not a list of integers"),
    (
        "float-shape",
        lambda p: write(p, b'{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', b"\0" * 4),
        "not a list of integers",
    ),
    (
        "negative-zero-shape",
        lambda p: write(p, b'{"a":{"dtype":"F32","shape":[-0],"data_offsets":[0,0]}}'),
        "not a list of integers",
    ),
    (
        "string-shape",
        lambda p: write(p, {"a": {"dtype": "F32", "shape": ["1"], "data_offsets": [0, 4]}}, b"\0" * 4),
        "not a list of integers",
    ),
    (
        "three-offsets",
        lambda p: write(p, {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 4]}}, b"\0" * 4),
        "not [begin, end]",
    ),
    ("missing-field", lambda p: write(p, {"a": {"dtype": "F32", "data_offsets": [0, 4]}}, b"\0" * 4), "lacks shape"),
    (
        "metadata-non-string-value",
        lambda p: write(p, {"__metadata__": {"epoch": 3}, "a": entry(0, 4)}, b"\0" * 4),
        "must map strings to strings",
    ),
    (
        "metadata-null-value",
        lambda p: write(p, {"__metadata__": {"note": None}, "a": entry(0, 4)}, b"\0" * 4),
        "must map strings to strings",
    ),
    (
        "metadata-array",
        lambda p: write(p, {"__metadata__": [], "a": entry(0, 4)}, b"\0" * 4),
        "must map strings to strings",
    ),
    ("tensor-entry-null", lambda p: write(p, {"a": None}), "JSON null"),
]


@pytest.mark.parametrize(("builder", "says"), [(b, s) for _, b, s in BAD], ids=[i for i, _, _ in BAD])
def test_the_loader_and_we_both_refuse(tmp_path, builder, says):
    path = builder(tmp_path / "bad.safetensors")
    loader_refuses(path)
    error = we_refuse(path)
    assert says in error.message, error.one_line()


def test_the_header_limit_is_the_loaders_exactly(tmp_path):
    """A declared length of exactly 100_000_000 passes the limit (and fails on its content, for
    both); one byte more is refused for its size, before anything is read."""
    at_limit = sparse_header(tmp_path / "at.safetensors", MAX_HEADER_SIZE)
    assert "header too large" not in loader_refuses(at_limit)
    assert "not valid JSON" in we_refuse(at_limit).message
    over = sparse_header(tmp_path / "over.safetensors", MAX_HEADER_SIZE + 1)
    assert "header too large" in loader_refuses(over)
    # 100 MiB, the old limit, is well over the loader's
    assert (
        "over the safetensors limit"
        in we_refuse(sparse_header(tmp_path / "mib.safetensors", 100 * 1024 * 1024)).message
    )


# ----------------------------------------------------------------------------------------------
# Valid files: both accept


def test_files_written_by_save_file_are_accepted(tmp_path):
    state = tmp_path / "state.safetensors"
    save_file(make_state_tensors(SMALL), str(state))
    assert sorted(loader_accepts(state)) == ["blocks.0.att.time_state", "blocks.1.att.time_state"]
    assert inspect_weights(state).kind == "state"

    with_metadata = tmp_path / "meta.safetensors"
    save_file(make_state_tensors(SMALL), str(with_metadata), metadata={"format": "pt", "source_sha256": "ab" * 32})
    loader_accepts(with_metadata)
    assert read_safetensors_header(with_metadata).metadata == {"format": "pt", "source_sha256": "ab" * 32}
    assert inspect_weights(with_metadata).kind == "state"

    zero_size = tmp_path / "model.safetensors"
    tensors = {**make_base_state_dict(SMALL), "extra.empty": torch.zeros(0, 4), "extra.scalar": torch.tensor(1.0)}
    save_file(tensors, str(zero_size))
    assert set(loader_accepts(zero_size)) == set(tensors)
    header = read_safetensors_header(zero_size)
    assert header.tensors["extra.empty"].begin == header.tensors["extra.empty"].end
    inspection = inspect_weights(zero_size)
    assert (
        inspection.kind == "checkpoint"
        and inspection.tensors["extra.empty"].shape == (0, 4)
        and inspection.tensors["extra.scalar"].shape == ()
    )


@pytest.mark.parametrize(
    ("header", "data"),
    [
        (b'  {"a":' + json.dumps(entry(0, 4)).encode() + b"}" + b" " * 11, b"\0" * 4),  # whitespace around the object
        (b'{"a":' + json.dumps(entry(0, 4)).encode() + b"}\t\r\n", b"\0" * 4),
        (b'{"__metadata__":null,"a":' + json.dumps(entry(0, 4)).encode() + b"}", b"\0" * 4),  # null metadata: none
        (
            json.dumps({"b": entry(4, 8), "z": entry(4, 4, [0, 7]), "a": entry(0, 4)}).encode(),
            TWO,
        ),  # any order; zero-size between
        (json.dumps({"z1": entry(0, 0, [0]), "z2": entry(0, 0, [0])}).encode(), b""),  # only zero-size tensors
        (json.dumps({"a": entry(0, 0, [0, 1 << 40, 1 << 40])}).encode(), b""),  # a leading 0 keeps the product in range
        (
            json.dumps({"a": entry(0, 1, [2], "F4"), "b": entry(1, 9, [1], "C64")}).encode(),
            b"\0" * 9,
        ),  # dtypes the loader knows
        (
            b'{"\\u00e9\\ud83d\\ude00":' + json.dumps(entry(0, 4)).encode() + b"}",
            b"\0" * 4,
        ),  # escapes, a surrogate pair
    ],
    ids=[
        "padded-both-sides",
        "padded-tab-cr-lf",
        "null-metadata",
        "any-order-zero-size",
        "only-zero-size",
        "zero-first-dimension",
        "sub-byte-and-complex",
        "escaped-name",
    ],
)
def test_hand_written_valid_headers_are_accepted(tmp_path, header, data):
    path = write(tmp_path / "ok.safetensors", header, data)
    names = loader_accepts(path)
    assert sorted(read_safetensors_header(path).tensors) == sorted(names)


def test_a_valid_file_without_tensors_is_refused_only_as_weights(tmp_path):
    """``{}`` is a valid safetensors file (the loader opens it); it is not a weight file."""
    for header in (b"{}", b'{"__metadata__":{"a":"b"}}   '):
        path = write(tmp_path / "empty.safetensors", header)
        assert loader_accepts(path) == []
        assert read_safetensors_header(path).tensors == {}
        assert "no tensors" in we_refuse(path, "weights.not-tensor-map").message


def test_a_loader_dtype_the_registry_does_not_handle_is_refused_as_such(tmp_path):
    path = write(tmp_path / "c64.safetensors", {"a": entry(0, 8, [1], "C64")}, b"\0" * 8)
    loader_accepts(path)
    assert "C64" in we_refuse(path, "weights.dtype").message


@pytest.mark.parametrize(
    "header",
    [
        b'{"a":'
        + json.dumps(entry(0, 4)).encode()
        + b',"a":'
        + json.dumps(entry(0, 4)).encode()
        + b"}",  # the loader keeps the last
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"note":"x"}}',  # the loader ignores unknown fields
        b'{"a":["F32",[1],[0,4]]}',  # serde's array form of a struct
        b'{"a":{"dtype":{"F32":null},"shape":[1],"data_offsets":[0,4]}}',  # serde's map form of an enum
    ],
    ids=["identical-duplicate", "extra-field", "array-entry", "map-dtype"],
)
def test_stricter_than_the_loader_only_where_it_is_ambiguous(tmp_path, header):
    """The one deliberate difference: encodings no writer produces and other readers may read
    differently (first key wins, unknown fields meaningful) are refused though the loader opens them."""
    path = write(tmp_path / "ambiguous.safetensors", header, b"\0" * 4)
    assert loader_accepts(path) == ["a"]
    we_refuse(path)


def _random_header(rng: random.Random) -> tuple[bytes, int]:
    """Tensors laid out mostly right, with random slips: offsets off by one, swapped, overlapping,
    duplicate names, sizes a byte short or long, metadata of the wrong type, padding."""
    dtypes = [*DTYPE_BITS, "F99"]
    parts: list[tuple[str, Any]] = []
    if rng.random() < 0.3:
        parts.append(("__metadata__", rng.choice([{"k": "v"}, {"k": "v"}, {"k": 1}, None, []])))
    position = 0
    for i in range(rng.randint(0, 5)):
        dtype = rng.choice(dtypes)
        shape = [rng.randint(0, 5) for _ in range(rng.randint(0, 3))]
        count = 1
        for dim in shape:
            count *= dim
        begin, end = position, position + count * DTYPE_BITS.get(dtype, 8) // 8
        slip = rng.random()
        if slip < 0.08:
            begin = max(0, begin + rng.choice([-1, 1, 2]))
        elif slip < 0.16:
            end = max(0, end + rng.choice([-1, 1]))
        elif slip < 0.2:
            begin, end = end, begin
        position = end if rng.random() > 0.1 else position
        name = rng.choice(["a", "b", "c.d", "", "é"]) + (str(i) if rng.random() > 0.05 else "0")
        parts.append((name, {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}))
    rng.shuffle(parts)
    data = max([0] + [v["data_offsets"][1] for k, v in parts if k != "__metadata__"]) + rng.choice([0] * 8 + [-1, 1, 3])
    raw = ("{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in parts) + "}").encode()
    if rng.random() < 0.3:
        raw = b" " * rng.randint(1, 3) + raw
    if rng.random() < 0.5:
        raw += rng.choice([b" ", b"   ", b"\n", b"\0", b"\t "])
    return raw, max(data, 0)


def test_random_headers_get_the_loaders_verdict(tmp_path):
    """A differential check: we never accept what the loader refuses, and refuse what it accepts
    only for a duplicate key."""
    rng = random.Random(20260101)
    path = tmp_path / "random.safetensors"
    verdicts = set()
    for _ in range(600):
        raw, data = _random_header(rng)
        write(path, raw, b"\0" * data)
        try:
            with safe_open(str(path), "pt"):
                loader = True
        except SafetensorError:
            loader = False
        try:
            read_safetensors_header(path)
            ours, why = True, ""
        except RegistryError as error:
            ours, why = False, error.message
        verdicts.add((loader, ours))
        assert ours <= loader, f"accepted what the loader refuses: {raw!r} + {data} bytes"
        assert ours == loader or "twice" in why, f"refused what the loader accepts ({why}): {raw!r} + {data} bytes"
    assert {(True, True), (False, False)} <= verdicts


# ----------------------------------------------------------------------------------------------
# Sharded checkpoints: each shard's header, and the one shard-index parser


def _shard(directory: Path, tensors: dict[str, torch.Tensor]) -> Path:
    names = sorted(tensors)
    halves = {
        "model-00001-of-00002.safetensors": names[: len(names) // 2],
        "model-00002-of-00002.safetensors": names[len(names) // 2 :],
    }
    directory.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    for shard, members in halves.items():
        save_file({n: tensors[n] for n in members}, str(directory / shard))
        weight_map.update(dict.fromkeys(members, shard))
    index = directory / "model.safetensors.index.json"
    index.write_text(
        json.dumps(
            {
                "metadata": {"total_size": sum(t.numel() * t.element_size() for t in tensors.values())},
                "weight_map": weight_map,
            }
        )
    )
    return index


def with_gap(path: Path, after: int = 0, gap: int = 64) -> None:
    """Rewrite a safetensors file in place with ``gap`` zero bytes after its ``after``-th tensor
    (by offset), the later offsets moved to match: every tensor still reads back, but the data
    section has a hole the loader refuses."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header, data = json.loads(raw[8 : 8 + n]), raw[8 + n :]
    ordered = sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"])
    cut = header[ordered[after]]["data_offsets"][1]
    for name in ordered[after + 1 :]:
        header[name]["data_offsets"] = [o + gap for o in header[name]["data_offsets"]]
    body = json.dumps(header).encode()
    body += b" " * (-len(body) % 8)
    path.write_bytes(struct.pack("<Q", len(body)) + body + data[:cut] + b"\0" * gap + data[cut:])


def test_a_shard_with_a_gap_is_refused(tmp_path):
    index = _shard(tmp_path / "sharded", make_base_state_dict(SMALL))
    assert inspect_weights(index).kind == "checkpoint"
    shard = index.parent / "model-00002-of-00002.safetensors"
    with_gap(shard)
    loader_refuses(shard)
    with pytest.raises(RegistryError) as caught:
        inspect_weights(index)
    assert (
        caught.value.code == "weights.bad-safetensors"
        and caught.value.file == str(shard)
        and "gap of 64 bytes" in caught.value.message
    )


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (
            lambda text: text.replace(
                '"weight_map": {', '"weight_map": {"emb.weight": "model-00001-of-00002.safetensors", ', 1
            ),
            "twice",
        ),
        (lambda text: text.replace('"metadata": {', '"metadata": {"total_size": 1, ', 1), "twice"),
        (lambda text: text.replace('{"total_size": ', '{"total_size": -', 1), "total_size"),
        (
            lambda text: text.replace(
                '"weight_map": {', '"weight_map": {"x": "../model-00001-of-00002.safetensors", ', 1
            ),
            "not a file name beside the index",
        ),
        (lambda text: json.dumps({"metadata": {}, "weight_map": {}}), "non-empty"),
        (lambda text: json.dumps({"weight_map": {"emb.weight": 1}}), "not a shard file name"),
        (lambda text: "[]", "not an object"),
        (lambda text: text[:-1], "not valid JSON"),
    ],
    ids=[
        "duplicate-tensor",
        "duplicate-total-size",
        "negative-total-size",
        "outside",
        "empty-weight-map",
        "non-string-shard",
        "array",
        "truncated",
    ],
)
def test_malformed_shard_index_is_refused(tmp_path, edit, says):
    index = _shard(tmp_path / "sharded", make_base_state_dict(SMALL))
    index.write_text(edit(index.read_text()))
    with pytest.raises(RegistryError) as caught:
        inspect_weights(index)
    assert caught.value.code == "weights.bad-shard-index" and says in caught.value.message, caught.value.one_line()


def test_shard_index_that_is_not_utf8_is_refused(tmp_path):
    index = _shard(tmp_path / "sharded", make_base_state_dict(SMALL))
    index.write_bytes(index.read_text().encode("utf-16"))
    with pytest.raises(RegistryError) as caught:
        inspect_weights(index)
    assert caught.value.code == "weights.bad-shard-index" and "UTF-8" in caught.value.message


def test_the_gate_runtime_reads_shard_indexes_with_the_same_parser(tmp_path):
    index = _shard(tmp_path / "sharded", make_base_state_dict(SMALL))
    assert set(load_tensors(index)) == set(make_base_state_dict(SMALL))
    index.write_text(
        index.read_text().replace(
            '"weight_map": {', '"weight_map": {"emb.weight": "model-00001-of-00002.safetensors", ', 1
        )
    )
    with pytest.raises(RegistryError) as caught:
        load_tensors(index)
    assert caught.value.code == "weights.bad-shard-index"


# ----------------------------------------------------------------------------------------------
# End to end: `registry add` and `registry validate`


@pytest.fixture
def registry_with_base(empty_registry, small_base):
    add_base(empty_registry, BaseRequest(path=small_base, filename=small_base.name))
    return empty_registry


def test_registry_add_refuses_a_crafted_state_and_changes_nothing(registry_with_base, small_base, tmp_path):
    name = small_base.name[: -len(".pth")]
    good = tmp_path / "good" / "v141.safetensors"
    good.parent.mkdir()
    save_file(make_state_tensors(SMALL), str(good))
    crafted = tmp_path / "v141.safetensors"
    crafted.write_bytes(good.read_bytes())
    with_gap(crafted)
    assert inspect_weights(good).kind == "state"  # the same tensors without the gap are a fine State
    loader_refuses(crafted)

    before = snapshot(registry_with_base)
    args = [
        "add",
        str(crafted),
        "--base",
        name,
        "--method",
        "state",
        "--data-version",
        "v1.41",
        "--train-json",
        str(train_json(tmp_path / "t.json")),
        "-C",
        str(registry_with_base),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 3, result.output
    assert "gap of 64 bytes" in result.output and str(crafted) in result.output, result.output
    assert snapshot(registry_with_base) == before
    assert validate(registry_with_base) == []

    result = CliRunner().invoke(main, [*args[:1], str(good), *args[2:]])
    assert result.exit_code == 0, result.output


def _hostile_rewrite(root: Path, relpath: str, craft: Callable[[Path], None]) -> None:
    """Change a registered file the way a hostile pull request would: index.json's sha256/size,
    SHA256SUMS and the card updated to match, so only the file's content can give it away."""
    craft(root / relpath)
    sha, size = sha256_of(root / relpath), (root / relpath).stat().st_size
    index = Index.model_validate_json((root / INDEX_NAME).read_text())
    for entry in index.entries:
        if entry.path == relpath:
            entry.sha256, entry.size = sha, size
        for shard in entry.shards:
            if shard.path == relpath:
                shard.sha256, shard.size = sha, size
    (root / INDEX_NAME).write_bytes(render_index(index))
    write_sums(root)  # what the tool says to run after an intended change
    write_card(root)


@pytest.fixture
def with_twins(registry_with_base, small_base, tmp_path):
    name = small_base.name[: -len(".pth")]
    root = registry_with_base
    state = add_weight(
        root,
        AddRequest(make_state_file(tmp_path / "s.pth", SMALL), name, "state", "v1.41", train_json(tmp_path / "t.json")),
    )
    full = add_weight(
        root,
        AddRequest(
            save_checkpoint(tmp_path / "rwkv-final.pth", make_base_state_dict(SMALL)),
            name,
            "full",
            "v1.0",
            train_json(tmp_path / "f.json"),
        ),
    )
    state_twin = convert_entry(root, state.path, 1 << 40)
    full_twin = convert_entry(root, full.path, 200_000)
    assert (
        state_twin.format == "safetensors" and full_twin.format == "safetensors-sharded" and len(full_twin.shards) > 1
    )
    assert validate(root) == []
    return root, state_twin, full_twin


def test_validate_reports_a_crafted_shard_of_a_twin(with_twins):
    root, _, full_twin = with_twins
    shard = full_twin.shards[0].path
    _hostile_rewrite(root, shard, with_gap)
    loader_refuses(root / shard)
    findings = validate(root)
    assert [f.code for f in findings] == ["shards.invalid"], findings
    assert findings[0].file == full_twin.path and "gap of 64 bytes" in findings[0].message


def test_validate_reports_a_crafted_single_file_twin(with_twins):
    root, state_twin, _ = with_twins
    _hostile_rewrite(root, state_twin.path, with_gap)
    loader_refuses(root / state_twin.path)
    findings = validate(root)
    assert any(f.file == state_twin.path and "gap of 64 bytes" in f.message for f in findings), findings


def test_a_crafted_twin_with_an_empty_header_passes_neither_smoke_nor_publish(with_twins, small_base):
    root, state_twin, _ = with_twins

    def empty_header(path: Path) -> None:
        path.write_bytes((2).to_bytes(8, "little") + b"{}")

    _hostile_rewrite(root, state_twin.path, empty_header)
    with pytest.raises(RegistryError) as refused:  # add refuses such a file, so the gate does too
        smoke(root, [state_twin.path], small_base, "cpu")
    assert refused.value.code == "weights.not-tensor-map" and refused.value.file == state_twin.path
    assert not list(root.glob(".registry/gates/*.json"))
    dry_run = CliRunner().invoke(
        main, ["publish", "-C", str(root), "--repo-id", "ns/name", "--dry-run", "--assume-empty-remote", "--json"]
    )
    problems = {(p["code"], p["file"]) for p in json.loads(dry_run.stdout)["problems"]}
    assert dry_run.exit_code == 3 and ("weights.not-tensor-map", state_twin.path) in problems
