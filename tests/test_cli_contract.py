"""The CLI contract every command keeps: exit codes, --json refusals, -C / RWKV_REGISTRY,
REGISTRY_DEBUG, and light commands that never import torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry.cli import main

# Runs the CLI in a fresh interpreter and reports, at exit, whether torch was ever imported.
PROBE = "import atexit, sys; atexit.register(lambda: print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)); from registry.cli import main; main()"


def probe(*args, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RWKV_REGISTRY", "REGISTRY_DEBUG"))}
    return subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def invoke(*args, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


@pytest.mark.parametrize(
    "args",
    [
        ["validate"], ["sums", "--check"], ["sums"], ["list"], ["card", "--check"], ["card"], ["publish", "--repo-id", "ns/name", "--dry-run", "--assume-empty-remote"],
        ["set", "title", "T"], ["set", "summary", "S", "--lang", "en"], ["eval-setup", "exam", "--items", "568"],
        ["describe", "--method", "miss", "--profile", "p"], ["train-stage", "x/full/v1/x.pth", "s1", "--gpus", "6"],
        ["score", "--base", "b", "--benchmark", "e", "--value", "1", "--date", "2026-10-16", "--backend", "b"],
    ],  # fmt: skip
    ids=lambda a: " ".join(a[:2]),
)
def test_light_commands_never_import_torch(empty_registry, args):
    result = probe(*args, cwd=empty_registry)
    assert result.stderr.strip().endswith("NO-TORCH"), result.stderr
    assert result.returncode in (0, 1, 3), result.stderr  # publish --dry-run exits 1 (no gate receipts yet); describe, train-stage, score refuse in an empty registry (3)


def test_init_imports_no_torch(tmp_path):
    result = probe("init", tmp_path / "new", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr.strip().endswith("NO-TORCH")


def test_registry_env_and_dash_c_mean_the_same_on_every_command(tmp_path):
    env = {"RWKV_REGISTRY": str(tmp_path / "env-reg")}
    assert invoke("init", env=env).exit_code == 0
    for args in (["validate"], ["sums", "--check"], ["card", "--check"], ["list"], ["sums"], ["card"]):
        assert invoke(*args, env=env).exit_code == 0, args
        assert invoke(*args, "-C", tmp_path / "env-reg").exit_code == 0, args
    assert invoke("init", "-C", tmp_path / "dash-c").exit_code == 0
    assert (tmp_path / "dash-c" / "index.json").is_file()


def test_dir_and_a_different_dash_c_is_a_usage_error(empty_registry, tmp_path):
    result = invoke("validate", empty_registry, "-C", tmp_path / "other", "--json")
    assert result.exit_code == 2 and json.loads(result.stdout)["problems"][0]["code"] == "usage"


def test_exit_codes_are_distinct(empty_registry, tmp_path):
    assert invoke("validate", empty_registry).exit_code == 0
    (empty_registry / "stray.txt").write_text("x")
    assert invoke("validate", empty_registry).exit_code == 1  # checked, found problems
    assert invoke("validate", "--bogus").exit_code == 2  # usage
    assert invoke("list", "-C", tmp_path / "missing").exit_code == 3  # refused
    (empty_registry / "stray.txt").unlink()
    (empty_registry / "SHA256SUMS").unlink()
    (empty_registry / "SHA256SUMS").mkdir()
    failed = invoke("sums", "-C", empty_registry, "--json")
    assert failed.exit_code == 5 and json.loads(failed.stdout)["problems"][0]["file"] == str(empty_registry / "SHA256SUMS")


def test_every_refusal_under_json_is_one_document(tmp_path):
    for args in (["list", "-C", tmp_path / "nope", "--json"], ["sums", "-C", tmp_path / "nope", "--json"], ["score", "x.pth", "-C", tmp_path / "nope", "--benchmark", "b", "--value", "1", "--date", "2026-01-01", "--backend", "b", "--json"]):
        result = invoke(*args)
        document = json.loads(result.stdout)  # stdout alone: the error line goes to stderr
        assert result.exit_code == 3 and document["ok"] is False and {"code", "file", "message", "fix"} == set(document["problems"][0])


def test_registry_debug_prints_the_traceback_with_its_cause(empty_registry):
    (empty_registry / "index.json").write_text("{broken")
    quiet = probe("list", cwd=empty_registry)
    assert quiet.returncode == 3 and "Traceback" not in quiet.stderr
    env = {**os.environ, "REGISTRY_DEBUG": "1"}
    loud = subprocess.run([sys.executable, "-m", "registry", "list"], cwd=empty_registry, capture_output=True, text=True, env=env)
    assert loud.returncode == 3 and "Traceback" in loud.stderr and "JSONDecodeError" in loud.stderr
    assert "direct cause" in loud.stderr and loud.stderr.rstrip().splitlines()[-1].startswith("error: ")


def test_a_pre_commit_config_at_the_root_is_not_a_stray_file(empty_registry):
    (empty_registry / ".pre-commit-config.yaml").write_text("repos: []\n")
    assert invoke("validate", empty_registry).exit_code == 0
