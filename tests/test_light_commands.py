"""The daily commands stay light (issue #39): registering States, MiSS adapters and checkpoints
needs no torch; validate, list, card --check and sums --check on a tree unchanged since their last
clean run import none of the models, schemas and templates; a torch that is missing or broken is
one line naming the extra.  Checked on real processes, by what they import, not by a clock."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from registry.artifacts.synthetic import make_adapter_file, make_base_checkpoint, make_state_file

from .conftest import SMALL

CLI = [sys.executable, "-m", "registry"]
HEAVY = ("torch", "numpy", "safetensors", "pydantic", "pydantic_core", "jsonschema", "jinja2")
BASE = "rwkv7-light-20260101"

# `import torch` as a machine without it sees it, or as one whose torch cannot load a library.
SITECUSTOMIZE = """
import os, sys
if os.environ.get("FAKE_TORCH") == "absent":
    sys.modules["torch"] = None  # import torch: ModuleNotFoundError, as when it is not installed
"""
BROKEN_TORCH = 'raise {kind}("libcudnn.so.9: cannot open shared object file: No such file or directory")\n'


def run(
    *args: str | Path, env: dict[str, str] | None = None, importtime: bool = False
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "registry", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def imported(result: subprocess.CompletedProcess[str]) -> set[str]:
    """The top-level packages a ``-X importtime`` run imported."""
    return {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def fake_torch(tmp_path: Path, kind: str) -> dict[str, str]:
    """The environment of a process in which ``import torch`` fails: ``absent`` (not installed),
    ``ImportError``/``OSError`` (installed, but a CUDA library is missing)."""
    folder = tmp_path / f"fake-torch-{kind}"
    (folder / "torch").mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    if kind != "absent":
        (folder / "torch" / "__init__.py").write_text(BROKEN_TORCH.format(kind=kind))
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "FAKE_TORCH": kind}


def train_json(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "trainer": {"name": "rwkv_state_tune", "version": "1.8.1"},
                "hyperparameters": {"lr_init": 0.01},
                "command": "rwkv_state_tune",
                "data_sha256": "ab" * 32,
            }
        )
    )
    return path


def age(root: Path) -> None:
    """Every file an hour old: files younger than RACY_SECONDS vouch for nothing."""
    an_hour_ago = time.time() - 3600
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            os.utime(path, (an_hour_ago, an_hour_ago))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("light-inputs")
    base = make_base_checkpoint(folder / f"{BASE}.pth", SMALL)
    make_state_file(folder / "s1.pth", SMALL)
    make_adapter_file(folder / "adapter-final.pth", SMALL, hashlib.sha256(base.read_bytes()).hexdigest(), rank=8)
    train_json(folder / "train.json")
    return folder


def add_args(inputs: Path, reg: Path, file: str, method: str, *extra: str) -> list[str | Path]:
    return [
        "add",
        inputs / file,
        "-C",
        reg,
        "--base",
        BASE,
        "--method",
        method,
        "--data-version",
        "v1.41",
        "--train-json",
        inputs / "train.json",
        *extra,
    ]


def test_registering_weights_needs_no_torch(inputs, tmp_path):
    env = fake_torch(tmp_path, "absent")
    reg = tmp_path / "reg"
    for args in (
        ["init", reg],
        ["add-base", inputs / f"{BASE}.pth", "-C", reg],
        add_args(inputs, reg, "s1.pth", "state"),
        add_args(inputs, reg, "adapter-final.pth", "miss", "--run", "r8"),
    ):
        result = run(*args, env=env, importtime=True)
        assert result.returncode == 0, result.stderr[-2000:]
        assert not {"torch", "numpy", "safetensors"} & imported(result), args
    listing = json.loads(run("list", "-C", reg, "--json", env=env).stdout)
    miss = next(e for e in listing["entries"] if e["method"] == "miss")
    assert miss["content_version"] and run("validate", "-C", reg, env=env).returncode == 0


def test_adopting_a_seed_001_shaped_repo_needs_no_torch(inputs, tmp_path):
    reg = tmp_path / "hand-made"
    version = reg / BASE / "state" / "v1.41"
    version.mkdir(parents=True)
    shutil.copy(inputs / "s1.pth", version / "s1.pth")
    shutil.copy(inputs / "train.json", version / "train.json")
    (reg / "README.md").write_text("# Hand-made\n\nState 推荐\n")
    subprocess.run(
        "find * -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS", shell=True, cwd=reg, check=True
    )
    result = run(
        "adopt", reg, "--base-file", inputs / f"{BASE}.pth", env=fake_torch(tmp_path, "absent"), importtime=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "torch" not in imported(result)
    assert json.loads((reg / "index.json").read_text())["entries"][0]["path"] == f"{BASE}/state/v1.41/s1.pth"


@pytest.mark.parametrize("kind", ["absent", "ImportError", "OSError"])
def test_a_command_that_computes_with_tensors_names_the_extra_in_one_line(tmp_path, kind):
    reg = tmp_path / "reg"
    assert run("init", reg).returncode == 0
    result = run("smoke", "--device", "cpu", "-C", reg, env=fake_torch(tmp_path, kind))
    assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: torch: ")
    assert "pip install" in result.stderr and "rwkv-registry[torch]" in result.stderr
    if kind != "absent":  # what failed is named, so the user can tell a broken install from a missing one
        assert "libcudnn.so.9" in result.stderr and "--force-reinstall" in result.stderr


@pytest.fixture(scope="module")
def made(inputs, tmp_path_factory) -> Path:
    reg = tmp_path_factory.mktemp("made") / "reg"
    for args in (
        ["init", reg],
        ["add-base", inputs / f"{BASE}.pth", "-C", reg],
        add_args(inputs, reg, "s1.pth", "state"),
        add_args(inputs, reg, "adapter-final.pth", "miss", "--run", "r8"),
    ):
        assert run(*args).returncode == 0
    return reg


@pytest.fixture
def vouched(made, tmp_path) -> Path:
    """A registry with a base, a State and a MiSS adapter, every file an hour old (a copy: its own
    inodes, so nothing another test left in .registry/ vouches for it)."""
    reg = Path(shutil.copytree(made, tmp_path / "reg", symlinks=True))
    age(reg)
    return reg


READ_ONLY = [["validate"], ["list", "--json"], ["card", "--check"], ["sums", "--check"]]


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: " ".join(c))
def test_read_only_commands_on_an_unchanged_tree_import_no_models_schemas_or_templates(vouched, command):
    first = run(*command, "-C", vouched, importtime=True)
    assert first.returncode == 0 and "pydantic" in imported(
        first
    )  # the full run: the budget below is the verdict's doing
    again = run(*command, "-C", vouched, importtime=True)
    assert again.returncode == 0, again.stderr[-2000:]
    assert not set(HEAVY) & imported(again), sorted(set(HEAVY) & imported(again))
    assert [line for line in again.stdout.splitlines()] == [line for line in first.stdout.splitlines()]


def test_a_clean_validate_vouches_for_card_and_sums_checks(vouched):
    assert run("validate", "-C", vouched).returncode == 0
    for command in (["card", "--check"], ["sums", "--check"]):
        assert not set(HEAVY) & imported(run(*command, "-C", vouched, importtime=True)), command


def test_bytes_changed_under_an_old_mtime_are_found(vouched):
    assert run("validate", "-C", vouched).returncode == 0
    state = vouched / BASE / "state" / "v1.41" / "s1.pth"
    stat = state.stat()
    data = bytearray(state.read_bytes())
    data[-100] ^= 0xFF  # same size, same mtime: only the ctime tells
    state.write_bytes(bytes(data))
    os.utime(state, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    for command in READ_ONLY[:1] + READ_ONLY[3:]:
        result = run(*command, "-C", vouched, "--json")
        assert result.returncode == 1 and any(
            p["file"] == state.relative_to(vouched).as_posix() for p in json.loads(result.stdout)["problems"]
        ), command


def test_a_verdict_that_came_with_a_copy_vouches_for_nothing(vouched, tmp_path):
    assert run("validate", "-C", vouched).returncode == 0 and (vouched / ".registry" / "verdict.json").is_file()
    copy = Path(shutil.copytree(vouched, tmp_path / "clone" / "reg"))  # times kept; inodes and ctimes are new
    (copy / "SHA256SUMS").write_text((copy / "SHA256SUMS").read_text().replace("a", "b", 1))
    age(copy)
    result = run("validate", "-C", copy, importtime=True)
    assert result.returncode == 1 and "pydantic" in imported(result)


def test_a_new_file_is_a_new_tree(vouched):
    assert run("validate", "-C", vouched).returncode == 0
    stray = vouched / BASE / "stray.txt"
    stray.write_text("not listed anywhere")
    age(vouched)
    assert run("validate", "-C", vouched).returncode == 1


def test_a_folder_that_is_not_there_is_not_vouched_for_by_the_registry_above(vouched):
    assert run("validate", "-C", vouched).returncode == 0
    assert run("validate", "-C", vouched / "no-such-folder").returncode != 0


def test_a_verdict_without_this_users_seal_vouches_for_nothing(vouched):
    """Issue 38: .registry/ arrives with a folder, so a verdict for this very tree (its fingerprint
    right) counts only under this user's seal; one forged or edited makes the command run in full."""
    assert run("validate", "-C", vouched).returncode == 0
    path = vouched / ".registry" / "verdict.json"
    kept = json.loads(path.read_text())
    assert (
        run("validate", "-C", vouched, importtime=True).returncode == 0
    )  # sealed: recalled (checked by the budget test)
    for forged in ({**kept, "seal": "0" * 64}, {k: v for k, v in kept.items() if k != "seal"}):
        path.write_text(json.dumps(forged))
        result = run("validate", "-C", vouched, importtime=True)
        assert result.returncode == 0 and "pydantic" in imported(result), forged.keys()
