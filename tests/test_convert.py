"""convert: safetensors twins that are bit-exact, sharded when large, atomic, and recorded."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from registry.artifacts.factory import make_base_state_dict, make_state_file, save_checkpoint, share_storage
from registry.artifacts.miss import make_adapter_file
from registry.convert import convert_file
from registry.errors import RegistryError
from registry.models import Index
from registry.ops.artifacts import AddRequest, BaseRequest, add_base, add_weight
from registry.ops.convert import convert_entry, convert_standalone
from registry.repo import INDEX_NAME, render_index
from registry.validate import validate

from .conftest import SMALL, sha256_of, snapshot
from .test_ops_artifacts import train_json

BIG = 1 << 40


def read_all(paths: list[Path]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    tensors, meta = {}, {}
    for path in paths:
        with safe_open(path, framework="pt") as f:
            meta.update(f.metadata() or {})
            tensors.update({k: f.get_tensor(k) for k in f.keys()})
    return tensors, meta


def same_bits(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k].view(torch.uint8), b[k].contiguous().view(torch.uint8)) for k in a)


@pytest.fixture
def populated(empty_registry, small_base, tmp_path):
    """A registry with a State, a MiSS adapter and a full checkpoint on the small base."""
    add_base(empty_registry, BaseRequest(path=small_base, filename=small_base.name))
    name = small_base.name[:-4]
    state = add_weight(empty_registry, AddRequest(make_state_file(tmp_path / "s.pth", SMALL), name, "state", "v1.41", train_json(tmp_path / "t.json")))
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", SMALL, sha256_of(small_base))
    miss = add_weight(empty_registry, AddRequest(adapter, name, "miss", "v2.1", train_json(tmp_path / "m.json"), run="r16"))
    full_src = save_checkpoint(tmp_path / "rwkv-final.pth", share_storage(make_base_state_dict(SMALL)))
    full = add_weight(empty_registry, AddRequest(full_src, name, "full", "v1.0", train_json(tmp_path / "f.json")))
    return empty_registry, {"state": state, "miss": miss, "full": full}


def test_state_twin_is_bit_exact_recorded_and_valid(populated):
    root, entries = populated
    derived = convert_entry(root, entries["state"].path, BIG)
    assert derived.path == entries["state"].path.replace(".pth", ".safetensors")
    assert derived.derived_from == entries["state"].path and derived.format == "safetensors"
    tensors, meta = read_all([root / derived.path])
    assert same_bits(tensors, torch.load(root / entries["state"].path, weights_only=True))
    assert meta["format"] == "pt" and meta["source_sha256"] == entries["state"].sha256 and meta["base_sha256"] == entries["state"].base_sha256
    assert derived.sha256 == sha256_of(root / derived.path)
    assert validate(root) == []


def test_adapter_metadata_carries_miss_json(populated):
    root, entries = populated
    derived = convert_entry(root, entries["miss"].path, BIG)
    _, meta = read_all([root / derived.path])
    assert meta["content_version"] == entries["miss"].content_version == derived.content_version
    assert json.loads(meta["miss.targets"]) and meta["miss.base_sha256"] == entries["miss"].base_sha256


def test_checkpoint_shards_with_transformers_index(populated):
    root, entries = populated
    source = torch.load(root / entries["full"].path, weights_only=True)
    derived = convert_entry(root, entries["full"].path, 200_000)
    assert derived.format == "safetensors-sharded" and derived.path.endswith("model.safetensors.index.json")
    index = json.loads((root / derived.path).read_text())
    shard_names = sorted(set(index["weight_map"].values()))
    assert len(shard_names) == len(derived.shards) > 1
    assert shard_names[0] == f"model-00001-of-{len(shard_names):05d}.safetensors"
    assert index["metadata"]["total_size"] == sum(t.numel() * t.element_size() for t in source.values())
    tensors, _ = read_all([root / derived.path.rsplit("/", 1)[0] / n for n in shard_names])
    assert same_bits(tensors, source)
    assert validate(root) == []


def test_shared_storage_is_written_once_per_tensor(populated):
    root, entries = populated
    derived = convert_entry(root, entries["full"].path, BIG)
    payload = sum(t.numel() * t.element_size() for t in make_base_state_dict(SMALL).values())
    assert payload < derived.size < payload + 64 * 1024  # header only on top, never whole storages


def test_existing_output_with_other_content_needs_force(populated):
    root, entries = populated
    target = root / entries["state"].path.replace(".pth", ".safetensors")
    target.write_bytes(b"something else")
    before = snapshot(root)
    with pytest.raises(RegistryError) as err:
        convert_entry(root, entries["state"].path, BIG)
    assert err.value.code == "convert.exists" and snapshot(root) == before
    convert_entry(root, entries["state"].path, BIG, force=True)
    assert validate(root) == []


def test_disk_full_leaves_nothing_behind(populated):
    root, entries = populated
    before = snapshot(root)

    class FullDisk:
        def __init__(self, path):
            self.handle = open(path, "wb")
            self.written = 0

        def write(self, data):
            self.written += len(data)
            if self.written > 10_000:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.handle.write(data)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    with pytest.raises(RegistryError) as err:
        convert_entry(root, entries["full"].path, BIG, opener=FullDisk)
    assert err.value.code == "convert.write-failed" and "No space left" in err.value.message
    assert snapshot(root) == before
    assert not [p for p in (root / ".registry" / "staging").iterdir()]


def test_pickle_with_non_tensor_objects_refused(tmp_path):
    bad = tmp_path / "bad.pth"
    torch.save({"emb.weight": torch.zeros(2, 2), "note": "hello"}, bad)
    with pytest.raises(RegistryError) as err:
        convert_standalone(bad, BIG)
    assert err.value.code == "weights.not-tensor-map"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.pth"]


def test_unsupported_dtype_refused(tmp_path):
    source = save_checkpoint(tmp_path / "s.pth", {"blocks.0.att.time_state": torch.zeros(1, 64, 64, dtype=torch.complex64)})
    with pytest.raises(RegistryError) as err:
        convert_file(source, "state", {}, BIG, tmp_path)
    assert err.value.code == "convert.unsupported-dtype" and "complex64" in err.value.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.pth"]


def test_standalone_base_conversion(small_base, tmp_path):
    copy = tmp_path / small_base.name
    copy.write_bytes(small_base.read_bytes())
    result = convert_standalone(copy, BIG)
    assert [f.final.name for f in result.files] == ["model.safetensors"]
    tensors, meta = read_all([tmp_path / "model.safetensors"])
    assert same_bits(tensors, torch.load(copy, weights_only=True)) and meta["source_sha256"] == sha256_of(copy)


def _break_shard_index(root: Path, derived_path: str, mutate) -> set[str]:
    path = root / derived_path
    path.write_text(mutate(path.read_text()))
    index = Index.model_validate_json((root / INDEX_NAME).read_text())
    (root / INDEX_NAME).write_bytes(render_index(index))
    return {f.code for f in validate(root)}


def test_validate_catches_missing_shard_and_duplicate_tensor(populated):
    root, entries = populated
    derived = convert_entry(root, entries["full"].path, 200_000)
    original = (root / derived.path).read_text()
    codes = _break_shard_index(root, derived.path, lambda t: t.replace("model-00001-of", "model-00009-of", 1))
    assert "shards.invalid" in codes
    (root / derived.path).write_text(original)
    body = json.loads(original)
    name, shard = next(iter(body["weight_map"].items()))
    duplicated = original.replace('"weight_map": {', f'"weight_map": {{\n    "{name}": "{shard}",', 1)
    codes = _break_shard_index(root, derived.path, lambda _t: duplicated)
    assert "shards.invalid" in codes


def test_cli_converts_registry_entries_and_outside_files(populated, small_base, tmp_path):
    from click.testing import CliRunner

    from registry.cli import main

    root, entries = populated
    outside = tmp_path / "outside" / small_base.name
    outside.parent.mkdir()
    outside.write_bytes(small_base.read_bytes())
    runner = CliRunner()
    result = runner.invoke(main, ["convert", str(outside), entries["state"].path, "-C", str(root), "--json"])
    assert result.exit_code == 0, result.output
    outputs = json.loads(result.stdout)
    assert outputs[0]["outputs"] == [str(outside.parent / "model.safetensors")]
    assert outputs[1]["derived_from"] == entries["state"].path
    assert (outside.parent / "model.safetensors").is_file() and validate(root) == []


def test_verification_does_not_trust_our_own_byte_offsets(populated, monkeypatch):
    """If the source byte ranges were located wrongly, the write and the block comparison would
    agree with each other; the rows safetensors reads must still equal what torch loads."""
    import registry.convert.source as source_module

    root, entries = populated
    real = source_module.locate_tensors
    monkeypatch.setattr(source_module, "locate_tensors", lambda path, tensors: {k: v + 2 for k, v in real(path, tensors).items()})
    before = snapshot(root)
    with pytest.raises(RegistryError) as err:
        convert_entry(root, entries["full"].path, BIG)
    assert err.value.code == "convert.verify-failed" and "what torch loads" in err.value.message
    assert snapshot(root) == before
