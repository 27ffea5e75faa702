"""The built wheel installed in fresh virtual environments, run from directories outside the clone:
fixtures shared by the tests of the installed tool (tests/test_wheel.py) and of its demo
(tests/test_demo.py).  A plugin (``pytest_plugins``), so each session fixture is built once per
worker; the tests that use them share one xdist group (``INSTALLED_GROUP``), so one worker does
(mostly: see ``INSTALLED_GROUP``).

Two environments:

* ``installed``: the wheel in a venv that sees the site-packages of the interpreter running the
  tests, whether that is a system Python or itself a venv (torch and the other dependencies come
  from there; the wheel itself is installed with ``--no-deps``);
* ``light``: the wheel with its declared dependencies only, no torch at all, as
  ``pip install rwkv-registry`` (and so a pre-commit hook) gets it.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import user_environment

# The demo takes half a minute: the tests that use these fixtures run on one xdist worker (README's
# `--dist loadgroup`).  xdist does not always keep a group whole: a clean-clone run of 2026-12-07
# gave three of its tests to the other worker, whose wheel build collided with this one's in build/.
INSTALLED_GROUP = "wheel"

CLONE = Path(__file__).resolve().parents[1]


def venv_environment() -> dict[str, str]:
    """The user's environment for a process of a test venv: without PYTHONPATH (which would put a
    checkout's ``registry`` and its egg-info ahead of the venv's wheel) or the tool's settings."""
    return {
        k: v
        for k, v in user_environment().items()
        if k not in ("PYTHONPATH", "PYTHONHOME") and not k.startswith(("RWKV_REGISTRY", "REGISTRY_DEBUG"))
    }


@dataclass
class Venv:
    root: Path
    cwd: Path  # outside the clone

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def site_file(self, *parts: str) -> Path:
        """A file of the installed package (inside the venv, never the checkout)."""
        out = subprocess.run(
            [self.python, "-c", "import registry, sys; print(registry.__file__)"],
            cwd=self.cwd,
            capture_output=True,
            text=True,
            check=True,
            env=venv_environment(),
        )
        package = Path(out.stdout.strip()).parent
        assert package.is_relative_to(self.root), f"registry imported from {package}, not from the venv"
        return package.joinpath(*parts)

    def registry(
        self, *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        environment = {**venv_environment(), **(env or {})}
        return subprocess.run(
            [self.root / "bin" / "registry", *map(str, args)],
            cwd=cwd or self.cwd,
            capture_output=True,
            text=True,
            env=environment,
            timeout=600,
        )


def _pip(python: Path, *args: str | Path) -> None:
    """pip install into the venv of ``python``: this interpreter's pip, pointed at it (``--python``),
    so the venvs are made without a pip of their own (ensurepip: seconds each)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "-q",
            "--disable-pip-version-check",
            *map(str, args),
        ],
        check=True,
        timeout=900,
        env=venv_environment(),
    )


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # pip builds in the clone's build/ folder, one build at a time ("File exists: build/bdist.linux-
    # x86_64/wheel/…dist-info" when two workers built at once): a lock in that folder takes them in turn.
    (CLONE / "build").mkdir(exist_ok=True)
    with open(CLONE / "build" / "tests-wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # --no-build-isolation: setuptools is already here (torch depends on it); no download needed.
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out, CLONE],
            check=True,
            cwd=out,
            timeout=600,
        )
    (built,) = out.glob("rwkv_registry-*.whl")
    return built


def running_site_packages() -> list[str]:
    """The site-packages folders this interpreter imports from: its own and, when it is a venv
    made with --system-site-packages, its base's (``venv --system-site-packages`` would give the
    new venv the *base* interpreter's only, without what this venv installed)."""
    return [
        entry for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages") and Path(entry).is_dir()
    ]


@pytest.fixture(scope="session")
def installed(tmp_path_factory, wheel) -> Venv:
    root = tmp_path_factory.mktemp("venv-installed")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", root], check=True)
    venv_site = subprocess.run(
        [root / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        env=venv_environment(),
    ).stdout.strip()
    # Plain folder lines: appended after the venv's own site-packages (its wheel wins), and the
    # .pth files in them (an editable install of this clone) are not run.
    (Path(venv_site) / "running-interpreter.pth").write_text("".join(f"{entry}\n" for entry in running_site_packages()))
    _pip(root / "bin" / "python", "--no-deps", "--force-reinstall", wheel)
    return Venv(root, tmp_path_factory.mktemp("elsewhere"))


@pytest.fixture(scope="session")
def light(tmp_path_factory, wheel) -> Venv:
    root = tmp_path_factory.mktemp("venv-light")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", root], check=True)
    _pip(root / "bin" / "python", wheel)
    return Venv(root, tmp_path_factory.mktemp("elsewhere-light"))


@pytest.fixture(scope="session")
def demo_run(installed) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The demo run once, as a user runs it: the installed tool in its own process, from a folder
    outside the clone, ``--json``; for every test that inspects what it built and printed."""
    directory = installed.cwd / "demo"
    return directory, installed.registry("demo", directory, "--json")


@pytest.fixture(scope="session")
def demo(demo_run) -> Path:
    """The demo's seed-001-shaped registry."""
    directory, result = demo_run
    assert result.returncode == 0, result.stderr
    return directory / "registry"
