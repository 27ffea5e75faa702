"""``registry dataset adopt``: seed 002's dataset repo, built as its author built it, adopted in place.

The fixture is what No-22/rwkv-agent-distill's author did: the packer's folders copied under their
version names with shell commands, facts written by hand into each release-manifest.json,
SHA256SUMS from ``sha256sum``, a README in the seed's words.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from huggingface_hub import HfApi

import registry.ops.validate_dataset as validating
from registry.cli import main
from registry.core.names import JOURNAL_NAME, PRIVATE_DIR, RELEASE_MANIFEST, STAGING_NAME
from registry.ops.sums import write_sums
from registry.ops.validate import validate

from .conftest import snapshot
from .test_crash import _kill_at, an_hour_old, kill_points, registry, traced_renames
from .test_dataset import DATASET_REPO, models, models_template, run, sources  # noqa: F401  (fixtures)

pytest_plugins = ["tests.hubserver"]

README = """---
license: other
language:
- zh
tags:
- tool-use
pretty_name: RWKV-Agent Distill
annotations_creators:
- machine-generated
---
# RWKV-Agent 蒸馏训练集

RWKV-Agent 用来教 RWKV-7 G1k 7.2B 当本地工具 Agent 的训练数据：读写文件、跑 bash、查网页、算数、查天气，最后用一段话给出答案。

这里只放实际训练过、并且训出了当前推荐权重的两个版本，内容和训练时用的文件逐字节一致（sha256 见 SHA256SUMS）。对应的权重在模型仓库 No-22/rwkv-agent-weights。

| 版本 | 思考 | 训练行 / 验证行 | 老师 |
|---|---|---|---|
| v2.1（2026-10-18） | 带思考（g1k-think） | 48 / 6 | Qwen3.7-Flash |
| v1.41（2026-10-13） | 不带思考（g1k） | 36 / 4 | 以 DeepSeek v4 Flash 为主 |

## 已知问题

1. v1.41 里有 3 行由测试题改编。
"""  # noqa: E501 seed 002's README verbatim: a paragraph is one line
FLAGS = [
    "--date",
    "v1.41=2026-10-13",
    "--date",
    "v2.1=2026-10-18",
    "--teacher",
    "v1.41=DeepSeek v4 Flash",
    "--teacher",
    "v2.1=Qwen3.7-Flash",
]


def sh(command: str, cwd: Path) -> None:
    subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, check=True)


@pytest.fixture
def repo(sources, tmp_path) -> Path:
    """The hand-made repo: the packer's folders as packed, by hand-written facts and sha256sum."""
    packed = {"v1.41": "final-20261013", "v2.1": "final-20261018"}
    for version, folder in packed.items():
        shutil.copytree(sources[version].folder, tmp_path / folder)
        manifest = tmp_path / folder / RELEASE_MANIFEST  # the author wrote what the packer did not
        data = json.loads(manifest.read_text())
        data.update(vocab="rwkv_vocab_v20230424.txt", context=8128)
        manifest.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    root = tmp_path / "rwkv-agent-distill"
    root.mkdir()
    (root / "README.md").write_text(README)
    sh(
        "cp -r ../final-20261013 v1.41 && cp -r ../final-20261018 v2.1 && find . -type f ! -name SHA256SUMS "
        "| sort | xargs sha256sum > SHA256SUMS",
        root,
    )
    return root


def originals_kept(root: Path, before: dict[str, bytes]) -> None:
    """Every data file and the README's text byte-identical; SHA256SUMS still agrees with sha256sum."""
    after = snapshot(root)
    for rel, data in before.items():
        if rel not in ("README.md", "SHA256SUMS"):
            assert after[rel] == data, rel
    assert README.split("---\n", 2)[2] in after["README.md"].decode()
    sh("sha256sum --quiet -c SHA256SUMS", root)


def test_adopt_in_place_with_models_then_validate_card_publish_pull_byte_identical(hub_server, repo, models, tmp_path):
    run("describe", "--method", "miss", "--profile", "g1k-think", "-C", models)  # seed 001: MiSS 必须用 g1k-think
    before = snapshot(repo)
    adopted = json.loads(run("dataset", "adopt", repo, "--models", models, *FLAGS, "--json").stdout)
    originals_kept(repo, before)
    versions = {v["version"]: v for v in adopted["versions"]}
    # which file the trainer read: the one the model registry's weights cite by sha256
    assert versions["v1.41"]["trained_file"]["path"] == "dataset/train/segments-1-41.jsonl"
    assert versions["v2.1"]["trained_file"]["path"] == "dataset/train/segments-shuffled.jsonl"
    assert adopted["sources"]["v1.41"]["trained_file"].startswith(f"--models {models}")
    assert (
        versions["v2.1"]["profile"] == "g1k-think"
        and adopted["sources"]["v2.1"]["profile"].endswith("serving.profile")
        and versions["v1.41"]["profile"] is None
    )
    assert (
        adopted["sources"]["v2.1"]["vocabulary"] == f"v2.1/{RELEASE_MANIFEST} vocab"
        and versions["v2.1"]["context"] == 8128
    )
    assert (
        adopted["sources"]["v2.1"]["thinking"] == "the wire canonical's thinking="
        and versions["v2.1"]["thinking"] == "full"
    )
    assert (versions["v1.41"]["train_rows"], versions["v1.41"]["teachers"], versions["v1.41"]["date"]) == (
        36,
        ["DeepSeek v4 Flash"],
        "2026-10-13",
    )
    assert len(adopted["weights"]) == 2 and adopted["next_steps"] == [
        f"registry validate {repo}",
        f"registry publish -C {repo}",
    ]
    index = json.loads((repo / "index.json").read_text())
    assert (
        index["kind"] == "dataset"
        and index["dataset"]["repo_id"] == DATASET_REPO
        and index["dataset"]["title"] == "RWKV-Agent Distill"
    )
    assert validate(repo) == []
    run("card", "--check", "-C", repo)
    # every key of the author's front matter stands in the card's (values as written, lists merged, nothing removed)
    front = yaml.safe_load((repo / "README.md").read_text().split("---\n")[1])
    assert (
        (front["license"], front["language"], front["pretty_name"]) == ("other", ["zh"], "RWKV-Agent Distill")
        and front["tags"][0] == "tool-use"
        and "rwkv" in front["tags"]
    )
    author = yaml.safe_load(README.split("---\n")[1])
    assert front["annotations_creators"] == ["machine-generated"] and set(author) <= set(front)
    assert adopted["front_matter"] == {
        "kept": ["annotations_creators", "language", "license", "pretty_name", "tags"],
        "not_in_metadata": [],
    }
    for step in adopted["next_steps"]:  # run as printed
        run(*step.split()[1:])
    assert hub_server.files(DATASET_REPO, repo_type="dataset") == {
        rel: data for rel, data in snapshot(repo).items() if rel != ".gitignore"
    }
    pulled = tmp_path / "pulled"
    run("pull", "--repo-id", DATASET_REPO, "--repo-type", "dataset", pulled)
    assert (
        snapshot(pulled) == {rel: data for rel, data in snapshot(repo).items() if rel != ".gitignore"}
        and validate(pulled) == []
    )
    originals_kept(pulled, before)


def test_facts_no_source_states_are_refused_all_at_once_and_the_folder_is_unchanged(repo):
    before = snapshot(repo)
    result = run("dataset", "adopt", repo, code=3)
    lines = [line for line in result.output.splitlines() if line.startswith("error: ")]
    missing = [line for line in lines if "no " in line and "is stated" in line]
    assert len(missing) == 6, (
        result.output
    )  # date, teacher, trained file of each version (rows, wire, thinking, vocab: the folder states them)
    for flag in (
        "--date v1.41=YYYY-MM-DD",
        "--teacher v2.1=",
        "--trained-file v1.41=dataset/train/",
        "--trained-file v2.1=",
        "--date v2.1=",
    ):
        assert any(f"fix: pass {flag}" in line for line in missing), flag
    assert all(line.count("; fix: ") == 1 for line in lines)
    assert snapshot(repo) == before and not (repo / ".registry").exists()


def test_flags_alone_adopt_and_the_dry_run_plan_is_the_real_runs(repo, monkeypatch):
    before = snapshot(repo)
    args = [
        "dataset",
        "adopt",
        repo,
        *FLAGS,
        "--trained-file",
        "v1.41=dataset/train/segments-1-41.jsonl",
        "--trained-file",
        "v2.1=dataset/train/segments-shuffled.jsonl",
        "--json",
    ]
    planned = json.loads(run(*args, "--dry-run").stdout)
    text = run(*args[:-1], "--dry-run").output
    assert (
        f"would adopt {repo} as a dataset registry: 2 version(s)" in text
        and "    trained_file: --trained-file v1.41=…" in text
        and "    train_rows: v1.41/dataset/train/manifest.json rows" in text
    )
    assert snapshot(repo) == before and not (repo / ".registry").exists()
    done = json.loads(run(*args).stdout)
    assert planned.pop("dry_run") is True and done.pop("dry_run") is False and planned == done

    calls: list[str] = []
    real = validating.version_problems
    monkeypatch.setattr(
        validating, "version_problems", lambda version, *args: calls.append(version.version) or real(version, *args)
    )
    assert (
        done["advice"] and not done["weights"] and validate(repo) == [] and calls == []
    )  # adopt checked the rows: validate reads none again
    (repo / "v2.1" / "pack.log").write_text("edited\n")
    write_sums(repo)
    assert [p.code for p in validate(repo)] == ["version.manifest-mismatch"] and calls == [
        "v2.1"
    ]  # a changed file: that version is checked again


def test_a_flag_against_the_files_or_a_changed_file_is_refused_and_nothing_changes(repo):
    before = snapshot(repo)
    result = run(
        "dataset",
        "adopt",
        repo,
        *FLAGS,
        "--trained-file",
        "v1.41=dataset/train/segments.jsonl",
        "--trained-file",
        "v2.1=dataset/train/segments-shuffled.jsonl",
        "--train-rows",
        "v2.1=47",
        code=3,
    )
    assert "v2.1/dataset/train/rows.jsonl: holds 48 rows but --train-rows says 47" in result.output
    assert snapshot(repo) == before
    (repo / "v2.1" / "pack.log").write_text("edited\n")
    changed = snapshot(repo)
    result = run("dataset", "adopt", repo, *FLAGS, code=3)
    assert "v2.1/pack.log: sha256 is" in result.output and "SHA256SUMS says" in result.output
    assert snapshot(repo) == changed


def test_model_adopt_and_dataset_init_point_a_dataset_repo_to_dataset_adopt(repo):
    before = snapshot(repo)
    result = run("adopt", repo, code=3)
    assert [line for line in result.output.splitlines() if line.startswith("error:")] == [
        f"error: {repo}: holds data version folders (v1.41, v2.1): a dataset repo; fix: run `registry "
        f"dataset adopt {repo}`"
    ]
    init = CliRunner().invoke(main, ["dataset", "init", str(repo)])
    assert init.exit_code != 0 and f"fix: run `registry dataset adopt {repo}` to bring existing files in" in init.output
    assert snapshot(repo) == before


def test_a_file_with_no_place_or_a_trained_file_the_weights_do_not_cite_is_refused(repo, models):
    (repo / "notes.txt").write_text("todo\n")
    (repo / "v1.41" / "dataset" / "train" / "rows-16k.jsonl").write_text("{}\n")
    before = snapshot(repo)
    result = run("dataset", "adopt", repo, "--models", models, *FLAGS, code=3)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors[0].startswith("error: notes.txt: unexpected file at the dataset registry's root") and errors[
        1
    ].startswith("error: v1.41/dataset/train/rows-16k.jsonl: a split folder holds")
    assert snapshot(repo) == before
    (repo / "notes.txt").unlink()
    (repo / "v1.41" / "dataset" / "train" / "rows-16k.jsonl").unlink()
    sh("find . -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS", repo)
    before = snapshot(repo)
    # the flag names another file than the one the State weight cites by sha256: the weights would cite no version
    result = run(
        "dataset",
        "adopt",
        repo,
        "--models",
        models,
        *FLAGS,
        "--trained-file",
        "v1.41=dataset/train/segments.jsonl",
        code=3,
    )
    assert (
        "link.refused" not in result.output
        and "was trained on data v1.41 sha256" in result.output
        and "which is no version of this dataset" in result.output
    )
    assert snapshot(repo) == before and not (repo / ".registry").exists()


def test_a_near_empty_dataset_repo_is_pointed_to_dataset_adopt_and_becomes_an_empty_dataset_registry(tmp_path):
    root = tmp_path / "distill"
    root.mkdir()
    (root / "README.md").write_text(
        "---\nlicense: other\ntask_categories:\n- text-generation\n---\n# RWKV-Agent "
        "蒸馏训练集\n\n数据整理中，第一个版本随后上传。\n"
    )
    sh("sha256sum README.md > SHA256SUMS", root)
    before = snapshot(root)
    errors = [line for line in run("adopt", root, code=3).output.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {root}: holds no weight and its README's front matter has dataset-card keys "
        f"(task_categories): a dataset repo; fix: run `registry dataset adopt {root}`"
    ]
    assert snapshot(root) == before and not (root / ".registry").exists()
    adopted = json.loads(run("dataset", "adopt", root, "--json").stdout)
    assert (
        adopted["versions"] == []
        and json.loads((root / "index.json").read_text())["kind"] == "dataset"
        and validate(root) == []
    )
    run("card", "--check", "-C", root)
    assert "数据整理中，第一个版本随后上传。" in (root / "README.md").read_text()


def test_dataset_adopt_of_a_model_repo_says_to_use_adopt(tmp_path):
    root = tmp_path / "weights"
    root.mkdir()
    (root / "rwkv-final.pth").write_bytes(b"not read")
    before = snapshot(root)
    errors = [line for line in run("dataset", "adopt", root, code=3).output.splitlines() if line.startswith("error:")]
    assert errors == [f"error: rwkv-final.pth: a weight file: this is a model repo; fix: run `registry adopt {root}`"]
    assert snapshot(root) == before


@pytest.mark.skipif(
    shutil.which("strace") is None, reason="strace is not installed: the kill is injected at rename(2) with it"
)
def test_a_kill_at_every_rename_leaves_the_folder_as_it_was_or_the_registry_complete(sources, tmp_path):
    """SIGKILL at the renames of `registry dataset adopt` that leave distinct states (tests/test_crash.py's
    kill_points: the journal's and the first of the files moved into place): the next command finds the
    folder as it was, or the registry complete."""
    template = tmp_path / "template"
    shutil.copytree(sources["v1.41"].folder, template / "v1.41")
    (template / "README.md").write_text("# RWKV-Agent 蒸馏训练集\n\n只放实际训练过的版本。\n")
    sh("find . -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS", template)
    an_hour_old(template)
    before = snapshot(template)

    def command(reg: Path) -> list[str | Path]:
        return [
            "dataset",
            "adopt",
            reg,
            "--date",
            "v1.41=2026-10-13",
            "--teacher",
            "v1.41=DeepSeek v4 Flash",
            "--trained-file",
            "v1.41=dataset/train/segments-1-41.jsonl",
            "--vocab",
            "v1.41=rwkv_vocab_v20230424.txt",
        ]

    def fresh(name: str) -> Path:
        return Path(shutil.copytree(template, tmp_path / name / "reg"))

    done = fresh("done")
    renames = traced_renames(command(done), tmp_path / "renames.log", done)
    after = snapshot(done)
    outcomes = []
    for point in kill_points(renames):
        reg = fresh(f"kill-{point.syscall}-{point.nth}")
        killed = _kill_at(command(reg), reg, point)
        if killed.returncode == 0:  # a run that renamed less than the counted one: it must be complete
            assert snapshot(reg) == after
            continue
        registry("validate", reg, check=False)  # the next command: rolls an interrupted commit forward first
        now = snapshot(reg)
        assert now in (before, after), point
        outcomes.append("before" if now == before else "after")
        if now == before:  # a folder still as it was is adopted again; no debris either way
            registry(
                *command(reg), check=False
            )  # refused (exit 3) only where it found a commit to finish: then complete
        assert (
            snapshot(reg) == after
            and list((reg / PRIVATE_DIR / STAGING_NAME).iterdir()) == []
            and not (reg / PRIVATE_DIR / JOURNAL_NAME).exists()
        )
    assert "before" in outcomes and "after" in outcomes, outcomes


def test_pull_of_a_hand_made_dataset_repo_says_how_to_adopt_it_and_downloads_nothing(hub_server, repo, tmp_path):
    api = HfApi()
    api.create_repo(DATASET_REPO, repo_type="dataset")
    api.upload_folder(folder_path=str(repo), repo_id=DATASET_REPO, repo_type="dataset")
    target = tmp_path / "pulled"
    result = run("pull", "--repo-id", DATASET_REPO, "--repo-type", "dataset", target, code=3)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        f"error: {DATASET_REPO}: is a hand-made dataset repo, not a registry yet"
    )
    assert "registry dataset adopt DIR" in errors[0] and not target.exists()
    assert not [p.name for p in tmp_path.iterdir() if ".pull-" in p.name]  # refused before anything was downloaded
