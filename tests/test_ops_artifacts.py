"""add-base, add, score, list, immutability: what fits goes in, what does not is refused cleanly."""

from __future__ import annotations

import json
import os
import time
import zipfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from registry.artifacts.synthetic import (
    TinySpec,
    make_adapter_file,
    make_base_checkpoint,
    make_state_file,
    save_checkpoint,
)
from registry.cli import main
from registry.core.errors import RegistryError
from registry.core.hashing import tree as tree_module
from registry.core.models import Index, Score
from registry.core.published import record_published
from registry.core.repo import Repo
from registry.core.sums import parse_sums, render_sums
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.convert import convert_entry
from registry.ops.score import add_score
from registry.ops.validate import allow_rewrite, validate

from .conftest import SMALL, sha256_of, snapshot

DATA = "ab" * 32
OTHER_SPEC = TinySpec(n_layer=3, n_embd=128, vocab_size=512)


def train_json(path: Path, data_sha: str = DATA) -> Path:
    path.write_text(
        json.dumps(
            {
                "trainer": {"name": "rwkv_state_tune", "version": "1.8.1"},
                "hyperparameters": {"lr_init": 0.01},
                "command": "rwkv_state_tune --lr_init 0.01",
                "data_sha256": data_sha,
            }
        )
    )
    return path


@pytest.fixture
def registry_with_base(empty_registry, small_base):
    add_base(
        empty_registry,
        BaseRequest(
            path=small_base, filename=small_base.name, source="BlinkDL/rwkv7-g1", vocab="rwkv_vocab_v20230424.txt"
        ),
    )
    return empty_registry


def base_name(path: Path) -> str:
    return path.name[: -len(".pth")]


def refuse(root: Path, func, *args, code: str) -> RegistryError:
    """Call func expecting a refusal with ``code``; the registry must be byte-identical after."""
    before = snapshot(root)
    with pytest.raises(RegistryError) as err:
        func(*args)
    assert err.value.code == code, err.value.one_line()
    assert snapshot(root) == before
    assert "\n" not in err.value.one_line() and "fix:" in err.value.one_line()
    return err.value


def test_add_base_records_architecture_and_stays_valid(registry_with_base, small_base):
    index = Index.model_validate_json((registry_with_base / "index.json").read_text())
    base = index.bases[0]
    assert base.sha256 == sha256_of(small_base) and base.name == base_name(small_base)
    assert (
        base.architecture.n_layer,
        base.architecture.n_embd,
        base.architecture.head_size,
        base.architecture.vocab_size,
    ) == (2, 128, 64, 512)
    assert (registry_with_base / base.name).is_dir()
    assert validate(registry_with_base) == []


def test_add_base_catalog_mismatch_is_refused(empty_registry, tmp_path):
    fake = make_base_checkpoint(tmp_path / "rwkv7-g1k-7.2b-20260930-ctx25600.pth", SMALL)
    err = refuse(
        empty_registry,
        add_base,
        empty_registry,
        BaseRequest(path=fake, filename=fake.name),
        code="base.catalog-mismatch",
    )
    assert "0853d4ce" in err.message


def test_add_base_metadata_only_then_add_needs_the_file(empty_registry, tmp_path):
    catalog_name = "rwkv7-g1k-7.2b-20260930-ctx25600.pth"
    sha = "0853d4ce2e4e0629762797d05036a84cc69fb2fb9eff5590dd22aeb518a4c842"
    added = add_base(empty_registry, BaseRequest(path=None, filename=catalog_name, sha256=sha))
    assert added.in_catalog
    base = added.base
    assert base.source == "BlinkDL/rwkv7-g1" and base.architecture is None  # filled from the catalog
    state = make_state_file(tmp_path / "s.pth", SMALL)
    request = AddRequest(state, base.name, "state", "v1.41", train_json(tmp_path / "t.json"))
    refuse(empty_registry, add_weight, empty_registry, request, code="base.metadata-only")


def test_add_base_refuses_rwkv6_and_non_rwkv(empty_registry, tmp_path):
    rwkv6 = save_checkpoint(
        tmp_path / "rwkv6-x.pth",
        {
            "emb.weight": torch.zeros(8, 4),
            "blocks.0.att.time_maa_x": torch.zeros(1, 1, 4),
            "blocks.0.att.time_decay": torch.zeros(4),
        },
    )
    err = refuse(
        empty_registry, add_base, empty_registry, BaseRequest(path=rwkv6, filename=rwkv6.name), code="weights.not-rwkv7"
    )
    assert "RWKV-6" in err.message
    other = save_checkpoint(tmp_path / "bert.pth", {"linear.weight": torch.zeros(2, 2)})
    refuse(
        empty_registry, add_base, empty_registry, BaseRequest(path=other, filename=other.name), code="weights.not-rwkv"
    )


def test_add_state_and_miss_happy_path(registry_with_base, small_base, tmp_path):
    name = base_name(small_base)
    state = add_weight(
        registry_with_base,
        AddRequest(
            make_state_file(tmp_path / "v141b.pth", SMALL),
            name,
            "state",
            "v1.41",
            train_json(tmp_path / "t.json"),
            recommended=True,
        ),
    )
    assert state.path == f"{name}/state/v1.41/v141b.pth" and state.recommended
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", SMALL, sha256_of(small_base))
    miss = add_weight(
        registry_with_base,
        AddRequest(adapter, name, "miss", "v2.1", train_json(tmp_path / "m.json"), run="r16-lr2e-5-e2"),
    )
    assert miss.path == f"{name}/miss/v2.1/r16-lr2e-5-e2/adapter-final.pth" and len(miss.content_version) == 64
    assert validate(registry_with_base) == []
    assert parse_sums((registry_with_base / "SHA256SUMS").read_bytes())[miss.path] == miss.sha256


def test_wrong_state_shapes_refused(registry_with_base, small_base, tmp_path):
    state = make_state_file(tmp_path / "s.pth", OTHER_SPEC)
    request = AddRequest(state, base_name(small_base), "state", "v1.41", train_json(tmp_path / "t.json"))
    err = refuse(registry_with_base, add_weight, registry_with_base, request, code="state.wrong-base")
    assert "3 layers" in err.message and "2 layers" in err.message


def test_miss_for_another_base_refused_printing_both(registry_with_base, small_base, tmp_path):
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", SMALL, "cd" * 32)
    request = AddRequest(adapter, base_name(small_base), "miss", "v2.1", train_json(tmp_path / "t.json"), run="r1")
    err = refuse(registry_with_base, add_weight, registry_with_base, request, code="miss.wrong-base")
    assert "cd" * 32 in err.message and sha256_of(small_base) in err.message


def test_tampered_content_version_refused(registry_with_base, small_base, tmp_path):
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", SMALL, sha256_of(small_base))
    with zipfile.ZipFile(adapter) as z:
        member = next(n for n in z.namelist() if n.endswith("/miss.json"))
        manifest = json.loads(z.read(member))
        members = {n: z.read(n) for n in z.namelist()}
    manifest["content_version"] = "0" * 64
    members[member] = json.dumps(manifest).encode()
    with zipfile.ZipFile(adapter, "w", zipfile.ZIP_STORED) as z:
        for n, data in members.items():
            z.writestr(n, data)
    request = AddRequest(adapter, base_name(small_base), "miss", "v2.1", train_json(tmp_path / "t.json"), run="r1")
    refuse(registry_with_base, add_weight, registry_with_base, request, code="miss.content-mismatch")


def test_missing_train_json_and_data_mismatch(registry_with_base, small_base, tmp_path):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    name = base_name(small_base)
    refuse(
        registry_with_base,
        add_weight,
        registry_with_base,
        AddRequest(state, name, "state", "v1.41", tmp_path / "nope.json"),
        code="train.missing",
    )
    request = AddRequest(state, name, "state", "v1.41", train_json(tmp_path / "t.json"), data_sha256="ef" * 32)
    refuse(registry_with_base, add_weight, registry_with_base, request, code="train.data-mismatch")


def test_base_name_with_separator_and_unknown_base(registry_with_base, tmp_path):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    refuse(
        registry_with_base,
        add_weight,
        registry_with_base,
        AddRequest(state, "../evil", "state", "v1.41", train_json(tmp_path / "t.json")),
        code="args.bad-name",
    )
    refuse(
        registry_with_base,
        add_weight,
        registry_with_base,
        AddRequest(state, "nobase", "state", "v1.41", train_json(tmp_path / "t.json")),
        code="base.unknown",
    )


@pytest.mark.parametrize("run", ["hf", "gguf"])
def test_a_run_named_like_the_export_folder_is_refused(registry_with_base, small_base, tmp_path, run):
    """``<base>/full/<v>/hf/`` is a full entry's Transformers export and ``gguf/`` its GGUF files; a run of that name
    would be taken for one."""
    full = make_base_checkpoint(tmp_path / "rwkv-final.pth", SMALL)
    request = AddRequest(full, base_name(small_base), "full", "v1.0", train_json(tmp_path / "t.json"), run=run)
    error = refuse(registry_with_base, add_weight, registry_with_base, request, code="args.bad-name")
    assert "Transformers exports" in error.message and "GGUF files" in error.message and "--run" in error.fix


def test_same_file_twice_refused(registry_with_base, small_base, tmp_path):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    name = base_name(small_base)
    add_weight(registry_with_base, AddRequest(state, name, "state", "v1.41", train_json(tmp_path / "t.json")))
    refuse(
        registry_with_base,
        add_weight,
        registry_with_base,
        AddRequest(state, name, "state", "v1.41", tmp_path / "t.json"),
        code="entry.exists",
    )
    copy = tmp_path / "other-name.pth"
    copy.write_bytes(state.read_bytes())
    refuse(
        registry_with_base,
        add_weight,
        registry_with_base,
        AddRequest(copy, name, "state", "v1.41", tmp_path / "t.json"),
        code="entry.duplicate",
    )
    assert copy.exists()


def test_another_train_json_in_the_same_data_version_is_refused(registry_with_base, small_base, tmp_path):
    """One train.json per data-version directory: a second entry whose train.json differs is refused
    naming the one there, and the registry stays as it was."""
    name = base_name(small_base)
    first = make_state_file(tmp_path / "s1.pth", SMALL, seed=1)
    add_weight(registry_with_base, AddRequest(first, name, "state", "v1.41", train_json(tmp_path / "t.json")))
    other = train_json(tmp_path / "t2.json")
    other.write_text(other.read_text().replace('"lr_init": 0.01', '"lr_init": 0.02'))
    second = make_state_file(tmp_path / "s2.pth", SMALL, seed=2)
    refused = refuse(
        registry_with_base,
        add_weight,
        registry_with_base,
        AddRequest(second, name, "state", "v1.41", other),
        code="train.conflict",
    )
    assert refused.problem.file == f"{name}/state/v1.41/train.json"


def test_move_moves_and_data_sums_provenance(registry_with_base, small_base, tmp_path):
    state = make_state_file(tmp_path / "s.pth", SMALL)
    dataset_sums = tmp_path / "SHA256SUMS"
    dataset_sums.write_bytes(render_sums({"v1.41/dataset/train/segments-1-41.jsonl": "12" * 32}))
    request = AddRequest(
        state,
        base_name(small_base),
        "state",
        "v1.41",
        train_json(tmp_path / "t.json"),
        data_sums=dataset_sums,
        move=True,
    )
    refuse(registry_with_base, add_weight, registry_with_base, request, code="data.not-in-dataset")
    assert state.exists()
    request.train_json = train_json(tmp_path / "t2.json", "12" * 32)
    entry = add_weight(registry_with_base, request)
    assert not state.exists() and (registry_with_base / entry.path).is_file()


def test_score_unknown_entry_refused_and_known_recorded(registry_with_base, small_base, tmp_path):
    score = Score(benchmark="exam", value=46.9, date="2026-10-16", backend="rwkv_lightning 1.8.1", runs=2)
    refuse(registry_with_base, add_score, registry_with_base, "nope/state/v1/x.pth", score, code="entry.unknown")
    state = add_weight(
        registry_with_base,
        AddRequest(
            make_state_file(tmp_path / "s.pth", SMALL),
            base_name(small_base),
            "state",
            "v1.41",
            train_json(tmp_path / "t.json"),
        ),
    )
    entry = add_score(registry_with_base, state.path, score)
    assert entry.scores == [score]
    assert validate(registry_with_base) == []


def test_published_file_rewrite_needs_recorded_reason(registry_with_base, small_base, tmp_path):
    state = add_weight(
        registry_with_base,
        AddRequest(
            make_state_file(tmp_path / "s.pth", SMALL),
            base_name(small_base),
            "state",
            "v1.41",
            train_json(tmp_path / "t.json"),
        ),
    )

    record_published(Repo(registry_with_base), parse_sums((registry_with_base / "SHA256SUMS").read_bytes()))
    target = registry_with_base / state.path
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    findings = validate(registry_with_base)
    assert {f.code for f in findings} == {"immutable.rewritten", "sums.mismatch", "index.sha-mismatch"}
    # every hint leads to the one command that accepts the new bytes (`registry sums` would leave the
    # entry's sha256 wrong, and `registry add` refuses a registered path)
    assert all(
        "--allow-rewrite" in f.fix and "registry sums" not in f.fix and "registry add" not in f.fix for f in findings
    )
    result = CliRunner().invoke(
        main, ["validate", str(registry_with_base), "--allow-rewrite", "fixed a corrupt upload"]
    )
    assert result.exit_code == 0, result.output
    index = Index.model_validate_json((registry_with_base / "index.json").read_text())
    assert (
        index.rewrites and index.rewrites[0].reason == "fixed a corrupt upload" and index.rewrites[0].path == state.path
    )
    assert (
        index.entries[0].sha256 == sha256_of(target) and index.entries[0].gate is None
    )  # the gate must run on the new bytes
    assert validate(registry_with_base) == []


def _state_entry(root: Path, base: Path, tmp_path: Path, name: str = "s.pth", seed: int = 1):
    return add_weight(
        root,
        AddRequest(
            make_state_file(tmp_path / name, SMALL, seed=seed),
            base_name(base),
            "state",
            "v1.41",
            train_json(tmp_path / "t.json"),
        ),
    )


def test_rewrite_runs_adds_acceptance_on_the_new_bytes(registry_with_base, small_base, tmp_path):
    state = _state_entry(registry_with_base, small_base, tmp_path)
    make_state_file(registry_with_base / state.path, OTHER_SPEC)  # a State of another base's shapes
    refuse(registry_with_base, allow_rewrite, registry_with_base, "retrained", code="state.wrong-base")


def test_rewrite_refuses_two_entries_with_one_sha256(registry_with_base, small_base, tmp_path):
    first = _state_entry(registry_with_base, small_base, tmp_path)
    second = _state_entry(registry_with_base, small_base, tmp_path, "s2.pth", seed=2)
    (registry_with_base / second.path).write_bytes((registry_with_base / first.path).read_bytes())
    refuse(registry_with_base, allow_rewrite, registry_with_base, "copied", code="entry.duplicate")


def test_rewrite_refreshes_miss_content_version_and_drops_old_results(registry_with_base, small_base, tmp_path):
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", SMALL, sha256_of(small_base))
    entry = add_weight(
        registry_with_base,
        AddRequest(adapter, base_name(small_base), "miss", "v2.1", train_json(tmp_path / "t.json"), run="r16"),
    )
    add_score(
        registry_with_base,
        entry.path,
        Score(benchmark="exam", value=52.2, date="2026-10-17", backend="rwkv_lightning 1.8.2"),
    )
    make_adapter_file(registry_with_base / entry.path, SMALL, sha256_of(small_base), seed=9)
    result = CliRunner().invoke(main, ["validate", str(registry_with_base), "--allow-rewrite", "retrained"])
    assert result.exit_code == 0, result.output
    assert f"dropped 1 result(s) of {entry.path}: measured on its old bytes" in result.output
    after = Index.model_validate_json((registry_with_base / "index.json").read_text()).entries[0]
    assert after.content_version and after.content_version != entry.content_version
    assert after.scores == [] and "52.2" not in (registry_with_base / "README.md").read_text()


def test_rewrite_of_a_converted_source_leads_through_its_twin(registry_with_base, small_base, tmp_path):
    state = _state_entry(registry_with_base, small_base, tmp_path)
    twin = convert_entry(registry_with_base, state.path, 1 << 40)
    original_twin = (registry_with_base / twin.path).read_bytes()
    make_state_file(registry_with_base / state.path, SMALL, seed=7)
    err = refuse(registry_with_base, allow_rewrite, registry_with_base, "retrained", code="rewrite.stale-twin")
    assert f"delete {twin.path}" in err.problem.fix and f"registry convert {state.path}" in err.problem.fix
    (registry_with_base / twin.path).unlink()
    done = allow_rewrite(registry_with_base, "retrained")
    assert any(f"dropped the stale twin {twin.path}" in note for note in done.notes)
    assert [e.path for e in Index.model_validate_json((registry_with_base / "index.json").read_text()).entries] == [
        state.path
    ]
    new_twin = convert_entry(registry_with_base, state.path, 1 << 40)
    assert (registry_with_base / new_twin.path).read_bytes() != original_twin
    assert validate(registry_with_base) == []


def test_rewrite_of_a_twin_is_refused(registry_with_base, small_base, tmp_path):
    state = _state_entry(registry_with_base, small_base, tmp_path)
    twin = convert_entry(registry_with_base, state.path, 1 << 40)
    data = bytearray((registry_with_base / twin.path).read_bytes())
    data[-1] ^= 0x01
    (registry_with_base / twin.path).write_bytes(bytes(data))
    err = refuse(registry_with_base, allow_rewrite, registry_with_base, "edited", code="rewrite.twin-changed")
    assert f"registry convert {state.path} --force" in err.problem.fix


def test_cli_add_list_json_and_errors(registry_with_base, small_base, tmp_path):
    runner = CliRunner()
    state = make_state_file(tmp_path / "s.pth", SMALL)
    ok = runner.invoke(
        main,
        [
            "add",
            str(state),
            "-C",
            str(registry_with_base),
            "--base",
            base_name(small_base),
            "--method",
            "state",
            "--data-version",
            "v1.41",
            "--train-json",
            str(train_json(tmp_path / "t.json")),
            "--json",
        ],
    )
    assert ok.exit_code == 0, ok.output
    listed = json.loads(runner.invoke(main, ["list", "-C", str(registry_with_base), "--json"]).output)
    assert [e["path"] for e in listed["entries"]] == [json.loads(ok.output)["path"]]
    bad = runner.invoke(
        main,
        [
            "add",
            str(state),
            "-C",
            str(registry_with_base),
            "--base",
            base_name(small_base),
            "--method",
            "miss",
            "--data-version",
            "v1.41",
            "--run",
            "r",
            "--train-json",
            str(tmp_path / "t.json"),
        ],
    )
    assert bad.exit_code == 3 and bad.output.startswith("error: ") and "fix:" in bad.output


def test_added_weight_is_not_read_again_by_the_next_check(registry_with_base, small_base, tmp_path, monkeypatch):
    """add hashed the file while copying it; the stat cache remembers that, so a later validate
    of a multi-GB weight costs a stat, not a read."""

    state = make_state_file(tmp_path / "s.pth", SMALL)
    old = time.time() - 60
    os.utime(state, (old, old))
    entry = add_weight(
        registry_with_base,
        AddRequest(state, base_name(small_base), "state", "v1.41", train_json(tmp_path / "t.json"), move=True),
    )
    hashed: list = []
    real = tree_module.hash_files
    monkeypatch.setattr(
        tree_module,
        "hash_files",
        lambda paths, progress=None, workers=None: hashed.extend(paths) or real(paths, progress, workers),
    )
    assert validate(registry_with_base) == []
    assert registry_with_base / entry.path not in hashed
