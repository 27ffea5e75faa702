"""The torch-free reader of torch-zip .pth files (registry/artifacts/torch_zip.py), against what
torch.save writes and against pickles written to do harm."""

from __future__ import annotations

import pickle
import random
import struct
import zipfile
from pathlib import Path

import pytest
import torch

from registry.artifacts.inspect import inspect_weights
from registry.artifacts.torch_zip import read_torch_zip
from registry.core.errors import RegistryError

from .test_artifacts_miss import MarkerPayload

DTYPES = {
    torch.bfloat16: "BF16",
    torch.float16: "F16",
    torch.float32: "F32",
    torch.float64: "F64",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.uint8: "U8",
    torch.bool: "BOOL",
    torch.float8_e4m3fn: "F8_E4M3",
    torch.uint16: "U16",
}


def elements(tensor: torch.Tensor) -> bytes:
    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""


def assert_read_as_torch_loads(path: Path) -> None:
    """Names, dtypes, shapes, strides, offsets and elements as torch.load(weights_only=True) gives them."""
    loaded = torch.load(path, weights_only=True)
    archive = read_torch_zip(path)
    assert list(archive.tensors) == list(loaded)
    for name, tensor in loaded.items():
        stored = archive.tensors[name]
        assert (stored.dtype, stored.shape, stored.stride, stored.offset) == (
            DTYPES[tensor.dtype],
            tuple(tensor.shape),
            tensor.stride(),
            tensor.storage_offset(),
        ), name
        assert archive.data(name) == elements(tensor), name


@pytest.mark.parametrize("dtype", list(DTYPES), ids=str)
def test_every_dtype_reads_as_torch_loads_it(tmp_path, dtype):
    generator = torch.Generator().manual_seed(3)
    path = tmp_path / "t.pth"
    torch.save(
        {
            "a": torch.randn(3, 5, generator=generator).to(dtype),
            "scalar": torch.tensor(1).to(dtype),
            "empty": torch.zeros(0, 4).to(dtype),
        },
        path,
    )
    assert_read_as_torch_loads(path)


def test_views_offsets_and_strides_read_as_torch_loads_them(tmp_path):
    whole = torch.arange(60, dtype=torch.float32).reshape(5, 12)
    views = {
        "whole": whole, "rows": whole[2:4], "block": whole[1:4, 3:9], "transposed": whole.t(),
        "every-other": whole[:, ::2], "expanded": torch.ones(3, 1, dtype=torch.bfloat16).expand(3, 7),
        "tail": whole.reshape(-1)[55:], "column": whole[:, 5],
    }  # fmt: skip
    path = tmp_path / "views.pth"
    torch.save(views, path)
    assert_read_as_torch_loads(path)
    archive = read_torch_zip(path)
    assert (
        len(
            {
                archive.tensors[n].storage
                for n in ("whole", "rows", "block", "transposed", "every-other", "tail", "column")
            }
        )
        == 1
    )  # one storage, shared
    assert archive.tensors["block"].offset == 15 and not archive.tensors["block"].contiguous


def test_a_state_dict_and_parameters_read_as_tensors(tmp_path):
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    path = tmp_path / "module.pth"
    torch.save(module.state_dict(), path)  # an OrderedDict with its _metadata attribute (BUILD)
    assert_read_as_torch_loads(path)
    torch.save({"p": torch.nn.Parameter(torch.ones(2, 2))}, path)
    assert read_torch_zip(path).tensors["p"].shape == (2, 2)


def test_a_big_base_is_read_without_reading_its_tensor_data(tmp_path):
    path = tmp_path / "big.pth"
    torch.save({"emb.weight": torch.zeros(4096, 4096, dtype=torch.bfloat16)}, path)  # 32 MiB
    with zipfile.ZipFile(path) as archive:
        data = next(i for i in archive.infolist() if "/data/" in i.filename)
    raw = bytearray(path.read_bytes())
    raw[data.header_offset + 200 : data.header_offset + 300] = b"\x7f" * 100  # tensor bytes changed, CRC now wrong
    path.write_bytes(bytes(raw))
    assert read_torch_zip(path).tensors["emb.weight"].shape == (
        4096,
        4096,
    )  # the storage's CRC is the file sha256's job


# ----------------------------------------------------------------------------------------------
# Hostile pickles


def with_pickle(tmp_path: Path, data_pkl: bytes, storages: dict[str, bytes] | None = None) -> Path:
    """A torch-zip archive as torch.save lays it out, holding ``data_pkl`` and ``storages``."""
    path = tmp_path / "crafted.pth"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("crafted/data.pkl", data_pkl)
        archive.writestr("crafted/byteorder", "little")
        for key, data in (storages or {}).items():
            archive.writestr(f"crafted/data/{key}", data)
        archive.writestr("crafted/version", "3\n")
    return path


def refused(path: Path, code: str) -> RegistryError:
    with pytest.raises(RegistryError) as caught:
        inspect_weights(path)
    assert caught.value.code == code, caught.value.one_line()
    assert "\n" not in caught.value.one_line()
    return caught.value


def tensor_pickle(
    rebuild: bytes = b"ctorch._utils\n_rebuild_tensor_v2\n",
    storage: bytes = b"ctorch\nFloatStorage\n",
    key: bytes = b"0",
    numel: int = 4,
    offset: int = 0,
    size: int = 4,
) -> bytes:
    """data.pkl of {"w": tensor} written opcode by opcode, with the parts the tests vary."""
    pid = (
        b"(X\x07\x00\x00\x00storage"
        + storage
        + b"X"
        + struct.pack("<I", len(key))
        + key
        + b"X\x03\x00\x00\x00cpu"
        + b"K"
        + bytes([numel])
        + b"tQ"
    )
    args = (
        b"(" + pid + b"K" + bytes([offset]) + b"K" + bytes([size]) + b"\x85K\x01\x85\x89ccollections\nOrderedDict\n)Rt"
    )
    return b"\x80\x02}(X\x01\x00\x00\x00w" + rebuild + args + b"Ru."


def test_the_crafted_pickle_is_what_torch_save_would_write(tmp_path):
    path = with_pickle(tmp_path, tensor_pickle(), {"0": struct.pack("<4f", 1, 2, 3, 4)})
    assert torch.load(path, weights_only=True)["w"].tolist() == [1, 2, 3, 4]
    assert read_torch_zip(path).data("w") == struct.pack("<4f", 1, 2, 3, 4)


@pytest.mark.parametrize(
    "data_pkl, named",
    [
        (b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueR.", "os.system"),
        (
            b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93X\x01\x00\x00\x001\x85R.",
            "builtins.eval",
        ),  # protocol 4's STACK_GLOBAL
        (b"\x80\x02cbuiltins\ngetattr\n.", "builtins.getattr"),
        (b"\x80\x02ctorch\nload\n.", "torch.load"),
        (b"\x80\x02ctorch._utils\n_rebuild_from_type_v2\n.", "torch._utils._rebuild_from_type_v2"),
    ],
    ids=["os.system", "stack-global-eval", "getattr", "torch.load", "subclass-rebuild"],
)
def test_a_global_outside_the_tensor_set_is_refused_by_name(tmp_path, data_pkl, named):
    assert f"it names {named}" in refused(with_pickle(tmp_path, data_pkl), "weights.unsafe-pickle").message


@pytest.mark.parametrize(
    "data_pkl",
    [
        b"\x80\x02(X\x04\x00\x00\x00trueios\nsystem\n.",  # INST: the global is named inside the opcode
        b"\x80\x02(X\x01\x00\x00\x00ao.",  # OBJ
        b"\x80\x02\x82\x01.",  # EXT1: the copyreg registry
        b"\x80\x02P0\n.",  # text PERSID
    ],
    ids=["INST", "OBJ", "EXT1", "PERSID"],
)
def test_opcodes_that_build_or_call_are_refused(tmp_path, data_pkl):
    assert "opcode" in refused(with_pickle(tmp_path, data_pkl), "weights.unsafe-pickle").message


def test_code_in_a_pickle_never_runs_and_torch_is_not_needed_to_say_so(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "payload.pth"
    torch.save({"w": MarkerPayload(marker)}, path)
    assert "os.makedirs" in refused(path, "weights.unsafe-pickle").message and not marker.exists()


@pytest.mark.parametrize(
    "data_pkl, storages, code",
    [
        (
            tensor_pickle(rebuild=b"ctorch._utils\n_rebuild_parameter\n"),
            {"0": bytes(16)},
            "weights.unsafe-pickle",
        ),  # a storage where a tensor belongs
        (
            tensor_pickle(storage=b"ctorch\nComplexFloatStorage\n"),
            {"0": bytes(32)},
            "weights.dtype",
        ),  # torch loads it; the registry holds no complex weights
        (tensor_pickle(), {}, "weights.corrupt-zip"),  # the storage member is missing
        (tensor_pickle(), {"0": bytes(8)}, "weights.corrupt-zip"),  # shorter than data.pkl says
        (tensor_pickle(offset=2), {"0": bytes(16)}, "weights.corrupt-zip"),  # the view reaches past the storage
        (tensor_pickle(key=b"../x"), {"0": bytes(16)}, "weights.corrupt-zip"),  # a storage key that is no member name
        (tensor_pickle()[:-6], {"0": bytes(16)}, "weights.corrupt-zip"),  # truncated
        (b"\x80\x02h\x05.", {}, "weights.corrupt-zip"),  # the memo read before it is written
        (
            b"\x80\x02" + b"K\x01" + b"\x85" * 200_000 + b"K\x01}(\x85" + b"\x85" * 0 + b"s.",
            {},
            "weights.corrupt-zip",
        ),  # malformed, deep
        (
            b"\x80\x02}K\x01" + b"\x85" * 200_000 + b"K\x01s.",
            {},
            "weights.corrupt-zip",
        ),  # a key a million tuples deep never hashes
        (pickle.dumps([1, 2], protocol=2), {}, "weights.not-tensor-map"),
        (pickle.dumps({"w": "text"}, protocol=2), {}, "weights.not-tensor-map"),
    ],
    ids=[
        "storage-as-tensor",
        "complex",
        "no-member",
        "short-member",
        "past-the-end",
        "bad-key",
        "truncated",
        "memo",
        "stack",
        "deep-key",
        "list",
        "text",
    ],
)
def test_malformed_and_misleading_pickles_are_one_line_refusals(tmp_path, data_pkl, storages, code):
    refused(with_pickle(tmp_path, data_pkl, storages), code)


def test_random_damage_to_data_pkl_is_refused_or_read_as_torch_reads_it(tmp_path):
    """Whatever this reader accepts, torch's weights_only unpickler accepts too, with the same
    names, dtypes and shapes: the reader is at least as strict."""
    original = tmp_path / "original.pth"
    torch.save(
        {"a": torch.ones(2, 3, dtype=torch.bfloat16), "b": torch.arange(6, dtype=torch.float32).reshape(3, 2)[1:]},
        original,
    )
    with zipfile.ZipFile(original) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    pkl_name = next(n for n in members if n.endswith("/data.pkl"))
    chooser = random.Random(39)
    accepted = 0
    for trial in range(300):
        data = bytearray(members[pkl_name])
        for _ in range(chooser.randint(1, 3)):
            data[chooser.randrange(len(data))] = chooser.randrange(256)
        path = tmp_path / f"mutant-{trial}.pth"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
            for name, member in members.items():
                archive.writestr(name, bytes(data) if name == pkl_name else member)
        try:
            ours = read_torch_zip(path)
        except RegistryError as error:
            assert error.code in (
                "weights.unsafe-pickle",
                "weights.corrupt-zip",
                "weights.not-tensor-map",
                "weights.not-torch-zip",
            ), error.one_line()
            continue
        accepted += 1
        theirs = torch.load(path, weights_only=True)
        assert {n: (DTYPES[t.dtype], tuple(t.shape)) for n, t in theirs.items()} == {
            n: (t.dtype, t.shape) for n, t in ours.tensors.items()
        }
    assert 0 < accepted < 300
