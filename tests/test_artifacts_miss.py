"""MiSS adapters: miss.json, content_version, the writer and the merge formula."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import struct
import zipfile
from pathlib import Path

import pytest
import torch

from registry.artifacts.miss import (
    content_version,
    default_targets,
    merge_delta,
    read_miss_json,
    torch_zip_folder,
    verify_adapter,
    write_adapter,
)
from registry.artifacts.synthetic import (
    checkpoint_shapes,
    make_adapter_file,
    make_adapter_tensors,
    share_storage,
)
from registry.core.errors import RegistryError
from registry.core.models import Architecture

from .conftest import SMALL, sha256_of

RANK = 8


def append_manifest(path: Path, text: str | bytes) -> Path:
    """Add ``<top folder>/miss.json`` to a torch-zip file, as rwkv_miss_tune does."""
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(f"{torch_zip_folder(archive, path)}/miss.json", text)
    return path


def manifest_for(tensors: dict[str, torch.Tensor], base_sha: str, **changes) -> str:
    """miss.json text for ``tensors``, with fields replaced by ``changes`` (possibly invalid ones)."""
    fields = {
        "format": "rwkv-miss",
        "format_version": 1,
        "rank": RANK,
        "scale": 1.0,
        "targets": [t.model_dump(mode="json") for t in default_targets(checkpoint_shapes(SMALL))],
        "base_sha256": base_sha,
        "content_version": content_version(tensors),
    }
    return json.dumps({**fields, **changes})


class MarkerPayload:
    """Pickles as a call to ``os.makedirs(marker)``: unpickling it unsafely creates the marker."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.makedirs, (str(self.marker),))


def load(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)


@pytest.fixture
def tensors() -> dict[str, torch.Tensor]:
    return make_adapter_tensors(SMALL, RANK)


@pytest.fixture
def base_sha(small_base) -> str:
    return sha256_of(small_base)


@pytest.fixture
def adapter(tmp_path, base_sha) -> Path:
    return make_adapter_file(tmp_path / "adapter-final.pth", SMALL, base_sha, rank=RANK, scale=0.5)


def refusal(call, *args) -> RegistryError:
    with pytest.raises(RegistryError) as caught:
        call(*args)
    assert "\n" not in str(caught.value) and "fix:" in str(caught.value)
    return caught.value


def test_written_adapter_loads_with_mmap_and_describes_itself(adapter, base_sha, tensors):
    loaded = load(adapter)
    assert loaded.keys() == tensors.keys()
    assert all(torch.equal(loaded[name], tensors[name]) for name in tensors)
    manifest = read_miss_json(adapter)
    assert (manifest.format, manifest.format_version, manifest.rank, manifest.scale) == ("rwkv-miss", 1, RANK, 0.5)
    assert manifest.base_sha256 == base_sha
    assert len(manifest.targets) == 6 * SMALL.n_layer
    shapes = {t.name: t.shape for t in manifest.targets}
    assert shapes["blocks.1.att.receptance.weight"] == (SMALL.n_embd, SMALL.n_embd)
    assert shapes["blocks.1.ffn.key.weight"] == (SMALL.dim_ffn, SMALL.n_embd)
    assert shapes["blocks.1.ffn.value.weight"] == (SMALL.n_embd, SMALL.dim_ffn)
    assert loaded["blocks.1.ffn.key.weight"].shape == (SMALL.dim_ffn, RANK)
    assert manifest.content_version == content_version(loaded)
    assert verify_adapter(adapter, loaded) == manifest


def test_content_version_ignores_container_bytes(tmp_path, tensors, base_sha):
    targets = default_targets(checkpoint_shapes(SMALL))
    plain_path, renamed_path, shared_path = (
        tmp_path / "adapter-final.pth",
        tmp_path / "other-name.pth",
        tmp_path / "copy" / "adapter-final.pth",
    )
    plain = write_adapter(plain_path, tensors, RANK, 1.0, targets, base_sha)
    renamed = write_adapter(renamed_path, tensors, RANK, 1.0, targets, base_sha)  # top folder "other-name/"
    reordered_shared = dict(reversed(list(share_storage(tensors).items())))
    shared = write_adapter(shared_path, reordered_shared, RANK, 1.0, targets, base_sha)  # one storage, other order
    buffer = io.BytesIO()  # torch.save to a file object: top folder "archive/"
    torch.save(load(plain_path), buffer)
    resaved_path = tmp_path / "resaved.pth"
    resaved_path.write_bytes(buffer.getvalue())
    append_manifest(resaved_path, plain.model_dump_json())

    files = [plain_path, renamed_path, shared_path, resaved_path]
    assert len({f.read_bytes() for f in files}) == len(files)
    with zipfile.ZipFile(resaved_path) as archive:
        assert "archive/miss.json" in archive.namelist()
    versions = {
        plain.content_version,
        renamed.content_version,
        shared.content_version,
        read_miss_json(resaved_path).content_version,
    }
    assert versions == {content_version(load(f)) for f in files} == {content_version(tensors)}


def test_content_version_changes_with_any_value_name_or_shape(tensors):
    original = content_version(tensors)
    name = "blocks.0.att.key.weight"
    nudged = dict(tensors)
    nudged[name] = tensors[name].clone()
    nudged[name][3, 1] += 1
    renamed = {("x" + k if k == name else k): v for k, v in tensors.items()}
    reshaped = {**tensors, name: tensors[name].reshape(-1)}
    assert len({original, content_version(nudged), content_version(renamed), content_version(reshaped)}) == 4


def test_content_version_follows_the_documented_normalization():
    """An independent rebuild from docs/formats.md: u64le-length-prefixed name, dtype, shape, data."""
    tensors = {"b": torch.tensor([[1.5, -2.0]], dtype=torch.bfloat16), "a": torch.arange(3, dtype=torch.float32)}

    def field(data: bytes) -> bytes:
        return struct.pack("<Q", len(data)) + data

    stream = (
        field(b"a")
        + field(b"F32")
        + field(struct.pack("<Q", 3))
        + field(struct.pack("<3f", 0.0, 1.0, 2.0))
        + field(b"b")
        + field(b"BF16")
        + field(struct.pack("<2Q", 1, 2))
        + field(struct.pack("<2H", 0x3FC0, 0xC000))
    )
    assert content_version(tensors) == hashlib.sha256(stream).hexdigest()
    assert (
        content_version(tensors) == "4ab7dab9ca65d41c841718926892d94b3c84ee4f4e36c11367376ae5728a3744"
    )  # docs' check value


def test_miss_json_is_read_without_unpickling(tmp_path, tensors, base_sha, monkeypatch):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pth"
    torch.save({"blocks.0.att.key.weight": MarkerPayload(marker)}, path)
    append_manifest(path, manifest_for(tensors, base_sha))
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load called"))
    monkeypatch.setattr(pickle, "Unpickler", None)
    monkeypatch.setattr(pickle, "loads", None)
    assert read_miss_json(path).base_sha256 == base_sha
    assert not marker.exists()


def test_tampered_content_version_is_refused(tmp_path, tensors, base_sha):
    path = tmp_path / "adapter.pth"
    torch.save(tensors, path)
    append_manifest(path, manifest_for(tensors, base_sha, content_version="0" * 64))
    assert refusal(verify_adapter, path, load(path)).code == "miss.content-mismatch"


def test_changed_tensor_under_old_manifest_is_refused(tmp_path, tensors, base_sha):
    path = tmp_path / "adapter.pth"
    edited = {name: t.clone() for name, t in tensors.items()}
    edited["blocks.1.ffn.value.weight"][0, 0] = 1.0
    torch.save(edited, path)
    append_manifest(path, manifest_for(tensors, base_sha))
    assert refusal(verify_adapter, path, load(path)).code == "miss.content-mismatch"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("{not json", "miss.bad-json"),
        (b"\xff\xfe{}", "miss.bad-json"),
        ('{"format": "rwkv-miss"}', "miss.bad-manifest"),
        ("[]", "miss.bad-manifest"),
    ],
)
def test_malformed_miss_json_is_refused(tmp_path, tensors, text, code):
    path = tmp_path / "adapter.pth"
    torch.save(tensors, path)
    append_manifest(path, text)
    assert refusal(read_miss_json, path).code == code


@pytest.mark.parametrize(
    "changes",
    [
        {"rank": 0},
        {"format": "lora"},
        {"format_version": 2},
        {"base_sha256": "abc"},
        {"targets": []},
        {"extra": 1},
        {"scale": "NaN"},
    ],
    ids=["rank0", "format", "version", "sha", "no-targets", "unknown-field", "nan-scale"],
)
def test_schema_errors_are_refused(tmp_path, tensors, base_sha, changes):
    path = tmp_path / "adapter.pth"
    torch.save(tensors, path)
    append_manifest(path, manifest_for(tensors, base_sha, **changes))
    error = refusal(read_miss_json, path)
    assert error.code == "miss.bad-manifest" and "miss.json" in error.message


def test_repeated_target_is_refused(tmp_path, tensors, base_sha):
    path = tmp_path / "adapter.pth"
    torch.save(tensors, path)
    target = {"name": "blocks.0.att.key.weight", "shape": [128, 128]}
    append_manifest(path, manifest_for(tensors, base_sha, targets=[target, target]))
    assert "repeat" in refusal(read_miss_json, path).message


def test_missing_manifest_is_refused(tmp_path, tensors):
    path = tmp_path / "plain.pth"
    torch.save(tensors, path)
    assert refusal(read_miss_json, path).code == "miss.no-manifest"


@pytest.mark.parametrize("damage", ["truncate", "not-a-zip"])
def test_damaged_container_is_refused(adapter, damage):
    data = adapter.read_bytes()
    adapter.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"hello")
    assert refusal(read_miss_json, adapter).code == "weights.corrupt-zip"


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda t: t.float(), "BF16"),
        (lambda t: t[:, :4], "rank-8"),
    ],
    ids=["fp32", "wrong-rank"],
)
def test_writer_refuses_tensors_that_do_not_match_targets(tmp_path, tensors, base_sha, edit, needle):
    name = "blocks.0.att.value.weight"
    path = tmp_path / "adapter.pth"
    error = refusal(
        write_adapter,
        path,
        {**tensors, name: edit(tensors[name])},
        RANK,
        1.0,
        default_targets(checkpoint_shapes(SMALL)),
        base_sha,
    )
    assert error.code == "miss.tensor-mismatch" and name in error.message and needle in error.message
    assert not path.exists()


def test_writer_refuses_tensor_sets_that_differ_from_targets(tmp_path, tensors, base_sha):
    targets = default_targets(checkpoint_shapes(SMALL))
    extra = {**tensors, "blocks.0.att.g1": torch.zeros(4, RANK, dtype=torch.bfloat16)}
    assert "blocks.0.att.g1" in refusal(write_adapter, tmp_path / "a.pth", extra, RANK, 1.0, targets, base_sha).message
    fewer = dict(list(tensors.items())[1:])
    assert (
        refusal(write_adapter, tmp_path / "b.pth", fewer, RANK, 1.0, targets, base_sha).code == "miss.tensor-mismatch"
    )


def test_default_targets_agree_between_architecture_and_shapes():
    arch = Architecture(
        n_layer=SMALL.n_layer,
        n_embd=SMALL.n_embd,
        head_size=SMALL.head_size,
        vocab_size=SMALL.vocab_size,
        n_head=SMALL.n_head,
        dim_ffn=SMALL.dim_ffn,
    )
    assert default_targets(arch) == default_targets(checkpoint_shapes(SMALL))
    assert default_targets(arch)[0].name == "blocks.0.att.receptance.weight"
    assert refusal(default_targets, arch.model_copy(update={"dim_ffn": None})).code == "base.architecture-incomplete"


def test_merge_tiles_the_rank_columns_along_the_input_dimension():
    weight = torch.ones(2, 7)
    delta = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    merged = merge_delta(weight, delta, scale=0.5)
    expected = 1 + 0.5 * torch.tensor([[1.0, 2, 3, 1, 2, 3, 1], [4, 5, 6, 4, 5, 6, 4]])
    assert torch.equal(merged, expected)
    assert merge_delta(weight.bfloat16(), delta, 1.0).dtype == torch.bfloat16
