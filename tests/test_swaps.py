"""What is inspected is what is registered: an input swapped for another file while a command
runs (after it was opened) is never read, and a registered file swapped behind the index is
refused before anything runs on it."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import registry.artifacts.accept as accept_module
import registry.ops.convert as convert_module
from registry.artifacts.synthetic import make_state_file
from registry.core.errors import RegistryError
from registry.core.models import Score
from registry.ops.add import AddRequest, add_weight
from registry.ops.convert import convert_entry
from registry.ops.score import add_score
from registry.ops.validate import validate

from .conftest import SMALL, sha256_of, snapshot
from .test_ops_artifacts import base_name, registry_with_base, train_json  # noqa: F401  (fixture)


def _swap(path: Path, replacement: Path) -> None:
    """Replace ``path`` by another file, as an attacker's rename would (a new inode)."""
    os.replace(replacement, path)


def test_add_registers_the_bytes_it_inspected_when_the_source_is_swapped_mid_command(
    registry_with_base, small_base, tmp_path, monkeypatch
):
    state = make_state_file(tmp_path / "s.pth", SMALL, seed=1)
    original = sha256_of(state)
    evil = tmp_path / "evil.pth"
    evil.write_bytes(b"PK\x03\x04 not the inspected file")
    real = accept_module.inspect_weights

    def swap_then_inspect(path):
        if evil.exists():
            _swap(state, evil)  # after the copy started from the open file, before inspection
        return real(path)

    monkeypatch.setattr(accept_module, "inspect_weights", swap_then_inspect)
    entry = add_weight(
        registry_with_base, AddRequest(state, base_name(small_base), "state", "v1.41", train_json(tmp_path / "t.json"))
    )
    assert entry.sha256 == original == sha256_of(registry_with_base / entry.path)
    assert validate(registry_with_base) == []


def test_convert_vouches_for_nothing_when_the_source_is_swapped_mid_command(
    registry_with_base, small_base, tmp_path, monkeypatch
):
    entry = add_weight(
        registry_with_base,
        AddRequest(
            make_state_file(tmp_path / "s.pth", SMALL, seed=1),
            base_name(small_base),
            "state",
            "v1.41",
            train_json(tmp_path / "t.json"),
        ),
    )
    registered = registry_with_base / entry.path
    real = convert_module.convert_file
    made: list = []

    def swap_then_convert(*args, **kwargs):
        _swap(
            registered, make_state_file(tmp_path / "other.pth", SMALL, seed=9)
        )  # after the check, before the tensors are read
        result = real(*args, **kwargs)
        made.append(load_file(result.files[0].temp))  # the twin as written, before the commit refuses
        return result

    monkeypatch.setattr(convert_module, "convert_file", swap_then_convert)
    before = {p.name for p in registered.parent.iterdir()}
    with pytest.raises(RegistryError) as refused:
        convert_entry(registry_with_base, entry.path, 5 * 10**9)
    # The twin was made from the pinned original bytes ...
    original, converted = torch.load(tmp_path / "s.pth", weights_only=True), made[0]
    assert original.keys() == converted.keys() and all(torch.equal(original[k], converted[k]) for k in original)
    # ... but the commit refuses: the registered file no longer matches SHA256SUMS.
    assert refused.value.code == "sums.mismatch" and entry.path in {p.file for p in refused.value.problems}
    assert {p.name for p in registered.parent.iterdir()} == before


def test_a_registered_file_swapped_before_convert_is_refused(registry_with_base, small_base, tmp_path):
    entry = add_weight(
        registry_with_base,
        AddRequest(
            make_state_file(tmp_path / "s.pth", SMALL, seed=1),
            base_name(small_base),
            "state",
            "v1.41",
            train_json(tmp_path / "t.json"),
        ),
    )
    _swap(registry_with_base / entry.path, make_state_file(tmp_path / "other.pth", SMALL, seed=9))
    with pytest.raises(RegistryError) as refused:
        convert_entry(registry_with_base, entry.path, 5 * 10**9, force=True)
    assert refused.value.code == "index.sha-mismatch" and refused.value.file == entry.path
    index = (registry_with_base / "index.json").read_text()
    assert hashlib.sha256((registry_with_base / entry.path).read_bytes()).hexdigest() not in index


@pytest.mark.parametrize("linked", ["base", "method", "version"])
def test_a_symlinked_directory_inside_the_registry_is_never_written_through(
    registry_with_base, small_base, tmp_path, linked
):
    base = base_name(small_base)
    parts = {"base": base, "method": f"{base}/state", "version": f"{base}/state/v1.41"}
    outside = tmp_path / "outside"
    outside.mkdir()
    link = registry_with_base / parts[linked]
    if link.exists():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    before = snapshot(registry_with_base)
    state = make_state_file(tmp_path / "s.pth", SMALL)
    with pytest.raises(RegistryError) as refused:
        add_weight(registry_with_base, AddRequest(state, base, "state", "v1.41", train_json(tmp_path / "t.json")))
    assert refused.value.code == "fs.symlink" and str(link) in refused.value.one_line()
    assert list(outside.rglob("*")) == [] and snapshot(registry_with_base) == before
    assert "layout.symlink" in {p.code for p in validate(registry_with_base)}


def test_an_unrelated_write_does_not_launder_a_change_made_behind_the_tools_back(
    registry_with_base, small_base, tmp_path
):
    first = add_weight(
        registry_with_base,
        AddRequest(
            make_state_file(tmp_path / "a.pth", SMALL, seed=1),
            base_name(small_base),
            "state",
            "v1.41",
            train_json(tmp_path / "t.json"),
        ),
    )
    second = add_weight(
        registry_with_base,
        AddRequest(
            make_state_file(tmp_path / "b.pth", SMALL, seed=2),
            base_name(small_base),
            "state",
            "v2.0",
            train_json(tmp_path / "t2.json"),
        ),
    )
    train = registry_with_base / Path(first.path).parent / "train.json"
    train.write_text(train.read_text().replace("rwkv_state_tune", "someone-else"))
    before = snapshot(registry_with_base)

    with pytest.raises(RegistryError) as refused:  # a score on the *other* entry
        add_score(
            registry_with_base,
            second.path,
            Score(benchmark="exam", value=46.9, date="2026-10-16", backend="rwkv 0.8.32"),
        )
    assert refused.value.code == "sums.mismatch" and (
        "sums.mismatch",
        train.relative_to(registry_with_base).as_posix(),
    ) in {(p.code, p.file) for p in refused.value.problems}
    assert snapshot(registry_with_base) == before
    assert "sums.mismatch" in {p.code for p in validate(registry_with_base)}  # still reported, never absorbed
