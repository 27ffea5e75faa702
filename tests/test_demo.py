"""The demo is the whole product end to end; the README's two commands stay true."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from registry.cli import main
from registry.core.models import Index
from registry.dataset.models import DatasetIndex
from registry.ops.validate import validate

from .installed_wheel import INSTALLED_GROUP

pytest_plugins = ["tests.installed_wheel"]  # demo_run: the demo as the installed wheel runs it

PROJECT = Path(__file__).resolve().parent.parent
# Seed 002's card, as the demo's dataset card must carry it (hashes and paths of the tiny stand-ins aside).
SEED002_FACTS = (
    "# RWKV-Agent 蒸馏训练集",
    "language:\n- zh\n- en",
    "task_categories:\n- text-generation",
    "config_name: v2.1\n  default: true",
    "path: v1.41/dataset/validation/rows.jsonl",
    "## 版本",
    "| v2.1 | 2026-10-18 | 带思考（g1k-think） | 5512 / 148 | Qwen3.7-Flash |",
    "| v1.41 | 2026-10-13 | 不带思考（g1k） | 3662 / 118 | DeepSeek v4 Flash |",
    "MiSS r16-lr2e-5-e2 |",
    "State v141b-s1224 |",
    "## 与基模的关系",
    "训练数据不绑定某个基模",
    "meta.wire_canonical",
    "thinking=off",
    "thinking=full",
    "nudge=think",
    "rwkv_vocab_v20230424.txt",
    "## 目录",
    "dataset/train/segments-1-41.jsonl",
    "dataset/train/segments-shuffled.jsonl",
    "train-rows.jsonl, validation-rows.jsonl",
    "final-stats.json, release-manifest.json",
    "## 数据格式",
    "**rows.jsonl**",
    "**segments\\*.jsonl**",
    "**train.jsonl**",
    "### v1.41（3780 行）",
    "### v2.1（5660 行）",
    "base700（80 行）",
    "打乱种子 20261017",
    "## 已知问题",
    "80 行的 meta.seeded_from_test 为 true",
    "「我是 Qwen」",
    "本仓库尚未指定许可证。",
    "请自行确认各家服务条款",
    "`No-22/rwkv-agent-weights`",
    "sha256sum -c SHA256SUMS",
)


@pytest.mark.xdist_group(INSTALLED_GROUP)
def test_demo_builds_the_three_seed_shaped_registries_and_ends_valid(demo_run):
    directory, result = demo_run
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    steps = [s["step"] for s in document["steps"]]
    for expected in (
        "build",
        "init",
        "add-base",
        "add",
        "describe",
        "score",
        "convert",
        "smoke",
        "publish --dry-run",
        "validate",
        "dataset init",
        "dataset add",
        "dataset link",
    ):
        assert expected in steps
    assert steps[-2:] == ["validate --linked", "validate --linked"] and steps.count("validate") == 2
    registries = {name: Path(path) for name, path in document["registries"].items()}
    assert registries == {
        "seed001": directory / "registry",
        "seed000": directory / "finetune-registry",
        "seed002": directory / "dataset-registry",
    }
    methods = {}
    for name, root in registries.items():
        assert validate(root) == []
        subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=root, check=True)
        if name != "seed002":
            index = Index.model_validate_json((root / "index.json").read_text())
            methods[name] = ({e.method for e in index.entries}, index.registry.languages)
    assert methods == {"seed001": ({"state", "miss"}, ["zh"]), "seed000": ({"full"}, ["en"])}
    # the weights cite the dataset's versions by the sha256 of the file the trainer read, and the dataset card lists
    # them
    dataset = DatasetIndex.model_validate_json((registries["seed002"] / "index.json").read_text())
    cited = {
        (e.data.version, e.data.sha256)
        for e in Index.model_validate_json((registries["seed001"] / "index.json").read_text()).entries
    }
    assert cited == {(v.version, v.trained_file.sha256) for v in dataset.versions}
    assert (
        validate(registries["seed001"], linked=registries["seed002"]) == []
        and validate(registries["seed002"], linked=registries["seed001"]) == []
    )
    card = (registries["seed002"] / "README.md").read_text()
    missing = [fact for fact in SEED002_FACTS if fact not in card]
    assert not missing, missing
    _list_shows_the_dataset_registrys_versions_trained_files_and_linked_weights(
        registries["seed002"], dataset, Index.model_validate_json((registries["seed001"] / "index.json").read_text())
    )


def _list_shows_the_dataset_registrys_versions_trained_files_and_linked_weights(
    root: Path, dataset: DatasetIndex, models: Index
) -> None:
    listed = CliRunner().invoke(main, ["list", "-C", str(root), "--json"])
    assert listed.exit_code == 0, listed.output
    document = json.loads(listed.stdout)
    assert document["kind"] == "dataset" and [v["version"] for v in document["versions"]] == ["v1.41", "v2.1"]
    for version in document["versions"]:
        trained = dataset.version(version["version"]).trained_file
        assert version["trained_file"] == {
            "path": f"{version['version']}/{trained.path}",
            "sha256": trained.sha256,
            "size": trained.size,
        }
        assert (root / version["trained_file"]["path"]).is_file()
        # every weight of the model registry trained on this version, and no other (a safetensors twin stands for its
        # .pth)
        cited = {e.path for e in models.entries if e.data.sha256 == trained.sha256 and e.format == "pth"}
        assert cited and {w["path"] for w in version["weights"]} == cited
        assert all(w["repo_id"] == models.registry.repo_id for w in version["weights"])
    text = CliRunner().invoke(main, ["list", "-C", str(root)])
    assert text.exit_code == 0 and "versions" in text.output and "linked weights" in text.output
    for version in document["versions"]:
        assert version["trained_file"]["path"] in text.output and all(
            w["path"] in text.output for w in version["weights"]
        )


@pytest.mark.xdist_group(INSTALLED_GROUP)
def test_demo_reruns_in_its_own_directory_but_refuses_foreign_ones(demo_run, tmp_path):
    runner = CliRunner()
    assert demo_run[1].returncode == 0  # a directory the demo made (a copy: the other tests read the original)
    shutil.copytree(demo_run[0], tmp_path / "d", symlinks=True)
    assert runner.invoke(main, ["demo", str(tmp_path / "d")]).exit_code == 0
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.txt").write_text("precious")
    refused = runner.invoke(main, ["demo", str(tmp_path / "mine")])
    assert refused.exit_code == 3 and (tmp_path / "mine" / "thesis.txt").read_text() == "precious"


def test_readme_has_the_two_quickstart_commands_and_ci_runs_the_test_one():
    readme = (PROJECT / "README.md").read_text()
    demo = re.search(r"```bash demo\n(.+)\n```", readme).group(1)
    test = re.search(r"```bash test\n(.+)\n```", readme).group(1)
    assert "torch==2.13.0" in demo and "registry demo" in demo
    assert "torch==2.13.0" in test and "pytest" in test
    ci = subprocess.run(
        ["bash", "-c", "awk '/^```bash test$/{getline; print; exit}' README.md"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
    )
    assert ci.stdout.strip() == test
    assert "README.md" in (PROJECT / ".ci" / "run").read_text()


def test_the_test_lines_llama_cpp_build_names_a_cmake_file_of_the_clone():
    """The README's test line builds llama-cpp-python with a CMake file of the clone included in its
    projects (CMAKE_PROJECT_INCLUDE, resolved from the clone's root where the line runs): it must be
    there, and turn off the library the bindings do not load."""
    test = re.search(r"```bash test\n(.+)\n```", (PROJECT / "README.md").read_text()).group(1)
    included = re.search(r"-DCMAKE_PROJECT_INCLUDE=\$PWD/(\S+?)\"", test).group(1)
    text = (PROJECT / included).read_text()
    assert "set(LLAMA_BUILD_COMMON OFF CACHE BOOL" in text and text.rstrip().endswith("FORCE)")


def test_every_command_has_help():
    runner = CliRunner()
    commands = [([name], command) for name, command in main.commands.items()]
    for path, command in commands:
        result = runner.invoke(main, [*path, "--help"])
        assert result.exit_code == 0 and command.help and len(result.output) > 80, path
        if isinstance(command, click.Group):  # a group (registry dataset …): each of its commands
            commands += [([*path, name], sub) for name, sub in command.commands.items()]
            continue
        assert "--json" in result.output and "-C, --registry" in result.output, path


def test_pre_commit_hooks_file_is_the_one_documented():
    documented = re.search(
        r"```yaml\n(- id: registry-validate.*?)```", (PROJECT / "docs" / "ci.md").read_text(), re.S
    ).group(1)
    assert (PROJECT / ".pre-commit-hooks.yaml").read_text() == documented


@pytest.mark.xdist_group(INSTALLED_GROUP)
def test_demo_keeps_the_runtimes_banner_loading_lines_and_warnings_off_stderr(demo_run):
    """What the official runtime and torch print while the demo gates its weights stays off both
    streams: stdout is the JSON document, stderr is empty."""
    done = demo_run[1]
    assert done.returncode == 0 and json.loads(done.stdout)["steps"], done.stderr
    assert done.stderr == "", done.stderr


def test_install_lines_are_ones_that_work_here():
    """No package index serves rwkv-registry: the docs install from a clone, a wheel or a git URL,
    name no OWNER placeholder, and say how to get torch's CPU build."""
    readme, ci = (PROJECT / "README.md").read_text(), (PROJECT / "docs" / "ci.md").read_text()
    for text in (readme, ci):
        # the tool itself from an index; an extra of the installed tool ('rwkv-registry[torch]') resolves
        assert not re.search(r"pip install ['\"]?rwkv-registry(?![\w\[-]| @)", text) and "OWNER" not in text
        assert (
            "pip install .  " in text
            and "pip install dist/rwkv_registry-0.1.0-py3-none-any.whl" in text
            and 'pip install "git+file://$PWD"' in text
        )
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in readme
