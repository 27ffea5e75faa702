"""Existing Hub repos: registries found from any subfolder, init beside kept files, the root files
users keep, Git LFS pointers, ``registry adopt`` of hand-made repos and the way back from a
Hub-side change (issue 27).

The hand-made repos are built the way people build them: files placed with plain writes and
``cp``, SHA256SUMS by coreutils' ``sha256sum``, a hand-written index.json and README.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from huggingface_hub import HfApi

from registry.artifacts.inspect import inspect_weights
from registry.artifacts.synthetic import TinySpec, make_adapter_file, make_base_checkpoint, make_state_file
from registry.cli import main
from registry.core.published import record_published
from registry.core.repo import Repo
from registry.core.sums import parse_sums
from registry.index.catalog import load_catalog
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.init import init_registry
from registry.ops.sums import write_sums
from registry.ops.validate import validate

from .conftest import SMALL, sha256_of, snapshot
from .test_artifacts_miss import MarkerPayload
from .test_ops_artifacts import train_json
from .test_publish import REPO, gate_all

pytest_plugins = ["tests.hubserver"]  # the hub_server fixture


def run(*args, code: int | None = None):
    result = CliRunner().invoke(main, [str(a) for a in args])
    if code is not None:
        assert result.exit_code == code, result.output
    _adopted_is_valid(args, result.exit_code)
    return result


def _adopted_is_valid(args: tuple, exit_code: int) -> None:
    """Issue 37: an adopt that exits 0 leaves a registry validate accepts, in every test that adopts."""
    words = [str(a) for a in args]
    if exit_code == 0 and words[:1] == ["adopt"] and "--dry-run" not in words:
        folder = next((Path(w) for w in words[1:] if not w.startswith("-") and Path(w).is_dir()), Path.cwd())
        assert validate(folder) == [], words


def codes(root: Path) -> set[str]:
    return {p.code for p in validate(root)}


# -- item 4: the registry is found from any subfolder ------------------------------------------------------------


def test_commands_find_the_registry_from_a_subfolder(empty_registry, monkeypatch):
    sub = empty_registry / "docs" / "notes"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert "registry is valid" in run("validate", code=0).output  # found above, not "index.json is missing"
    (sub / "x.md").write_text("a note\n")
    write_sums(sub)  # finds the root, lists docs/notes/x.md
    assert "docs/notes/x.md" in (empty_registry / "SHA256SUMS").read_text()
    result = run("validate", code=0)
    assert "registry is valid" in result.output
    assert run("list", "--json", code=0).exit_code == 0


def test_no_registry_found_never_advises_a_nested_one(tmp_path, monkeypatch):
    folder = tmp_path / "clone"
    (folder / "sub").mkdir(parents=True)
    (folder / ".git").mkdir()
    (folder / "README.md").write_text("hand-made\n")
    monkeypatch.chdir(folder / "sub")
    result = run("validate", code=1)
    assert "layout.empty" in result.output and "registry init" in result.output
    result = run("validate", folder, code=1)
    assert "layout.no-index" in result.output and f"registry adopt {folder}" in result.output


def test_the_walk_stops_at_the_top_of_a_git_checkout(tmp_path):
    outer = init_registry(tmp_path / "outer").root
    clone = outer / "docs" / "clone"
    clone.mkdir(parents=True)
    (clone / ".git").mkdir()
    assert [p.code for p in validate(clone)] == ["layout.no-index"]  # its own, not the outer registry's


def test_init_refuses_inside_a_registry(empty_registry):
    before = snapshot(empty_registry)
    result = run("init", empty_registry / "rwkv7-x" / "state", code=3)
    assert "init.inside-registry" not in result.output  # the code is for --json; the line names the registry
    assert f"inside the registry at {empty_registry}" in result.output
    assert snapshot(empty_registry) == before and not (empty_registry / "rwkv7-x").exists()


# -- item 5: init beside the files it keeps ----------------------------------------------------------------------


def test_init_keeps_readme_license_and_git_files_and_ignores_the_private_folder(tmp_path):
    root = tmp_path / "clone"
    root.mkdir()
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("*.tmp")  # no final newline: extended, not replaced
    (root / ".gitattributes").write_text("*.bin filter=lfs diff=lfs merge=lfs -text\n")
    (root / ".pre-commit-config.yaml").write_text("repos: []\n")
    (root / "LICENSE").write_text("Apache License 2.0\n")
    readme = "# My weights\n\nA long hand-written README with | a | table |\n"
    (root / "README.md").write_text(readme)
    run("init", root, code=0)
    assert (root / ".gitignore").read_text() == "*.tmp\n.registry/\n"
    attributes = (root / ".gitattributes").read_text()
    assert (
        attributes.startswith("*.bin filter=lfs")
        and "*.pth filter=lfs" in attributes
        and "*.safetensors filter=lfs" in attributes
    )
    card = (root / "README.md").read_text()
    assert readme in card  # the whole text, as the card's hand-written section
    assert "LICENSE" in (root / "SHA256SUMS").read_text()
    assert codes(root) == set()
    assert run("card", "--check", "-C", root).exit_code == 0
    run("init", tmp_path / "again", code=0)
    assert (tmp_path / "again" / ".gitignore").read_text() == ".registry/\n"
    shared_receipts = ".registry/*\n!.registry/gates/\n"  # docs/ci.md's choice: left as the user wrote it
    (tmp_path / "third").mkdir()
    (tmp_path / "third" / ".gitignore").write_text(shared_receipts)
    run("init", tmp_path / "third", code=0)
    assert (tmp_path / "third" / ".gitignore").read_text() == shared_receipts


def test_init_refuses_other_files_and_points_at_adopt(tmp_path):
    root = tmp_path / "clone"
    root.mkdir()
    (root / "README.md").write_text("x\n")
    (root / "model.pth").write_bytes(b"weights")
    before = snapshot(root)
    result = run("init", root, code=3)
    assert "model.pth" in result.output and f"registry adopt {root}" in result.output
    assert snapshot(root) == before and not (root / ".registry").exists()


# -- item 3: root files users keep -------------------------------------------------------------------------------


def test_license_notice_citation_and_docs_are_kept_and_listed(empty_registry):
    for name in ("LICENSE", "LICENSE.md", "NOTICE", "CITATION.cff"):
        (empty_registry / name).write_text(f"{name}\n")
    (empty_registry / "docs" / "evaluations").mkdir(parents=True)
    (empty_registry / "docs" / "evaluations" / "exam-v21-20261017.md").write_text("# report\n")
    write_sums(empty_registry)
    listed = (empty_registry / "SHA256SUMS").read_text()
    assert "docs/evaluations/exam-v21-20261017.md" in listed and "CITATION.cff" in listed
    assert codes(empty_registry) == set()
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=empty_registry, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


def test_unknown_root_files_are_refused_with_a_fix_that_fits_them(empty_registry):
    (empty_registry / "notes.txt").write_text("x\n")
    (empty_registry / "stray.pth").write_bytes(b"x")
    (empty_registry / "papers").mkdir()
    (empty_registry / "papers" / "a.pdf").write_bytes(b"%PDF")
    found = {p.file: p for p in validate(empty_registry) if p.code.startswith("layout.")}
    assert "docs/" in found["notes.txt"].fix and "registry add" in found["stray.pth"].fix
    assert found["papers/a.pdf"].code == "layout.unknown-base-dir" and "add-base" not in found["papers/a.pdf"].fix


# -- item 7: Git LFS pointers ------------------------------------------------------------------------------------


def lfs_pointer(path: Path) -> bytes:
    """What git writes in place of ``path`` when git-lfs is not installed (the spec's three lines)."""
    data = path.read_bytes()

    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(data).hexdigest()}\nsize {len(data)}\n"
    ).encode()


def test_an_lfs_pointer_is_named_once_with_git_lfs_pull_never_allow_rewrite(empty_registry, small_base, tmp_path):
    root = empty_registry
    add_base(root, BaseRequest(path=small_base, filename=small_base.name))
    state = make_state_file(tmp_path / "s1.pth", SMALL)
    entry = add_weight(root, AddRequest(state, small_base.stem, "state", "v1.41", train_json(tmp_path / "t.json")))
    record_published(Repo(root), parse_sums((root / "SHA256SUMS").read_bytes()))
    (root / entry.path).write_bytes(lfs_pointer(root / entry.path))
    before = snapshot(root)

    assert [(p.code, p.file) for p in validate(root)] == [("lfs.pointer", entry.path)]
    assert (
        "pointer mode: 1 file(s)" in run("validate", "-C", root).output
    )  # the pointer's oid and size are the file's (issue 44)
    for args in (
        ["validate", "-C", root, "--require-bytes"],
        ["validate", "-C", root, "--allow-rewrite", "why"],
        ["sums", "-C", root],
        ["convert", entry.path, "-C", root],
    ):
        result = run(*args)
        assert result.exit_code in (1, 3), (args, result.output)
        assert f"{entry.path}: a Git LFS pointer, not the file; fix: git lfs pull" in result.output, (
            args,
            result.output,
        )
        assert "allow-rewrite" not in result.output.replace("--allow-rewrite why", ""), (args, result.output)
    pointer = tmp_path / "pointer.pth"
    pointer.write_bytes((root / entry.path).read_bytes())
    result = run(
        "add",
        pointer,
        "-C",
        root,
        "--base",
        small_base.stem,
        "--method",
        "state",
        "--data-version",
        "v1.42",
        "--train-json",
        tmp_path / "t.json",
        code=3,
    )
    assert result.output.strip().endswith("a Git LFS pointer, not the file; fix: git lfs pull")
    base_pointer = tmp_path / "rwkv7-tiny-b-20260101.pth"
    base_pointer.write_bytes(lfs_pointer(small_base))
    result = run("add-base", base_pointer, "-C", root, code=3)
    assert result.output == f"error: {base_pointer}: a Git LFS pointer, not the file; fix: git lfs pull\n"
    result = run("smoke", entry.path, "-C", root, "--device", "cpu", "--base-file", base_pointer, code=3)
    assert result.output.endswith(f"error: {base_pointer}: a Git LFS pointer, not the file; fix: git lfs pull\n"), (
        result.output
    )
    assert snapshot(root) == before


# -- item 1: registry adopt --------------------------------------------------------------------------------------

BASE = "rwkv7-tiny-adopt-20260930"
RUNS = ("r16-lr2e-5-e2", "r16-lr1e-5-e2", "r16-lr3e-5-e2")
STATE = f"{BASE}/state/v1.41/v141b-s1224.pth"
MISS = [f"{BASE}/miss/v2.1/{run}/adapter-final.pth" for run in RUNS]
FULL = f"{BASE}/full/v1/rwkv-final.pth"
DATA_STATE, DATA_MISS = "feb2fd6b" * 8, "2fbf6760" * 8
README_001 = """# RWKV-Agent 权重（State 与 MiSS 适配器）

RWKV-Agent 在 RWKV-7 基模上训出的两种轻量权重。

| 路径 | 方法 | 说明 |
|---|---|---|
| state/v1.41/v141b-s1224.pth | State | State 推荐 |
| miss/v2.1/r16-lr2e-5-e2/adapter-final.pth | MiSS r16 | MiSS 推荐 |

完整报告见 docs/evaluations/。本仓库尚未指定许可证。
"""
README_000 = """---
license: apache-2.0
language:
- zh
---
# RWKV Novel Agent (tiny)

This is an experimental full fine-tune. Use it for research and evaluation rather than production.
"""


def sh(command: str, cwd: Path) -> None:
    """A shell command, as the person making the repo by hand would type it."""
    subprocess.run(command, shell=True, cwd=cwd, check=True, executable="/bin/bash")


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> Path:
    """What the person has before making the repo: a base, a State, three MiSS runs, a full fine-tune."""

    d = tmp_path_factory.mktemp("parts")
    base = make_base_checkpoint(d / f"{BASE}.pth", SMALL)
    make_state_file(d / "v141b-s1224.pth", SMALL, seed=5)
    for i, run in enumerate(RUNS):
        make_adapter_file(d / f"{run}.pth", SMALL, sha256_of(base), seed=10 + i)
    other = TinySpec(n_layer=3, n_embd=128, vocab_size=512)
    make_state_file(d / "other-base-state.pth", other, seed=6)
    make_adapter_file(d / "other-base-adapter.pth", SMALL, "0" * 64, seed=7)
    tensors = torch.load(base, weights_only=True)
    tensors["emb.weight"] = tensors["emb.weight"] + 1  # fine-tuned
    torch.save(tensors, d / "rwkv-final.pth")
    (d / "content_versions.json").write_text(
        json.dumps({run: inspect_weights(d / f"{run}.pth").miss.content_version for run in RUNS})
    )
    return d


def train(data_sha: str, trainer: str) -> str:
    return json.dumps(
        {
            "trainer": {"name": trainer, "version": "1.8.1"},
            "hyperparameters": {"lr_init": 0.01},
            "command": trainer,
            "data_sha256": data_sha,
        },
        indent=2,
    )


def hand_index(parts: Path) -> dict:
    base_sha = sha256_of(parts / f"{BASE}.pth")
    versions = json.loads((parts / "content_versions.json").read_text())
    miss = [
        {
            "path": path,
            "method": "miss",
            "base_sha256": base_sha,
            "data": {"version": "v2.1", "sha256": DATA_MISS, "rows": 5512},
            "sha256": sha256_of(parts / f"{run}.pth"),
            "content_version": versions[run],
            "recommended": run == "r16-lr2e-5-e2",
        }
        for run, path in zip(RUNS, MISS, strict=True)
    ]
    miss[0]["scores"] = [
        {
            "benchmark": "exam",
            "value": 52.2,
            "count": 296.5,
            "unit": "%",
            "date": "2026-10-17",
            "backend": "App harness",
            "runs": 2,
        }
    ]
    miss[1]["scores"] = [
        {"benchmark": "exam", "value": 51.3, "date": "2026-10-17", "note": "与 2e-5 分不出"}
    ]  # no backend: cannot map
    return {
        "bases": [
            {
                "dir": BASE,
                "source": "BlinkDL/rwkv7-g1",
                "filename": f"{BASE}.pth",
                "sha256": base_sha,
                "vocab": "rwkv_vocab_v20230424.txt",
            }
        ],
        "entries": [
            {
                "path": STATE,
                "method": "state",
                "base_sha256": base_sha,
                "data": {"version": "v1.41", "sha256": DATA_STATE, "rows": 3662},
                "sha256": sha256_of(parts / "v141b-s1224.pth"),
                "recommended": True,
                "scores": [
                    {"benchmark": "exam", "value": 46.9, "date": "2026-10-16", "backend": "App harness", "runs": 2}
                ],
            },
            *miss,
        ],
        "evaluations": "docs/evaluations/",
    }


def make_seed_001(parts: Path, folder: Path, index: dict | None = None) -> Path:
    """Seed 001's repo as its author made it: cp, a hand-written index.json, README, sha256sum."""
    folder.mkdir(parents=True)
    (folder / ".git").mkdir()
    sh(
        f"mkdir -p {BASE}/state/v1.41 {BASE}/miss/v2.1 docs/evaluations && "
        f"cp {parts}/v141b-s1224.pth {BASE}/state/v1.41/",
        folder,
    )
    for run in RUNS:
        sh(f"mkdir -p {BASE}/miss/v2.1/{run} && cp {parts}/{run}.pth {BASE}/miss/v2.1/{run}/adapter-final.pth", folder)
    (folder / BASE / "state/v1.41/train.json").write_text(train(DATA_STATE, "rwkv_state_tune"))
    (folder / BASE / "miss/v2.1/train.json").write_text(train(DATA_MISS, "rwkv_miss_tune"))
    (folder / "docs/evaluations/exam-v21-20261017.md").write_text("# exam v2.1\n\n568 题\n")
    (folder / "CITATION.cff").write_text("cff-version: 1.2.0\ntitle: RWKV-Agent weights\n")
    (folder / "index.json").write_text(json.dumps(index or hand_index(parts), indent=2, ensure_ascii=False))
    (folder / "README.md").write_text(README_001)
    (folder / ".gitattributes").write_text("*.pth filter=lfs diff=lfs merge=lfs -text\n")
    sh("find * -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS", folder)
    return folder


def make_seed_000(parts: Path, folder: Path) -> Path:
    """Seed 000's repo: a raw full .pth fine-tune (placed in the layout), its train.json, a README, a LICENSE."""
    folder.mkdir(parents=True)
    sh(f"mkdir -p {BASE}/full/v1 && cp {parts}/rwkv-final.pth {BASE}/full/v1/", folder)
    (folder / BASE / "full/v1/train.json").write_text(train("ab" * 32, "RWKV-LM"))
    (folder / "README.md").write_text(README_000)
    (folder / "LICENSE").write_text("Apache License, Version 2.0\n")
    return folder


def adopt_json(folder: Path, *args, code: int = 0) -> dict:
    result = CliRunner().invoke(main, ["adopt", str(folder), "--json", *map(str, args)])
    assert result.exit_code == code, result.output
    _adopted_is_valid(("adopt", folder, *args), result.exit_code)
    return json.loads(result.stdout)


def test_seed_001_adopted_then_published_pulled_and_verified(parts, tmp_path, hub_server):
    folder = make_seed_001(parts, tmp_path / "agent-weights")
    originals = snapshot(folder)
    report = adopt_json(folder, "--base-file", parts / f"{BASE}.pth")

    assert [e["path"] for e in report["entries"]] == sorted([STATE, *MISS])
    recommended = {e["path"] for e in report["entries"] if e["recommended"]}
    assert recommended == {STATE, MISS[0]}
    assert any("$.evaluations" in line for line in report["unmapped"]) and any(
        "data.rows" in line for line in report["unmapped"]
    )
    assert any(
        line.startswith("$.entries[2].scores[0]: ") and line.endswith("lacks backend)") for line in report["unmapped"]
    )  # named, not a command with a blank
    assert not any(step.startswith("registry score") for step in report["next_steps"])
    assert report["overridden"] == [] and report["readme"].startswith("kept whole")
    index = json.loads((folder / "index.json").read_text())
    assert [b["source"] for b in index["bases"]] == ["BlinkDL/rwkv7-g1"] and index["bases"][0][
        "vocab"
    ] == "rwkv_vocab_v20230424.txt"
    scored = {e["path"]: [s["value"] for s in e["scores"]] for e in index["entries"]}
    assert scored[STATE] == [46.9] and scored[MISS[0]] == [52.2] and scored[MISS[1]] == []
    assert {e["path"]: e["data"]["sha256"] for e in index["entries"]}[STATE] == DATA_STATE
    # Nothing of the hand-made repo is lost: every weight, train.json and doc as it was, the README
    # whole in the card, the hand-written index and SHA256SUMS kept in the private folder.
    now = snapshot(folder)
    for rel, data in originals.items():
        if rel not in ("index.json", "README.md", "SHA256SUMS", ".gitattributes"):
            assert now[rel] == data, rel
    assert README_001 in now["README.md"].decode()
    assert (folder / ".registry/adopted/index.json").read_bytes() == originals["index.json"]
    assert (folder / ".gitignore").read_text() == ".registry/\n"
    assert codes(folder) == set()
    assert run("card", "--check", "-C", folder).exit_code == 0
    check = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=folder, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout

    gate_all(folder)
    run("publish", "--repo-id", REPO, "-C", folder, "--allow-cpu-gate", code=0)
    pulled = tmp_path / "pulled"
    run("pull", "--repo-id", REPO, pulled, code=0)
    assert snapshot(pulled) == {
        rel: data for rel, data in snapshot(folder).items() if not rel.startswith(".git/") and rel != ".gitignore"
    }  # .gitignore stays local
    assert {"CITATION.cff", "docs/evaluations/exam-v21-20261017.md"} <= set(
        hub_server.files(REPO)
    )  # root files users keep
    assert run("verify-remote", "--repo-id", REPO, "-C", folder, code=0).exit_code == 0
    assert adopt_json(pulled, code=3)["problems"][0]["code"] == "adopt.already-a-registry"


def test_seed_000_full_fine_tune_with_an_english_readme_and_license(parts, tmp_path):
    folder = make_seed_000(parts, tmp_path / "novel-agent")
    report = adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    assert [(e["path"], e["method"]) for e in report["entries"]] == [(FULL, "full")]
    index = json.loads((folder / "index.json").read_text())
    assert index["registry"]["languages"] == ["en"] and index["registry"]["license"] == "apache-2.0"
    assert index["registry"]["title"] == "RWKV Novel Agent (tiny)"
    card = (folder / "README.md").read_text()
    assert (
        "This is an experimental full fine-tune." in card and "language:\n- zh" in card
    )  # the old front matter, kept in a comment
    assert "LICENSE" in (folder / "SHA256SUMS").read_text() and codes(folder) == set()
    assert not any("registry set license" in step for step in report["next_steps"])
    assert any(step.startswith("registry smoke") for step in report["next_steps"])


def test_dry_run_prints_the_plan_and_changes_nothing(parts, tmp_path):
    folder = make_seed_001(parts, tmp_path / "agent-weights")
    before = snapshot(folder)
    result = run("adopt", folder, "--base-file", parts / f"{BASE}.pth", "--dry-run", code=0)
    assert (
        f"would adopt {folder}: 1 base(s), 4 entries" in result.output
        and "NOT mapped" in result.output
        and "registry smoke" in result.output
    )
    assert (
        "would write: .gitattributes, .gitignore, .registry/adopted/README.md, .registry/adopted/SHA256SUMS, "
        ".registry/adopted/index.json, README.md, SHA256SUMS, evaluation.json, index.json" in result.output
    )
    assert snapshot(folder) == before and not (folder / ".registry").exists()


def test_files_win_over_the_hand_written_index_only_with_trust_files(parts, tmp_path):
    index = hand_index(parts)
    index["entries"][0]["sha256"] = "f" * 64
    index["entries"][1]["data"]["sha256"] = "e" * 64
    folder = make_seed_001(parts, tmp_path / "agent-weights", index)
    before = snapshot(folder)
    result = run("adopt", folder, "--base-file", parts / f"{BASE}.pth", code=3)
    lines = result.output.splitlines()
    assert len(lines) == 2 and all(
        line.startswith("error: index.json: $.entries[") and "--trust-files" in line for line in lines
    )
    assert snapshot(folder) == before and not (folder / ".registry").exists()
    report = adopt_json(folder, "--base-file", parts / f"{BASE}.pth", "--trust-files")
    assert len(report["overridden"]) == 2 and codes(folder) == set()


def _sums_mismatch(folder: Path, parts: Path) -> None:
    (folder / BASE / "state/v1.41/train.json").write_text(train(DATA_STATE, "rwkv_state_tune (edited after sha256sum)"))


def _swap(rel: str, name: str):
    def change(folder: Path, parts: Path) -> None:
        sh(f"cp {parts}/{name} {rel}", folder)
        sh("find * -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS", folder)

    return change


def _unsafe_pickle(folder: Path, parts: Path) -> None:
    torch.save({"blocks.0.att.time_state": MarkerPayload(folder.parent / "pwned")}, folder / STATE)
    sh("find * -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS", folder)


def _not_json(folder: Path, parts: Path) -> None:
    (folder / "index.json").write_text('{"bases": [,]}\n')
    sh("find * -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS", folder)


def _lfs_pointer(folder: Path, parts: Path) -> None:
    (folder / MISS[2]).write_bytes(lfs_pointer(folder / MISS[2]))


BAD = [
    ("sums-mismatch", _sums_mismatch, True, f"error: {BASE}/state/v1.41/train.json: sha256 is "),
    ("unknown-base", None, False, f"error: {BASE}/: {BASE}.pth is not in the known-bases catalog"),
    ("state-of-another-base", _swap(STATE, "other-base-state.pth"), True, f"error: {STATE}: State has 3 layers"),
    (
        "miss-for-another-base",
        _swap(MISS[1], "other-base-adapter.pth"),
        True,
        f"error: {MISS[1]}: adapter was trained on base 0000",
    ),
    ("unsafe-pickle", _unsafe_pickle, True, f"error: {STATE}: "),
    ("index-not-json", _not_json, True, "error: index.json:1:12: malformed JSON"),
    ("lfs-pointer", _lfs_pointer, True, f"error: {MISS[2]}: a Git LFS pointer, not the file; fix: git lfs pull"),
]


@pytest.mark.parametrize(("name", "damage", "with_base", "line"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_the_folder_stays_byte_identical(parts, tmp_path, name, damage, with_base, line):
    folder = make_seed_001(
        parts,
        tmp_path / "agent-weights",
        hand_index(parts) if name not in ("state-of-another-base", "miss-for-another-base") else {"bases": []},
    )
    if damage:
        damage(folder, parts)
    before = snapshot(folder)
    result = run("adopt", folder, *(["--base-file", parts / f"{BASE}.pth"] if with_base else []), code=3)
    assert result.output.startswith(line) and result.output.count("\n") == 1 and "; fix: " in result.output, (
        result.output
    )
    assert snapshot(folder) == before and not (folder / ".registry").exists()
    assert not (folder.parent / "pwned").exists()


def test_a_weight_at_the_root_without_train_json_is_refused_saying_what_to_write(parts, tmp_path):
    folder = tmp_path / "raw"
    folder.mkdir()
    sh(f"cp {parts}/rwkv-final.pth . && echo '# raw' > README.md", folder)
    result = run("adopt", folder, code=3)
    assert (
        result.output.startswith("error: train.json: rwkv-final.pth sits at the root with no train.json")
        and "write train.json at the root" in result.output
    )
    assert not (folder / ".registry").exists()


# -- item 2: pull of a repo that is not a registry yet -----------------------------------------------------------


def test_pull_adopts_a_hand_made_repo_or_says_how_in_one_line(parts, tmp_path, hub_server):
    folder = make_seed_001(parts, tmp_path / "made-by-hand")
    api = HfApi()
    api.create_repo("no-22/agent-weights")
    api.upload_folder(folder_path=str(folder), repo_id="no-22/agent-weights", ignore_patterns=[".git/*"])

    result = run("pull", "--repo-id", "no-22/agent-weights", tmp_path / "p", code=3)
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert errors == [
        f"error: {BASE}/: {BASE}.pth is not in the known-bases catalog, so the weights under {BASE}/ cannot "
        f"be checked against it; fix: pass --base-file {BASE}.pth (read, not copied)"
    ]
    assert not (tmp_path / "p").exists() and not [p for p in tmp_path.iterdir() if ".pull-" in p.name]

    pulled = json.loads(
        run(
            "pull",
            "--repo-id",
            "no-22/agent-weights",
            tmp_path / "p",
            "--base-file",
            parts / f"{BASE}.pth",
            "--json",
            code=0,
        ).stdout
    )
    assert pulled["adopted"]["registry"] == str(tmp_path / "p") and len(pulled["adopted"]["entries"]) == 4
    assert all(str(tmp_path / "p") in step for step in pulled["adopted"]["next_steps"] if " -C " in step)
    assert codes(tmp_path / "p") == set()
    # The repo it came from is recorded: publish needs no --repo-id, and the next step says so.
    assert json.loads((tmp_path / "p" / "index.json").read_text())["registry"]["repo_id"] == "no-22/agent-weights"
    assert pulled["adopted"]["next_steps"][-1] == f"registry publish -C {tmp_path / 'p'}"
    # The Hub's weights are recorded as published: changing one is an immutability finding.
    published = (tmp_path / "p" / ".registry/published/SHA256SUMS").read_text()
    assert STATE in published


# -- item 6: the way back from a change made on the Hub ----------------------------------------------------------


def test_publish_restore_puts_the_registry_bytes_back_after_a_hub_side_change(parts, tmp_path, hub_server):
    folder = make_seed_001(parts, tmp_path / "agent-weights")
    adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    gate_all(folder)
    run("publish", "--repo-id", REPO, "-C", folder, "--allow-cpu-gate", code=0)
    HfApi().upload_file(path_or_fileobj=b"\0changed on the Hub", path_in_repo=STATE, repo_id=REPO)
    before = snapshot(folder)

    found = json.loads(run("verify-remote", "--repo-id", REPO, "-C", folder, "--json", code=1).stdout)["problems"]
    mismatch = [p for p in found if p["code"] == "remote.mismatch"]
    assert [p["file"] for p in mismatch] == [STATE] and "registry publish --restore" in mismatch[0]["fix"]
    refused = run("publish", "--repo-id", REPO, "-C", folder, "--allow-cpu-gate", code=3)
    assert (
        f"error: {STATE}: already on the Hub with other bytes" in refused.output
        and "registry publish --restore" in refused.output
    )
    assert "--allow-rewrite" not in refused.output
    commits = hub_server.commits_made

    restored = json.loads(
        run("publish", "--repo-id", REPO, "-C", folder, "--allow-cpu-gate", "--restore", "--json", code=0).stdout
    )
    assert restored["plan"]["upload"]["files"] == 1 and hub_server.commits_made == commits + 1
    assert hub_server.files(REPO) == {
        rel: data for rel, data in snapshot(folder).items() if not rel.startswith(".git/") and rel != ".gitignore"
    }
    assert snapshot(folder) == before
    assert json.loads(run("verify-remote", "--repo-id", REPO, "-C", folder, "--json", code=0).stdout)["ok"]


def test_catalog_and_metadata_only_bases_need_the_base_file_to_check_weights(parts, tmp_path):
    known = load_catalog().bases[0]
    folder = tmp_path / "catalog"
    folder.mkdir()
    sh(f"mkdir -p {known.name}/state/v1.41 && cp {parts}/v141b-s1224.pth {known.name}/state/v1.41/", folder)
    (folder / known.name / "state/v1.41/train.json").write_text(train(DATA_STATE, "rwkv_state_tune"))
    before = snapshot(folder)
    result = run("adopt", folder, code=3)
    assert (
        result.output
        == f"error: {known.name}/state/v1.41/v141b-s1224.pth: the base {known.name} was not read, so its shapes "
        f"are unknown and this weight cannot be checked; fix: pass --base-file {known.filename} (read, not "
        "copied)\n"
    )
    unknown = make_seed_001(parts, tmp_path / "unknown")
    result = run("adopt", unknown, "--sha256", "ab" * 32, "--metadata-only", code=3)
    assert "was not read, so its shapes are unknown" in result.output and "pass --base-file" in result.output
    assert snapshot(folder) == before and not (folder / ".registry").exists()


def test_a_symlinked_sha256sums_is_never_followed(parts, tmp_path):
    folder = make_seed_001(parts, tmp_path / "linked")
    outside = tmp_path / "outside-SHA256SUMS"
    (folder / "SHA256SUMS").rename(outside)
    (folder / "SHA256SUMS").symlink_to(outside)
    result = run("adopt", folder, "--base-file", parts / f"{BASE}.pth", code=3)
    assert result.output.startswith("error: SHA256SUMS: is a symlink")
    assert not (folder / ".registry").exists()
