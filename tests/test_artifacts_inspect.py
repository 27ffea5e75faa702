"""Inspecting weight files without executing them: classification and every refusal."""

from __future__ import annotations

import json
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from registry.artifacts.inspect import (
    check_miss_fits,
    check_state_fits,
    inspect_weights,
)
from registry.artifacts.synthetic import (
    TinySpec,
    make_adapter_file,
    make_base_checkpoint,
    make_base_state_dict,
    make_state_tensors,
    save_checkpoint,
)
from registry.core.errors import RegistryError
from registry.core.models import Architecture

from .conftest import SMALL, sha256_of
from .test_artifacts_miss import MarkerPayload, append_manifest, manifest_for

SMALL_ARCH = Architecture(n_layer=2, n_embd=128, head_size=64, vocab_size=512, n_head=2, dim_ffn=512)
OTHER = TinySpec(n_layer=3, n_embd=192, vocab_size=512)


@dataclass
class Thing:
    """A custom class: weights_only unpickling must not build it."""

    value: int = 1


def refused(path: Path, code: str) -> RegistryError:
    with pytest.raises(RegistryError) as caught:
        inspect_weights(path)
    error = caught.value
    assert error.code == code, error.one_line()
    assert "\n" not in error.one_line() and error.file == str(path)
    return error


def tensor_bytes(tensors: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


# ----------------------------------------------------------------------------------------------
# Classification


@pytest.mark.parametrize("with_layer0_v", [True, False])
@pytest.mark.parametrize("shared", [False, True])
def test_base_checkpoint_gives_its_architecture(tmp_path, with_layer0_v, shared):
    spec = TinySpec(n_layer=2, n_embd=128, vocab_size=512, with_layer0_v=with_layer0_v)
    path = make_base_checkpoint(tmp_path / "base.pth", spec, shared=shared)
    inspection = inspect_weights(path)
    assert (inspection.kind, inspection.format, inspection.miss) == ("checkpoint", "pth", None)
    assert inspection.architecture == SMALL_ARCH
    assert ("blocks.0.att.v0" in inspection.tensors) is with_layer0_v
    assert inspection.tensors["emb.weight"] == ("BF16", (512, 128))
    assert inspection.total_bytes == tensor_bytes(make_base_state_dict(spec))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_state_file(tmp_path, dtype):
    path = save_checkpoint(tmp_path / "state.pth", make_state_tensors(SMALL, dtype=dtype))
    inspection = inspect_weights(path)
    assert inspection.kind == "state" and inspection.architecture is None
    assert inspection.tensors["blocks.1.att.time_state"].shape == (2, 64, 64)
    check_state_fits(inspection, SMALL_ARCH)


def test_miss_adapter_fits_its_base(tmp_path, small_base):
    base_sha = sha256_of(small_base)
    inspection = inspect_weights(make_adapter_file(tmp_path / "adapter-final.pth", SMALL, base_sha))
    assert inspection.kind == "miss" and inspection.miss is not None
    assert inspection.miss.base_sha256 == base_sha and inspection.miss.rank == 16
    assert inspection.tensors["blocks.0.ffn.key.weight"] == ("BF16", (512, 16))
    check_miss_fits(inspection, SMALL_ARCH, base_sha)
    check_miss_fits(inspection, inspect_weights(small_base).shapes, base_sha)


def test_safetensors_is_read_from_the_header_only(tmp_path):
    tensors = make_base_state_dict(SMALL)
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path))
    data = bytearray(path.read_bytes())
    header_end = 8 + int.from_bytes(data[:8], "little")
    data[header_end:] = b"\xff" * (len(data) - header_end)  # garbage tensor data changes nothing
    path.write_bytes(bytes(data))
    inspection = inspect_weights(path)
    assert (inspection.kind, inspection.format) == ("checkpoint", "safetensors")
    assert inspection.architecture == SMALL_ARCH
    assert inspection.total_bytes == tensor_bytes(tensors)


def write_sharded(directory: Path, tensors: dict[str, torch.Tensor], weight_map_edit=None) -> Path:
    names = list(tensors)
    shards = {
        "model-00001-of-00002.safetensors": names[: len(names) // 2],
        "model-00002-of-00002.safetensors": names[len(names) // 2 :],
    }
    directory.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    for shard, members in shards.items():
        save_file({n: tensors[n] for n in members}, str(directory / shard))
        weight_map.update(dict.fromkeys(members, shard))
    if weight_map_edit:
        weight_map_edit(weight_map)
    index = directory / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": tensor_bytes(tensors)}, "weight_map": weight_map}))
    return index


def test_sharded_checkpoint_via_its_index(tmp_path):
    tensors = make_base_state_dict(SMALL)
    index = write_sharded(tmp_path / "sharded", tensors)
    for target in (index, index.parent):
        inspection = inspect_weights(target)
        assert (inspection.kind, inspection.format, inspection.architecture) == (
            "checkpoint",
            "safetensors-sharded",
            SMALL_ARCH,
        )
        assert [f.name for f in inspection.files] == [
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        ]
        assert inspection.tensors.keys() == tensors.keys()


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.update({"emb.weight": "../elsewhere.safetensors"}),
        lambda m: m.pop("emb.weight"),
        lambda m: m.update({"emb.weight": "model-00002-of-00002.safetensors"}),
    ],
    ids=["outside", "unlisted", "wrong-shard"],
)
def test_inconsistent_shard_index_is_refused(tmp_path, edit):
    refused(write_sharded(tmp_path / "sharded", make_base_state_dict(SMALL), edit), "weights.bad-shard-index")


# ----------------------------------------------------------------------------------------------
# Damaged and unsafe containers


def damage(path: Path, how: str) -> Path:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        del data[len(data) // 2 :]
    elif how == "pickle-bytes":  # inside data.pkl: zip structure intact, CRC wrong
        with zipfile.ZipFile(path) as archive:
            info = next(i for i in archive.infolist() if i.filename.endswith("/data.pkl"))
        name_length, extra_length = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
        start = info.header_offset + 30 + name_length + extra_length
        data[start + 10 : start + 20] = b"\xff" * 10
    else:  # central directory
        where = data.rfind(b"PK\x01\x02")
        data[where : where + 4] = b"XXXX"
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("how", ["truncated", "pickle-bytes", "central-directory"])
def test_damaged_zip_is_refused(tmp_path, how):
    refused(damage(make_base_checkpoint(tmp_path / "base.pth", SMALL), how), "weights.corrupt-zip")


def test_legacy_pickle_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "legacy.pth"
    torch.save(make_state_tensors(SMALL), path, _use_new_zipfile_serialization=False)
    assert "torch.save" in refused(path, "weights.legacy-pickle").fix


def test_unknown_bytes_are_refused(tmp_path):
    path = tmp_path / "notes.pth"
    path.write_text("just text")
    refused(path, "weights.unknown-format")


@pytest.mark.parametrize(
    "payload",
    [
        {"blocks.0.att.time_state": torch.zeros(2, 64, 64), "note": "trained by me"},
        [torch.zeros(2)],
        {"state_dict": {"emb.weight": torch.zeros(2)}},
        {},
    ],
    ids=["string-value", "list", "nested", "empty"],
)
def test_non_tensor_content_is_refused(tmp_path, payload):
    path = tmp_path / "weights.pth"
    torch.save(payload, path)
    refused(path, "weights.not-tensor-map")


def test_custom_class_is_not_built(tmp_path):
    path = tmp_path / "weights.pth"
    torch.save({"emb.weight": torch.zeros(2), "meta": Thing()}, path)
    assert "Thing" in refused(path, "weights.unsafe-pickle").message


def test_code_in_a_pickle_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "weights.pth"
    torch.save({"emb.weight": MarkerPayload(marker)}, path)
    assert "makedirs" in refused(path, "weights.unsafe-pickle").message
    assert not marker.exists()
    torch.load(path, weights_only=False)  # proof that the payload is live: unsafe loading runs it
    assert marker.exists()


def test_tampered_adapter_is_refused(tmp_path, small_base):
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", SMALL, sha256_of(small_base), rank=8)
    tensors = torch.load(adapter, weights_only=True)
    forged = tmp_path / "forged.pth"
    torch.save(tensors, forged)
    append_manifest(forged, manifest_for(tensors, sha256_of(small_base), content_version="1" * 64))
    refused(forged, "miss.content-mismatch")


# ----------------------------------------------------------------------------------------------
# Wrong content


def test_rwkv6_checkpoint_is_refused(tmp_path):
    c = 64
    tensors = {"emb.weight": torch.zeros(512, c), "head.weight": torch.zeros(512, c)}
    for key in ("time_maa_x", "time_decay", "time_faaaa", "receptance.weight"):
        tensors[f"blocks.0.att.{key}"] = torch.zeros(c)
    error = refused(save_checkpoint(tmp_path / "rwkv6.pth", tensors), "weights.not-rwkv7")
    assert "RWKV-6" in error.message and "time_maa_x" in error.message


def test_non_rwkv_checkpoint_is_refused(tmp_path):
    path = save_checkpoint(tmp_path / "linear.pth", {"linear.weight": torch.zeros(4, 4), "linear.bias": torch.zeros(4)})
    assert "linear.weight" in refused(path, "weights.not-rwkv").message


@pytest.mark.parametrize("dropped", ["blocks.1.att.w0", "blocks.1.att.v0", "blocks.0.att.r_k"])
def test_incomplete_rwkv7_checkpoint_is_refused(tmp_path, dropped):
    tensors = make_base_state_dict(SMALL)
    del tensors[dropped]
    assert (
        dropped.split(".", 2)[2]
        in refused(save_checkpoint(tmp_path / "base.pth", tensors), "weights.not-rwkv7").message
    )


def test_inconsistent_linear_shape_is_refused(tmp_path):
    tensors = make_base_state_dict(SMALL)
    tensors["blocks.1.ffn.value.weight"] = torch.zeros(128, 256, dtype=torch.bfloat16)
    refused(save_checkpoint(tmp_path / "base.pth", tensors), "weights.inconsistent")


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: s.update({"blocks.1.att.time_state": torch.zeros(2, 64, 65)}),
        lambda s: s.update({"blocks.1.att.time_state": torch.zeros(2, 64)}),
        lambda s: s.update({"blocks.1.att.time_state": torch.zeros(2, 64, 64, dtype=torch.float16)}),
        lambda s: s.update({"blocks.3.att.time_state": torch.zeros(2, 64, 64)}),
        lambda s: s.update({"blocks.0.att.w0": torch.zeros(1, 1, 128)}),
    ],
    ids=["not-square", "2d", "fp16", "gap", "extra-key"],
)
def test_malformed_state_is_refused(tmp_path, edit):
    tensors = make_state_tensors(SMALL)
    edit(tensors)
    refused(save_checkpoint(tmp_path / "state.pth", tensors), "weights.bad-state")


def test_state_of_another_architecture_does_not_fit(tmp_path):
    inspection = inspect_weights(save_checkpoint(tmp_path / "state.pth", make_state_tensors(OTHER)))
    with pytest.raises(RegistryError) as caught:
        check_state_fits(inspection, SMALL_ARCH)
    assert caught.value.code == "state.wrong-base"
    assert "3 layers × [3, 64, 64]" in caught.value.message and "2 layers × [2, 64, 64]" in caught.value.message


def test_adapter_for_another_base_does_not_fit(tmp_path, small_base):
    other_sha = "0853d4ce2e4e0629762797d05036a84cc69fb2fb9eff5590dd22aeb518a4c842"
    inspection = inspect_weights(make_adapter_file(tmp_path / "adapter.pth", SMALL, other_sha))
    with pytest.raises(RegistryError) as caught:
        check_miss_fits(inspection, SMALL_ARCH, sha256_of(small_base))
    assert caught.value.code == "miss.wrong-base"
    assert other_sha in caught.value.message and sha256_of(small_base) in caught.value.message


def test_adapter_with_other_shapes_does_not_fit(tmp_path, small_base):
    base_sha = sha256_of(small_base)
    inspection = inspect_weights(make_adapter_file(tmp_path / "adapter.pth", OTHER, base_sha))
    with pytest.raises(RegistryError) as caught:
        check_miss_fits(inspection, SMALL_ARCH, base_sha)
    assert caught.value.code == "miss.wrong-shape"


def test_fit_checks_refuse_the_wrong_kind(small_base):
    inspection = inspect_weights(small_base)
    for check, args in ((check_state_fits, (SMALL_ARCH,)), (check_miss_fits, (SMALL_ARCH, sha256_of(small_base)))):
        with pytest.raises(RegistryError) as caught:
            check(inspection, *args)
        assert caught.value.code == "weights.wrong-kind"
