"""convert: safetensors twins that are bit-exact, sharded when large, atomic, and recorded."""

from __future__ import annotations

import errno
import json
import os
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors import safe_open

import registry.convert.readback as readback_module
import registry.convert.source as source_module
import registry.convert.writer as writer_module
from registry.artifacts.inspect import load_tensor_map
from registry.artifacts.safetensors_header import read_safetensors_header
from registry.artifacts.synthetic import (
    make_adapter_file,
    make_base_state_dict,
    make_state_file,
    save_checkpoint,
    share_storage,
)
from registry.cli import main
from registry.convert.pipeline import convert_file
from registry.convert.source import unmap_touched
from registry.convert.writer import OutputFile
from registry.core.errors import RegistryError
from registry.core.files import FILE_MODE
from registry.core.models import Index
from registry.core.names import INDEX_NAME
from registry.core.repo import render_index
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.convert import convert_entry, convert_standalone
from registry.ops.validate import validate

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
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and torch.equal(a[k].view(torch.uint8), b[k].contiguous().view(torch.uint8)) for k in a
    )


@pytest.fixture
def populated(empty_registry, small_base, tmp_path):
    """A registry with a State, a MiSS adapter and a full checkpoint on the small base."""
    add_base(empty_registry, BaseRequest(path=small_base, filename=small_base.name))
    name = small_base.name[:-4]
    state = add_weight(
        empty_registry,
        AddRequest(make_state_file(tmp_path / "s.pth", SMALL), name, "state", "v1.41", train_json(tmp_path / "t.json")),
    )
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", SMALL, sha256_of(small_base))
    miss = add_weight(
        empty_registry, AddRequest(adapter, name, "miss", "v2.1", train_json(tmp_path / "m.json"), run="r16")
    )
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
    assert (
        meta["format"] == "pt"
        and meta["source_sha256"] == entries["state"].sha256
        and meta["base_sha256"] == entries["state"].base_sha256
    )
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

    class FullDisk(OutputFile):
        """Every write that reaches past 10 kB fails, as on a full disk."""

        def write_at(self, data, offset):
            self._fail_past(offset + len(data))
            super().write_at(data, offset)

        def copy_from(self, source_fd, source_offset, length, offset):
            self._fail_past(offset + length)
            super().copy_from(source_fd, source_offset, length, offset)

        def _fail_past(self, end):
            if end > 10_000:
                raise OSError(errno.ENOSPC, "No space left on device")

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
    source = save_checkpoint(
        tmp_path / "s.pth", {"blocks.0.att.time_state": torch.zeros(1, 64, 64, dtype=torch.complex64)}
    )
    with pytest.raises(RegistryError) as err:
        convert_file(source, "state", {}, "0" * 64, BIG, tmp_path)
    assert (
        err.value.code == "weights.dtype" and "complex64" in err.value.message
    )  # refused by the reader torch.load runs after
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


def test_cli_outside_any_registry_converts_standalone(small_base, tmp_path, monkeypatch):
    """In a plain folder (no index.json, no -C) a relative file name converts next to itself."""

    (tmp_path / small_base.name).write_bytes(small_base.read_bytes())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RWKV_REGISTRY", raising=False)
    result = CliRunner().invoke(main, ["convert", small_base.name])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "model.safetensors").is_file() and not (tmp_path / "index.json").exists()
    refused = CliRunner().invoke(main, ["convert", small_base.name, "-C", ".", "--force"])
    assert refused.exit_code == 3 and "index.json is missing" in refused.output  # -C says: a registry


def test_verification_does_not_trust_our_own_byte_offsets(populated, monkeypatch):
    """If the source byte ranges were located wrongly, the write and the block comparison would
    agree with each other; the rows safetensors reads must still equal what torch loads."""

    root, entries = populated
    real = source_module.locate_tensors

    def located_two_bytes_off(path, tensors):
        layout = real(path, tensors)
        return replace(layout, offsets={k: v + 2 for k, v in layout.offsets.items()})

    monkeypatch.setattr(source_module, "locate_tensors", located_two_bytes_off)
    before = snapshot(root)
    with pytest.raises(RegistryError) as err:
        convert_entry(root, entries["full"].path, BIG)
    assert err.value.code == "convert.verify-failed" and "what torch loads" in err.value.message
    assert snapshot(root) == before


def _flipping_opener(position: int):
    """An opener whose file gets the byte at ``position`` flipped after it was written, as a bad
    disk or controller would; what the writer meant to write is the source's bytes."""

    class FlipOne(OutputFile):
        def write_at(self, data, offset):
            super().write_at(data, offset)
            self._flip_within(offset, len(data))

        def copy_from(self, source_fd, source_offset, length, offset):
            super().copy_from(source_fd, source_offset, length, offset)
            self._flip_within(offset, length)

        def _flip_within(self, offset, length):
            if offset <= position < offset + length:
                with open(self.path, "r+b") as raw:
                    raw.seek(position)
                    flipped = raw.read(1)[0] ^ 0xFF
                    raw.seek(position)
                    raw.write(bytes([flipped]))

    return FlipOne


@pytest.mark.parametrize("piece", [64, 1 << 20])
def test_a_byte_changed_on_disk_fails_verification(populated, monkeypatch, piece):
    """The read-back comparison catches one flipped byte in the middle of a tensor (where the row
    spot check does not look), whether the tensor is copied in one piece or many."""

    root, entries = populated
    monkeypatch.setattr(writer_module, "PIECE", piece)
    twin = convert_entry(root, entries["full"].path, BIG)
    parsed = read_safetensors_header(root / twin.path)
    header, data_size = parsed.raw, parsed.data_size
    data_start = twin.size - data_size
    begin, end = header["emb.weight"]["data_offsets"]
    assert end - begin > 3 * 64  # several pieces of 64 bytes, so the flipped one is not the last
    before = snapshot(root)
    with pytest.raises(RegistryError) as err:
        convert_entry(
            root, entries["full"].path, BIG, force=True, opener=_flipping_opener(data_start + (begin + end) // 2)
        )
    assert err.value.code == "convert.verify-failed" and "emb.weight differs from the source" in err.value.message, (
        err.value.message
    )
    assert snapshot(root) == before and not list((root / ".registry" / "staging").iterdir())
    assert validate(root) == []


def test_a_byte_changed_in_the_header_fails_verification(populated):
    root, entries = populated
    before = snapshot(root)
    with pytest.raises(RegistryError) as err:
        convert_entry(root, entries["state"].path, BIG, opener=_flipping_opener(20))
    assert err.value.code == "convert.verify-failed" and "header" in err.value.message
    assert snapshot(root) == before and not list((root / ".registry" / "staging").iterdir())


def test_interrupted_conversion_leaves_no_output(populated):
    """Ctrl-C in the middle of the copy: nothing under the final name, nothing staged."""
    root, entries = populated
    before = snapshot(root)

    class InterruptedAfterFirstPiece(OutputFile):
        copies = 0

        def copy_from(self, *args):
            type(self).copies += 1
            if self.copies > 1:
                raise KeyboardInterrupt
            super().copy_from(*args)

    with pytest.raises(KeyboardInterrupt):
        convert_entry(root, entries["full"].path, BIG, opener=InterruptedAfterFirstPiece)
    assert InterruptedAfterFirstPiece.copies == 2
    assert snapshot(root) == before and not list((root / ".registry" / "staging").iterdir())


def test_copy_through_memory_when_the_kernel_cannot_copy(populated, monkeypatch):
    """copy_file_range refused (another filesystem, an old kernel): same bytes, same digest."""
    root, entries = populated
    kernel = convert_entry(root, entries["full"].path, BIG)
    calls = []

    def refuse(*args):
        calls.append(args)
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    through_memory = convert_entry(root, entries["full"].path, BIG, force=True)
    assert calls and through_memory.sha256 == kernel.sha256 == sha256_of(root / through_memory.path)
    assert validate(root) == []


def test_tensors_that_are_not_file_ranges_are_written_from_memory(tmp_path):
    """A transposed view is not a byte range of the file: its bytes come from the loaded tensor."""
    base = torch.arange(64 * 48, dtype=torch.float32).reshape(64, 48)
    source = save_checkpoint(
        tmp_path / "s.pth", {"blocks.0.att.time_state": base.t(), "blocks.1.att.time_state": base + 1}
    )
    result = convert_file(source, "state", {}, "0" * 64, BIG, tmp_path)
    tensors, _ = read_all([result.main.temp])
    assert same_bits(tensors, torch.load(source, weights_only=True))
    assert result.main.sha256 == sha256_of(result.main.temp)


def test_writeback_starts_in_order_while_copying(populated, monkeypatch):
    """Written stretches are handed to the disk from the start, in order, none twice; the file is
    unchanged by it."""

    root, entries = populated
    monkeypatch.setattr(writer_module, "PIECE", 4096)
    monkeypatch.setattr(writer_module, "WRITEBACK_EVERY", 16384)
    started: list[tuple[int, int, str]] = []
    real = writer_module.start_writeback
    monkeypatch.setattr(
        writer_module,
        "start_writeback",
        lambda fd, offset, length: (
            started.append((offset, length, threading.current_thread().name)) or real(fd, offset, length)
        ),
    )
    derived = convert_entry(root, entries["full"].path, BIG)
    assert derived.sha256 == sha256_of(root / derived.path)
    assert same_bits(read_all([root / derived.path])[0], torch.load(root / entries["full"].path, weights_only=True))
    assert started[0][0] == 0 and all(a + n == b for (a, n, _), (b, _, _) in zip(started, started[1:], strict=False))
    assert all(n >= 16384 for _, n, _ in started) and derived.size - sum(n for _, n, _ in started) < 16384 + 4096
    assert all(thread.startswith("writeback ") for _, _, thread in started)  # never the copying thread


def test_writer_waits_for_the_read_back_and_finishes(populated, monkeypatch):
    """With the allowed lag smaller than a piece, the copier waits for the hasher after every
    piece: the conversion still finishes (no deadlock) with the right digest."""

    root, entries = populated
    monkeypatch.setattr(writer_module, "PIECE", 4096)
    monkeypatch.setattr(readback_module, "MAX_LAG", 1)
    done: list = []
    worker = threading.Thread(target=lambda: done.append(convert_entry(root, entries["full"].path, BIG)), daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert done, "the conversion did not finish"
    assert done[0].sha256 == sha256_of(root / done[0].path) and validate(root) == []


def test_outputs_get_the_mode_of_a_plain_new_file(populated):
    root, entries = populated
    derived = convert_entry(root, entries["state"].path, BIG)
    assert (root / derived.path).stat().st_mode & 0o777 == FILE_MODE


def test_standalone_sharded_index_records_the_source_sha256(small_base, tmp_path):
    copy = tmp_path / small_base.name
    copy.write_bytes(small_base.read_bytes())
    result = convert_standalone(copy, 200_000)
    assert result.sharded and len(result.files) > 2
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert index["metadata"]["source_sha256"] == sha256_of(copy)
    for shard in result.files[:-1]:
        assert read_all([shard.final])[1]["source_sha256"] == sha256_of(copy)


def _mapped_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of ``path`` (Linux /proc/self/smaps)."""
    total, current = 0, None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):
            current = fields[-1] if len(fields) >= 6 else None
        elif fields and fields[0] == "Rss:" and current == str(path):
            total += int(fields[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
def test_spot_checked_pages_leave_the_process_but_not_the_data(tmp_path):
    """After the verifier drops an mmap-loaded tensor's pages, RSS of the mapping falls and
    the tensor still reads the same values (they come back from the file)."""

    path = tmp_path / "big.pth"
    torch.save({"emb.weight": torch.arange(4 << 20, dtype=torch.float32).reshape(1024, -1)}, path)
    tensor = load_tensor_map(path)["emb.weight"]
    expected = float(tensor.double().sum())  # touches every page
    touched = _mapped_kib(path)
    assert touched >= 12 << 10  # most of 16 MiB is resident
    unmap_touched(tensor)
    assert _mapped_kib(path) < touched // 8
    assert float(tensor.double().sum()) == expected


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
def test_tensors_copied_through_the_mapping_leave_no_pages_behind(tmp_path):
    """A tensor that is not a range of the file (here transposed, as export-hf's low-rank
    matrices are) is copied and spot-checked through torch's mapping of the file; the pages that
    maps are dropped again, so memory does not grow with the number of such tensors."""
    path = tmp_path / "lowrank.pth"
    torch.save({f"blocks.{i}.att.w1": torch.randn(512, 1024) for i in range(8)}, path)  # 16 MiB
    loaded: dict[str, torch.Tensor] = {}

    def transposed(tensors):
        loaded.update(tensors)  # keeps torch's mapping of the file open after the conversion
        return {name: t.t() for name, t in tensors.items()}

    resident: list[int] = []  # KiB of the file mapped into this process, after each tensor is copied
    result = convert_file(
        path,
        "checkpoint",
        {},
        "0" * 64,
        BIG,
        tmp_path,
        remap=transposed,
        into=tmp_path / "out",
        progress=lambda _: resident.append(_mapped_kib(path)),
    )
    try:
        assert len(loaded) == len(resident) == 8
        assert (
            max(resident) < 2 << 10 and _mapped_kib(path) < 2 << 10
        )  # while copying, and after the checks: under one tensor's 2 MiB
        with safe_open(result.files[0].temp, framework="pt") as written:
            assert all(
                torch.equal(written.get_tensor(name), t.t()) for name, t in loaded.items()
            )  # the data came back from the file
    finally:
        result.discard()
