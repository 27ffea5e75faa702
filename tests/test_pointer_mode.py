"""Pointer mode (issue 44): a checkout whose weights are Git LFS pointers (``GIT_LFS_SKIP_SMUDGE=1``,
as CI clones a Hub repo) validates by each pointer's oid and size; a pointer that disagrees is refused
as that, never as tampering; the Action's steps, run as a runner runs them, prove the Hub holds the
bytes with verify-remote against the checked-out revision."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from registry.core.layout import is_weight
from registry.core.names import SUMS_NAME
from registry.core.sums import parse_sums

from .conftest import sha256_of, snapshot, user_environment
from .hubserver import lfs_pointer
from .test_publish import PROJECT, REPO, publish_args, weight_path

pytest_plugins = ["tests.hubserver", "tests.publish_fixtures"]


def pointer_checkout(root: Path, target: Path) -> list[str]:
    """A copy of ``root`` as `GIT_LFS_SKIP_SMUDGE=1 git clone` leaves it: each weight a pointer
    (its oid the sha256 of its bytes), the private folder absent; the weights replaced."""
    shutil.copytree(root, target, ignore=shutil.ignore_patterns(".registry"))
    weights = sorted(p for p in parse_sums((root / SUMS_NAME).read_bytes()) if is_weight(p))
    for rel in weights:
        path = target / rel
        path.write_bytes(lfs_pointer(sha256_of(path), path.stat().st_size))
    return weights


def set_pointer(path: Path, oid: str | None = None, size: int | None = None) -> None:
    old = dict(line.split(" ", 1) for line in path.read_text().splitlines())
    path.write_bytes(lfs_pointer(oid or old["oid"].removeprefix("sha256:"), old["size"] if size is None else size))


def codes(document: dict) -> set[tuple[str, str]]:
    return {(p["code"], p["file"]) for p in document["problems"]}


def test_a_pointer_checkout_validates_in_pointer_mode(registry, tmp_path, cli):
    checkout = tmp_path / "checkout"
    weights = pointer_checkout(registry, checkout)
    assert weights and all((checkout / w).stat().st_size < 200 for w in weights)
    before = snapshot(checkout)
    result = cli.json("validate", "-C", checkout, "--json")
    assert result["ok"] and result["pointer_mode"]["files"] == weights
    assert any("tensor inspection" in s for s in result["pointer_mode"]["skipped"]) and any(
        "gate" in s for s in result["pointer_mode"]["skipped"]
    )
    text = cli("validate", "-C", checkout)
    assert (
        f"pointer mode: {len(weights)} file(s) are Git LFS pointers" in text.stderr
        and "registry is valid" in text.stdout
    )
    assert cli.json("sums", "--check", "-C", checkout, "--json")["pointer_mode"]["files"] == weights
    cli("card", "--check", "-C", checkout)
    required = cli.json("validate", "-C", checkout, "--require-bytes", "--json", code=1)
    assert codes(required) == {("lfs.pointer", w) for w in weights} and "pointer_mode" not in required
    assert snapshot(checkout) == before  # a check changes nothing


@pytest.mark.parametrize("alteration", ["oid", "size", "unlisted"])
def test_a_pointer_that_disagrees_is_refused_as_a_pointer(registry, tmp_path, cli, alteration):
    checkout = tmp_path / "checkout"
    pointer_checkout(registry, checkout)
    weight = weight_path(registry)
    if alteration == "oid":
        set_pointer(checkout / weight, oid="ab" * 32)
        expected = {("lfs.oid-mismatch", weight)}
    elif alteration == "size":
        set_pointer(checkout / weight, size=(registry / weight).stat().st_size + 1)
        expected = {("lfs.size-mismatch", weight)}
    else:
        weight = "docs/figure.bin"
        (checkout / "docs").mkdir()
        (checkout / weight).write_bytes(lfs_pointer("cd" * 32, 4096))
        expected = {("lfs.unlisted", weight)}
    result = cli.json("validate", "-C", checkout, "--json", code=1)
    assert codes(result) == expected, result  # one finding, about the pointer: no sums.mismatch, no rewrite advice
    assert all("tamper" not in p["message"] and "--allow-rewrite" not in p["fix"] for p in result["problems"])
    line = cli("validate", "-C", checkout, code=1).stdout
    assert f"{weight}: " in line and "fix: " in line
    if alteration != "size":  # SHA256SUMS records no size: sums --check compares the oid
        assert codes(cli.json("sums", "--check", "-C", checkout, "--json", code=1)) == expected


def test_a_malformed_pointer_is_a_finding(registry, tmp_path, cli):
    checkout = tmp_path / "checkout"
    pointer_checkout(registry, checkout)
    weight = weight_path(registry)
    (checkout / weight).write_bytes((checkout / weight).read_bytes() + b"ext-0-foo sha256:00\n")
    assert ("lfs.malformed-pointer", weight) in codes(cli.json("validate", "-C", checkout, "--json", code=1))


# -- the Action, as a runner runs it --------------------------------------------------------------------------


def _operand(text: str, inputs: dict[str, str], outcomes: dict[str, str]) -> str:
    text = text.strip()
    if match := re.fullmatch(r"inputs\.([\w-]+)", text):
        return inputs[match.group(1)]
    if match := re.fullmatch(r"steps\.([\w-]+)\.outcome", text):
        return outcomes.get(match.group(1), "skipped")
    if match := re.fullmatch(r"'([^']*)'", text):
        return match.group(1)
    raise AssertionError(
        f"an expression this runner does not know: {text}"
    )  # the action must not grow what this runs blind


def _condition(text: str, inputs: dict[str, str], outcomes: dict[str, str]) -> bool:
    """An ``if:`` of action.yml: terms joined by ``&&``; each a status function or a comparison."""
    text = text.strip().removeprefix("${{").removesuffix("}}")
    verdict = True
    for term in (t.strip() for t in text.split("&&")):
        if term == "!cancelled()":
            continue
        if term == "success()":
            verdict &= "failure" not in outcomes.values()
        elif match := re.fullmatch(r"(.+?)\s*(==|!=)\s*(.+)", term):
            equal = _operand(match.group(1), inputs, outcomes) == _operand(match.group(3), inputs, outcomes)
            verdict &= equal if match.group(2) == "==" else not equal
        else:
            raise AssertionError(f"a condition this runner does not know: {term}")
    return verdict


def _substitute(text: str, inputs: dict[str, str], outcomes: dict[str, str]) -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: _operand(m.group(1), inputs, outcomes), text)


def run_action(workspace: Path, inputs: dict[str, str], tmp_path: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each step of action.yml as the runner runs a composite action's steps: ``if:`` evaluated, the
    step's ``env`` set, the script through ``bash --noprofile --norc -eo pipefail``, in the workspace.
    ``actions/setup-python`` is the runner's (this Python), and the install step's `pip install` of
    the action is replaced by this checkout on PYTHONPATH (a `registry` shim runs it)."""
    action = yaml.safe_load((PROJECT / "action.yml").read_text())
    defaults = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    inputs = {**defaults, **inputs}
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "registry").write_text(f'#!/bin/sh\nexec {sys.executable} -m registry "$@"\n')
    (shim / "registry").chmod(0o755)
    env = {
        **user_environment(),
        "PATH": f"{shim}:{os.environ['PATH']}",
        "PYTHONPATH": str(PROJECT),
        "GITHUB_ACTION_PATH": str(PROJECT),
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_OUTPUT": str(tmp_path / "github_output"),
        "GITHUB_WORKSPACE": str(workspace),
    }
    outcomes: dict[str, str] = {}
    ran: dict[str, subprocess.CompletedProcess[str]] = {}
    for number, step in enumerate(action["runs"]["steps"]):
        name = step.get("id", f"step{number}")
        if "uses" in step or name == "install":
            outcomes[name] = "success"
            continue
        if not _condition(step.get("if", "success()"), inputs, outcomes):
            outcomes[name] = "skipped"
            continue
        step_env = {k: _substitute(str(v), inputs, outcomes) for k, v in step.get("env", {}).items()}
        script = _substitute(step["run"], inputs, outcomes)
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=workspace,
            env={**env, **step_env},
            capture_output=True,
            text=True,
            timeout=300,
        )
        ran[name] = done
        outcomes[name] = "success" if done.returncode == 0 else "failure"
    return ran


def test_the_actions_steps_on_a_pointer_checkout_against_the_hub(hub_server, registry, tmp_path, cli):
    cli(*publish_args(registry))
    workspace = tmp_path / "workspace"
    weights = pointer_checkout(registry, workspace / "reg")
    head = hub_server.head(REPO)
    ran = run_action(workspace, {"registry": "reg", "repo-id": REPO, "revision": head}, tmp_path)
    assert set(ran) >= {"validate", "verify-remote"}, ran
    for name, done in ran.items():
        assert done.returncode == 0, (name, done.stdout, done.stderr)
    assert (
        f"pointer mode: {len(weights)} Git LFS pointer(s)" in ran["validate"].stdout
        and "registry is valid" in ran["validate"].stdout
    )
    report = cli.json("verify-remote", "--repo-id", REPO, "--revision", head, "-C", workspace / "reg", "--json")
    assert report["commit"] == head and {c["path"] for c in report["content"]} >= set(weights)
    assert all(
        hub_server.files(REPO)[w] == (registry / w).read_bytes() for w in weights
    )  # what the pointers name is there
    weight = weight_path(registry)
    set_pointer(workspace / "reg" / weight, oid="ab" * 32)  # a pull request that points a weight elsewhere
    ran = run_action(workspace, {"registry": "reg", "repo-id": REPO, "revision": head}, tmp_path)
    assert ran["validate"].returncode == 1 and "lfs.oid-mismatch" in ran["validate"].stdout
    assert ran["verify-remote"].returncode == 1 and "remote.pointer-mismatch" in ran["verify-remote"].stdout
    assert f"::error file=reg/{weight}," in ran["validate"].stdout
