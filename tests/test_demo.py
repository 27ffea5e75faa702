"""The demo is the whole product end to end; the README's two commands stay true."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from registry.cli import main
from registry.models import Index
from registry.ops.validate import validate

PROJECT = Path(__file__).resolve().parent.parent


def test_demo_builds_both_seed_shaped_registries_and_ends_valid(tmp_path):
    result = CliRunner().invoke(main, ["demo", str(tmp_path / "demo"), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    steps = [s["step"] for s in document["steps"]]
    for expected in ("build", "init", "add-base", "add", "describe", "score", "convert", "smoke", "publish --dry-run", "validate"):
        assert expected in steps
    assert steps[-1] == "validate" and steps.count("validate") == 2
    registries = {name: Path(path) for name, path in document["registries"].items()}
    assert registries == {"seed001": tmp_path / "demo" / "registry", "seed000": tmp_path / "demo" / "finetune-registry"}
    methods = {}
    for name, root in registries.items():
        assert validate(root) == []
        index = Index.model_validate_json((root / "index.json").read_text())
        methods[name] = ({e.method for e in index.entries}, index.registry.languages)
        subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=root, check=True)
    assert methods == {"seed001": ({"state", "miss"}, ["zh"]), "seed000": ({"full"}, ["en"])}


def test_demo_reruns_in_its_own_directory_but_refuses_foreign_ones(tmp_path):
    runner = CliRunner()
    assert runner.invoke(main, ["demo", str(tmp_path / "d")]).exit_code == 0
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
    ci = subprocess.run(["bash", "-c", "awk '/^```bash test$/{getline; print; exit}' README.md"], cwd=PROJECT, capture_output=True, text=True)
    assert ci.stdout.strip() == test
    assert "README.md" in (PROJECT / ".ci" / "run").read_text()


def test_every_command_has_help():
    runner = CliRunner()
    for name, command in main.commands.items():
        result = runner.invoke(main, [name, "--help"])
        assert result.exit_code == 0 and command.help and len(result.output) > 80, name
        assert "--json" in result.output and "-C, --registry" in result.output, name


def test_pre_commit_hooks_file_is_the_one_documented():
    documented = re.search(r"```yaml\n(- id: registry-validate.*?)```", (PROJECT / "docs" / "ci.md").read_text(), re.S).group(1)
    assert (PROJECT / ".pre-commit-hooks.yaml").read_text() == documented


def test_demo_keeps_the_runtimes_banner_loading_lines_and_warnings_off_stderr(tmp_path):
    """What the official runtime and torch print while the demo gates its weights stays off both
    streams: stdout is the JSON document, stderr is empty."""
    from .conftest import user_environment

    done = subprocess.run([sys.executable, "-m", "registry", "demo", str(tmp_path / "demo"), "--json"], capture_output=True, text=True, env=user_environment(), timeout=900)
    assert done.returncode == 0 and json.loads(done.stdout)["steps"], done.stderr
    assert done.stderr == "", done.stderr


def test_install_lines_are_ones_that_work_here():
    """No package index serves rwkv-registry: the docs install from a clone, a wheel or a git URL,
    name no OWNER placeholder, and say how to get torch's CPU build."""
    readme, ci = (PROJECT / "README.md").read_text(), (PROJECT / "docs" / "ci.md").read_text()
    for text in (readme, ci):
        # the tool itself from an index; an extra of the installed tool ('rwkv-registry[torch]') resolves
        assert not re.search(r"pip install ['\"]?rwkv-registry(?![\w\[-]| @)", text) and "OWNER" not in text
        assert "pip install .  " in text and "pip install dist/rwkv_registry-0.1.0-py3-none-any.whl" in text and 'pip install "git+file://$PWD"' in text
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in readme
