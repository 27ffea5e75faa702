"""The machine fails, the tool says so in one line: a distinct exit code (5), the registry
unchanged, staging cleaned by the next command, and a re-run after the cause is fixed succeeds."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry.artifacts.synthetic import make_base_checkpoint
from registry.cli import main
from registry.core import sigbus
from registry.core.names import PRIVATE_DIR, STAGING_NAME

from .conftest import SMALL, snapshot
from .test_crash import _base, inputs, registry, train_json  # noqa: F401  (fixture)

CLI = [sys.executable, "-m", "registry"]


def run_limited(args: list, limit_bytes: int) -> subprocess.CompletedProcess[str]:
    """Run the CLI with RLIMIT_FSIZE: writes past it fail with EFBIG (Python ignores SIGXFSZ)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, preexec_fn=limit, timeout=300)


def test_a_write_the_machine_refuses_is_one_line_and_a_rerun_succeeds(inputs, tmp_path):
    reg = tmp_path / "reg"
    _base(reg, inputs)
    full = make_base_checkpoint(tmp_path / "full.pth", SMALL)
    args = [
        "add",
        full,
        "-C",
        reg,
        "--base",
        "rwkv7-crash-20260101",
        "--method",
        "full",
        "--data-version",
        "v1.0",
        "--train-json",
        train_json(tmp_path / "t.json"),
    ]
    before = snapshot(reg)
    failed = run_limited([*args, "--json"], 256 << 10)
    assert failed.returncode == 5 and failed.stderr.startswith("error: ") and failed.stderr.count("\n") == 1, (
        failed.stderr
    )
    assert "File too large" in failed.stderr and "ulimit -f" in failed.stderr and "Traceback" not in failed.stderr
    assert '"ok": false' in failed.stdout and snapshot(reg) == before
    assert list((reg / PRIVATE_DIR / STAGING_NAME).iterdir()) == []  # the transaction removed its temp files
    registry(*args)  # the cause is gone: the same command succeeds
    assert registry("validate", "-C", reg).returncode == 0


@pytest.fixture
def immutable():
    """chattr +i: EPERM even for root (the tests run as root, so mode bits cannot refuse)."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed: cannot make a file refuse root's writes")
    marked: list[Path] = []

    def mark(path: Path) -> None:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            pytest.skip("this file system does not support chattr +i")
        marked.append(path)

    yield mark
    for path in marked:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("what", ["lock", "private-folder"])
def test_a_private_folder_the_user_cannot_write_is_one_line(inputs, tmp_path, immutable, what):
    reg = tmp_path / "reg"
    _base(reg, inputs)
    (reg / PRIVATE_DIR / STAGING_NAME).mkdir(exist_ok=True)
    immutable(reg / PRIVATE_DIR / ("lock" if what == "lock" else STAGING_NAME))
    before = snapshot(reg)
    args = ["card", "-C", reg]
    failed = registry(*args, check=False)
    assert failed.returncode == 5 and failed.stderr.count("\n") == 1 and "Operation not permitted" in failed.stderr, (
        failed.stderr
    )
    assert "Traceback" not in failed.stderr and snapshot(reg) == before
    subprocess.run(["chattr", "-i", str(reg / PRIVATE_DIR / ("lock" if what == "lock" else STAGING_NAME))], check=True)
    registry(*args)


SHRINK = """
import mmap, os, sys
from registry.core import sigbus
from registry.core.pinned import pinned
sigbus.install()
with pinned(sys.argv[1], "weight file") as source:
    mapping = mmap.mmap(source.fd, 0, prot=mmap.PROT_READ)
    os.truncate(sys.argv[1], 0)  # another process truncates the file while it is mapped
    print(mapping[len(mapping) // 2])
"""


def test_a_file_that_shrinks_while_mapped_is_one_line_not_a_silent_death(tmp_path):
    source = tmp_path / "s.pth"
    source.write_bytes(bytes(1 << 20))
    died = subprocess.run([sys.executable, "-c", SHRINK, str(source)], capture_output=True, text=True, timeout=60)
    assert died.returncode == 5, (died.returncode, died.stderr)
    assert (
        died.stderr
        == f"error: {source}: the file shrank while it was being read (SIGBUS); nothing was changed; fix: run "
        "the command again once nothing else writes to it\n"
    )


def test_the_cli_installs_the_sigbus_handler(empty_registry):
    assert CliRunner().invoke(main, ["list", "-C", str(empty_registry)]).exit_code == 0
    assert sigbus._installed
