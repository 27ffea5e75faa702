"""What a careless pull request or a hostile file can slip past the tool (issue #30): hand edits
laundered into SHA256SUMS, duplicate JSON keys, a symlinked SHA256SUMS."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry.artifacts.synthetic import make_base_checkpoint, make_state_file
from registry.cli import main
from registry.core.gitattributes import lfs_problems
from registry.ops.add import AddRequest, add_weight
from registry.ops.export_hf import ExportRequest, export_hf
from registry.ops.validate import validate

from .conftest import SMALL, snapshot
from .test_export_hf import _relisted, hf_registry, world_base  # noqa: F401  (fixtures)
from .test_ops_artifacts import base_name, registry_with_base, train_json  # noqa: F401  (fixture)


def run(*args: str | Path):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def with_entry(registry_with_base, small_base, tmp_path):
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
    return registry_with_base, entry


# -- 2. no laundering of index.json ------------------------------------------------------------------------------


def _write_commands(root: Path, entry_path: str, base: str, tmp: Path) -> dict[str, list[str | Path]]:
    other_base = make_base_checkpoint(tmp / "rwkv7-tiny-b-20260101.pth", SMALL)
    state = make_state_file(tmp / "s2.pth", SMALL, seed=2)
    return {
        "add": [
            "add",
            state,
            "--base",
            base,
            "--method",
            "state",
            "--data-version",
            "v2.0",
            "--train-json",
            train_json(tmp / "t2.json"),
            "-C",
            root,
        ],
        "add-base": ["add-base", other_base, "-C", root],
        "score": [
            "score",
            entry_path,
            "--benchmark",
            "exam",
            "--value",
            "46.9",
            "--date",
            "2026-10-16",
            "--backend",
            "rwkv 0.8.32",
            "-C",
            root,
        ],
        "set": ["set", "title", "Another title", "-C", root],
        "describe": ["describe", entry_path, "--notes", "a note", "--lang", "en", "-C", root],
        "train-stage": ["train-stage", entry_path, "sft", "--gpus", "8", "-C", root],
        "eval-setup": ["eval-setup", "exam", "--items", "10", "-C", root],
        "card": ["card", root],
    }


@pytest.mark.parametrize(
    "command", ["add", "add-base", "score", "set", "describe", "train-stage", "eval-setup", "card"]
)
def test_a_hand_edit_of_index_json_is_refused_by_every_write_command(with_entry, small_base, tmp_path, command):
    root, entry = with_entry
    index = json.loads((root / "index.json").read_text(encoding="utf-8"))
    index["entries"][0]["notes"] = "edited by hand, outside the tool"
    (root / "index.json").write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert ("sums.mismatch", "index.json") in {(p.code, p.file) for p in validate(root)}
    before = snapshot(root)
    args = _write_commands(root, entry.path, base_name(small_base), tmp_path)[command]
    refused = run(*args, "--json")
    assert refused.exit_code == 3, refused.output
    problems = json.loads(refused.stdout)["problems"]
    assert problems[0]["code"] in {"sums.mismatch", "card.stale"} or problems[0]["file"] == "index.json"
    assert ("sums.mismatch", "index.json") in {(p["code"], p["file"]) for p in problems} or command == "card"
    assert snapshot(root) == before
    assert ("sums.mismatch", "index.json") in {
        (p.code, p.file) for p in validate(root)
    }  # still reported, never absorbed
    assert (
        run("sums", root).exit_code == 0 and run(*args).exit_code == 0
    )  # accepted on purpose, the command goes through


def test_a_hand_edit_of_the_card_is_taken_in_by_card_only(with_entry):
    root, _entry = with_entry
    card = root / "README.md"
    card.write_text(
        card.read_text(encoding="utf-8").replace("This part is maintained by hand", "Known to call itself Qwen"),
        encoding="utf-8",
    )
    before = snapshot(root)
    refused = run("set", "title", "Another title", "-C", root)
    assert refused.exit_code == 3 and "README.md" in refused.output and snapshot(root) == before
    assert run("card", root).exit_code == 0 and validate(root) == []
    assert "Known to call itself Qwen" in card.read_text(encoding="utf-8")


# -- 6. a symlinked SHA256SUMS ------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["/etc/passwd", "a true copy outside the registry"])
def test_sums_check_refuses_a_symlinked_sha256sums_as_validate_does(with_entry, tmp_path, target):
    root, _entry = with_entry
    sums = root / "SHA256SUMS"
    outside = Path(target) if target.startswith("/") else tmp_path / "SHA256SUMS.outside"
    if not target.startswith("/"):
        outside.write_bytes(sums.read_bytes())
    sums.unlink()
    os.symlink(outside, sums)
    before = snapshot(root)
    checked = run("sums", "--check", root, "--json")
    document = json.loads(checked.stdout)
    assert checked.exit_code == 1 and document["ok"] is False
    assert ("layout.symlink", "SHA256SUMS") in {(p["code"], p["file"]) for p in document["problems"]}
    human = run("sums", "--check", root)
    assert human.exit_code == 1 and "matches every file" not in human.output and "SHA256SUMS" in human.output
    assert ("layout.symlink", "SHA256SUMS") in {(p.code, p.file) for p in validate(root)}
    assert snapshot(root) == before


# -- 3. duplicate keys ---------------------------------------------------------------------------------------------


def test_an_index_json_with_a_key_twice_is_refused_not_read_with_the_last_value(with_entry):
    root, _entry = with_entry
    text = (root / "index.json").read_text(encoding="utf-8")
    (root / "index.json").write_text(
        text.rstrip()[:-1].rstrip() + ',\n  "entries": []\n}\n', encoding="utf-8"
    )  # the case
    run("sums", root)  # even once SHA256SUMS accepts the bytes
    before = snapshot(root)
    found = {(p.code, p.file): p for p in validate(root)}
    assert ("json.duplicate-key", "index.json") in found and '"entries"' in found[
        ("json.duplicate-key", "index.json")
    ].message
    for args in (["card", root], ["set", "title", "x", "-C", root], ["list", "-C", root]):
        refused = run(*args)
        assert (
            refused.exit_code == 3 and '"entries" appears twice' in refused.output and refused.output.count("\n") == 1
        ), refused.output
    assert snapshot(root) == before


def test_a_train_json_with_a_key_twice_is_refused_by_add_and_by_validate(with_entry, small_base, tmp_path):
    root, entry = with_entry
    twice = tmp_path / "twice.json"
    twice.write_text(train_json(tmp_path / "t.json").read_text()[:-1] + ', "command": "something else"}')
    before = snapshot(root)
    refused = run(
        "add",
        make_state_file(tmp_path / "s2.pth", SMALL, seed=2),
        "--base",
        base_name(small_base),
        "--method",
        "state",
        "--data-version",
        "v2.0",
        "--train-json",
        twice,
        "-C",
        root,
    )
    assert refused.exit_code == 3 and '"command" appears twice' in refused.output and str(twice) in refused.output
    assert snapshot(root) == before
    placed = root / Path(entry.path).parent / "train.json"
    placed.write_text(twice.read_text())
    assert ("json.duplicate-key", placed.relative_to(root).as_posix()) in {(p.code, p.file) for p in validate(root)}


def test_a_transformers_export_config_with_a_key_twice_fails_validate(hf_registry):
    root, entry = hf_registry
    export = export_hf(root, ExportRequest(entry=entry.path))
    config = root / export.path / "config.json"
    config.write_text(
        config.read_text().replace('"intermediate_size": 512', '"intermediate_size": 512, "intermediate_size": 256')
    )
    _relisted(root, f"{export.path}/config.json")  # index.json and SHA256SUMS made to agree, as a pull request could
    messages = [p.message for p in validate(root) if p.file == export.path]
    assert any('"intermediate_size" appears twice' in m for m in messages), messages


# -- 4. .gitattributes as git reads it (the pure core; tests/test_publish_integrity.py runs it through validate) -----


@pytest.mark.parametrize(
    ("text", "out_of_lfs"),
    [
        ("*.pth filter=lfs diff=lfs merge=lfs -text\n*.safetensors filter=lfs diff=lfs merge=lfs -text\n", set()),
        ("*.pth filter=lfs\n", {"b/state/v1/hf/s/initial_state.safetensors"}),
        (
            "*.pth filter=lfs\n*.safetensors filter=lfs\nb/state/** -filter\n",
            {"b/state/v1/s.pth", "b/state/v1/hf/s/initial_state.safetensors"},
        ),
        (
            "*.pth filter=lfs\n*.safetensors filter=lfs\n/s.pth !filter\n",
            set(),
        ),  # anchored at the root: no weight there
        ("*.pth filter=lfs\n*.safetensors filter=lfs\ns.pth filter=other\n", {"b/state/v1/s.pth"}),
        ("# comment\n[attr]binary -diff -merge -text\nb/**/*.pth filter=lfs\n*.safetensors filter=lfs\n", set()),
        (
            "b/*.pth filter=lfs\n*.safetensors filter=lfs\n",
            {"b/state/v1/s.pth", "b/full/v1/r/big.pth"},
        ),  # * stays in one component
    ],
)
def test_gitattributes_rules_follow_git(text, out_of_lfs):
    weights = ["b/state/v1/s.pth", "b/full/v1/r/big.pth", "b/state/v1/hf/s/initial_state.safetensors"]
    assert {p.file for p in lfs_problems(text, weights)} == out_of_lfs
    assert [p.code for p in lfs_problems(None, weights)] == ["gitattributes.missing"] and list(
        lfs_problems(None, [])
    ) == []


def _check_attr(root: Path, *paths: str) -> dict[str, str]:
    """git's own answer: the ``filter`` attribute of each path."""
    out = subprocess.run(
        ["git", "check-attr", "filter", "--", *paths], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    return {line.split(": ")[0]: line.split(": ")[-1] for line in out.splitlines()}


def test_init_routes_every_binary_kind_through_lfs_as_git_reads_it(empty_registry):
    subprocess.run(["git", "init", "-q"], cwd=empty_registry, check=True)
    binaries = [
        "b/b.pth",
        "b/full/v1/model.safetensors",
        "b/gguf/b-Q8_0.gguf",
        "b/full/v1/gguf/rwkv-final-F16.gguf",
        "b/hf/model-00001-of-00002.safetensors",
    ]
    assert _check_attr(empty_registry, *binaries, "index.json", "README.md") == {
        **dict.fromkeys(binaries, "lfs"),
        "index.json": "unspecified",
        "README.md": "unspecified",
    }


def test_a_gitattributes_without_the_gguf_rule_is_found_and_its_fix_works_as_written(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    old = (
        "*.pth filter=lfs diff=lfs merge=lfs -text\n*.safetensors filter=lfs diff=lfs merge=lfs -text\n*.gguf -filter\n"
    )
    gguf = "b/gguf/b-Q8_0.gguf"
    (problem,) = lfs_problems(old, ["b/b.pth", gguf])
    assert (problem.code, problem.file) == ("gitattributes.no-lfs", gguf)
    (tmp_path / ".gitattributes").write_text(old)
    assert _check_attr(tmp_path, gguf) == {gguf: "unset"}
    line = problem.fix.split("`")[1]  # the fix names the line to add: adding it is enough, for git and for validate
    assert line == "*.gguf filter=lfs diff=lfs merge=lfs -text" and "registry sums" in problem.fix
    (tmp_path / ".gitattributes").write_text(old + line + "\n")
    assert (
        _check_attr(tmp_path, gguf) == {gguf: "lfs"} and list(lfs_problems(old + line + "\n", ["b/b.pth", gguf])) == []
    )
    (missing,) = lfs_problems(None, [gguf])
    assert "`*.gguf filter=lfs diff=lfs merge=lfs -text`" in missing.fix
