"""The tool as users install it: the built wheel, in a fresh virtual environment, run from a
directory outside the clone (how pre-commit, the GitHub Action and CI install it); the
environments (``installed``, ``light``) are tests/installed_wheel.py's fixtures."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from registry.artifacts.synthetic import make_base_checkpoint
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.init import init_registry

from .installed_wheel import CLONE, INSTALLED_GROUP, venv_environment
from .test_gguf import BASE, WORLD, _accept, _registered_without_gate

pytestmark = [pytest.mark.wheel, pytest.mark.xdist_group(INSTALLED_GROUP)]

pytest_plugins = ["tests.installed_wheel"]


def test_the_wheel_carries_templates_kernels_schemas_catalog_and_py_typed(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        "registry/_bundled/catalog.json": CLONE / "index.json",
        **{
            f"registry/_bundled/{p.relative_to(CLONE).as_posix()}": p
            for d in ("templates", "kernels", "schemas")
            for p in (CLONE / d).rglob("*")
            if p.is_file()
        },
    }
    assert len(expected) > 15 and set(expected) <= names
    assert "registry/py.typed" in names
    with zipfile.ZipFile(wheel) as archive:
        for name, source in expected.items():
            assert archive.read(name) == source.read_bytes(), name


def test_installed_demo_validate_card_check_and_the_pre_commit_hook_entries(installed, demo):
    assert not demo.is_relative_to(CLONE)
    for registry in (demo, demo.parent / "finetune-registry"):  # the seed-001-shaped and seed-000-shaped registries
        assert installed.registry("validate", "-C", registry).returncode == 0
        assert installed.registry("card", "--check", "-C", registry).returncode == 0
    hooks = yaml.safe_load((CLONE / ".pre-commit-hooks.yaml").read_text())
    assert {h["id"] for h in hooks} == {"registry-validate", "registry-card-check"}
    for hook in hooks:
        command = hook["entry"].split()
        assert command[0] == "registry" and hook["pass_filenames"] is False
        ok = installed.registry(*command[1:], cwd=demo)
        assert ok.returncode == 0, (hook["id"], ok.stdout, ok.stderr)
    # The hooks fail on a broken registry, naming the problem.
    broken = installed.cwd / "broken"
    shutil.copytree(demo, broken)
    with open(broken / "README.md", "a", encoding="utf-8") as card:
        card.write("edited by hand\n")
    for hook in hooks:
        failed = installed.registry(*hook["entry"].split()[1:], cwd=broken)
        assert failed.returncode == 1 and "README.md" in failed.stdout + failed.stderr


def test_installed_refusals_under_json_are_one_document_on_stdout(installed):
    missing = installed.registry("list", "-C", installed.cwd / "nonexistent", "--json")
    document = json.loads(missing.stdout)
    assert missing.returncode == 3 and document["ok"] is False
    assert document["problems"][0]["code"] == "layout.not-a-registry" and "fix" in document["problems"][0]
    assert missing.stderr.startswith("error: ") and missing.stderr.count("\n") == 1

    usage = installed.registry("validate", "--json", "--no-such-option")
    assert usage.returncode == 2 and json.loads(usage.stdout)["problems"][0]["code"] == "usage"


def test_a_base_missing_from_the_catalog_is_reported(installed):
    base = installed.cwd / "rwkv7-unknown-base-20260101.pth"
    make = (
        "from registry.artifacts.synthetic import TinySpec, make_base_checkpoint; import sys; "
        "make_base_checkpoint(sys.argv[1], TinySpec(n_layer=2, n_embd=128, vocab_size=512))"
    )
    subprocess.run([installed.python, "-c", make, base], check=True, cwd=installed.cwd, env=venv_environment())
    registry = installed.cwd / "unknown-base"
    assert installed.registry("init", registry).returncode == 0
    added = installed.registry("add-base", base, "-C", registry, "--json")
    assert added.returncode == 0 and json.loads(added.stdout)["in_catalog"] is False

    second = installed.cwd / "unknown-base-human"
    assert installed.registry("init", second).returncode == 0
    human = installed.registry("add-base", base, "-C", second)
    assert human.returncode == 0 and "not in the known-bases catalog" in human.stderr and human.stderr.count("\n") == 1


@pytest.fixture
def damage(installed):
    """Damage one file of the installed package for one test, then put it back."""
    saved: list[tuple[Path, bytes]] = []

    def apply(relative: str, data: bytes | None) -> Path:
        path = installed.site_file("_bundled", *relative.split("/"))
        saved.append((path, path.read_bytes()))
        if data is None:
            path.unlink()
        else:
            path.write_bytes(data)
        return path

    yield apply
    for path, data in saved:
        path.write_bytes(data)


@pytest.mark.parametrize("data", [None, b"{% if %}\n", b"\xff\xfe not UTF-8\n"], ids=["missing", "broken", "not-utf8"])
def test_a_damaged_installed_template_is_one_line_and_init_leaves_nothing(installed, damage, data):
    path = damage("templates/card/overview.md.j2", data)
    target = installed.cwd / f"new-{data is None}-{len(data or b'')}"
    result = installed.registry("init", target)
    assert result.returncode == 3 and result.stderr.count("\n") == 1, result.stderr
    assert str(path) in result.stderr and "reinstall" in result.stderr and "Traceback" not in result.stderr
    assert not target.exists()
    existing = installed.cwd / f"empty-{target.name}"
    existing.mkdir()
    assert installed.registry("init", existing).returncode == 3 and list(existing.iterdir()) == []


def test_a_missing_installed_kernel_source_is_one_line(installed, damage, demo):
    path = damage("kernels/wkv7_fwd.cu", None)
    script = "from registry.gate.kernel import kernel_source_hash; kernel_source_hash()"
    crashed = subprocess.run(
        [installed.python, "-c", script], cwd=installed.cwd, capture_output=True, text=True, env=venv_environment()
    )
    assert crashed.returncode != 0 and str(path) in crashed.stderr  # the library raises the refusal
    listing = json.loads(installed.registry("list", "-C", demo, "--json").stdout)
    entry = next(e for e in listing["entries"] if e["method"] == "state")
    base = next(b for b in listing["bases"] if b["sha256"] == entry["base_sha256"])
    result = installed.registry(
        "smoke", entry["path"], "--device", "cpu", "--base-file", demo.parent / "inputs" / base["filename"], "-C", demo
    )
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]  # after the gate's step lines
    assert result.returncode == 3 and len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert str(path) in errors[0] and "reinstall" in errors[0]


def test_the_light_install_validates_without_torch_and_says_what_tensor_commands_need(light, installed, demo):
    no_torch = subprocess.run([light.python, "-c", "import torch"], capture_output=True, env=venv_environment())
    assert no_torch.returncode != 0
    copy = light.cwd / "registry"
    shutil.copytree(demo, copy)
    assert light.registry("validate", "-C", copy).returncode == 0
    assert light.registry("card", "--check", "-C", copy).returncode == 0
    assert light.registry("list", "-C", copy, "--json").returncode == 0
    # Registering weights reads them without torch (registry/artifacts/torch_zip.py) ...
    base = next((demo.parent / "inputs").glob("*.pth"))
    fresh = light.cwd / "fresh"
    assert light.registry("init", fresh).returncode == 0
    added = light.registry("add-base", base, "-C", fresh, "--json")
    assert added.returncode == 0 and json.loads(added.stdout)["architecture"]["n_layer"] > 0, added.stderr
    # ... the gate computes with tensors, and says which extra it needs.
    refused = light.registry("smoke", "--device", "cpu", "-C", copy)
    assert refused.returncode == 3 and "install.needs-torch" not in refused.stderr
    assert "pip install 'rwkv-registry[torch]'" in refused.stderr and refused.stderr.count("\n") == 1


def test_the_light_install_validates_a_registry_holding_a_gguf_and_its_hooks_pass(light, tmp_path):
    """The pre-commit hooks (what `pip install .` gives, no gguf package, no torch) on a registry
    with a GGUF file: validate reads its header with the plain-Python reader; a damaged file is
    found, with a fix line that points at export-gguf."""
    pytest.importorskip("gguf", reason="making the GGUF needs the gguf extra")
    pytest.importorskip("llama_cpp", reason="making the GGUF needs the gguf extra")

    assert (
        subprocess.run([light.python, "-c", "import gguf"], capture_output=True, env=venv_environment()).returncode != 0
    )
    base = make_base_checkpoint(tmp_path / f"{BASE}.pth", WORLD)
    root = init_registry(light.cwd / "with-gguf").root
    add_base(root, BaseRequest(path=base, filename=base.name, vocab="rwkv_vocab_v20230424.txt"))
    rel = _registered_without_gate(root, base)
    clean = light.registry("validate", "-C", root, "--json")
    assert clean.returncode == 0 and json.loads(clean.stdout)["ok"], clean.stdout + clean.stderr
    for hook in yaml.safe_load((CLONE / ".pre-commit-hooks.yaml").read_text()):
        ran = light.registry(*hook["entry"].split()[1:], cwd=root)
        assert ran.returncode == 0, (hook["id"], ran.stdout, ran.stderr)

    data = (root / rel).read_bytes()
    (root / rel).write_bytes(data[: len(data) - 4096])
    _accept(root, rel)
    found = light.registry("validate", "-C", root)
    said = found.stdout + found.stderr
    assert found.returncode == 1 and "cannot be checked" not in said
    (line,) = [line for line in said.splitlines() if line.startswith(f"gguf.invalid {rel}: ")]
    assert "is truncated: its tensors end at byte" in line and line.endswith(
        "fix: make it again with `registry export-gguf --force` (or remove the file and its record in ggufs)"
    )
