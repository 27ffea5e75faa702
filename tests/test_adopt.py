"""Existing Hub repos: registries found from any subfolder, init beside kept files, the root files
users keep, Git LFS pointers, ``registry adopt`` of hand-made repos and the way back from a
Hub-side change (issue 27).

The hand-made repos are built the way people build them: files placed with plain writes and
``cp``, SHA256SUMS by coreutils' ``sha256sum``, a hand-written index.json and README.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry.cli import main
from registry.ops.init import init_registry
from registry.ops.sums import write_sums
from registry.ops.validate import validate

from .conftest import snapshot


def run(*args, code: int | None = None):
    result = CliRunner().invoke(main, [str(a) for a in args])
    if code is not None:
        assert result.exit_code == code, result.output
    return result


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
    assert attributes.startswith("*.bin filter=lfs") and "*.pth filter=lfs" in attributes and "*.safetensors filter=lfs" in attributes
    card = (root / "README.md").read_text()
    assert readme in card  # the whole text, as the card's hand-written section
    assert "LICENSE" in (root / "SHA256SUMS").read_text()
    assert codes(root) == set()
    assert run("card", "--check", "-C", root).exit_code == 0
    run("init", tmp_path / "again", code=0)
    assert (tmp_path / "again" / ".gitignore").read_text() == ".registry/\n"


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
    import hashlib

    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(data).hexdigest()}\nsize {len(data)}\n".encode()


def test_an_lfs_pointer_is_named_once_with_git_lfs_pull_never_allow_rewrite(empty_registry, small_base, tmp_path):
    from registry.ops.add import AddRequest, add_weight
    from registry.ops.add_base import BaseRequest, add_base
    from registry.published import record_published
    from registry.repo import Repo
    from registry.sums import parse_sums
    from registry.synthetic import make_state_file

    from .conftest import SMALL
    from .test_ops_artifacts import train_json

    root = empty_registry
    add_base(root, BaseRequest(path=small_base, filename=small_base.name))
    state = make_state_file(tmp_path / "s1.pth", SMALL)
    entry = add_weight(root, AddRequest(state, small_base.stem, "state", "v1.41", train_json(tmp_path / "t.json")))
    record_published(Repo(root), parse_sums((root / "SHA256SUMS").read_bytes()))
    (root / entry.path).write_bytes(lfs_pointer(root / entry.path))
    before = snapshot(root)

    assert [(p.code, p.file) for p in validate(root)] == [("lfs.pointer", entry.path)]
    for args in (["validate", "-C", root], ["validate", "-C", root, "--allow-rewrite", "why"], ["sums", "-C", root], ["convert", entry.path, "-C", root]):
        result = run(*args)
        assert result.exit_code in (1, 3), (args, result.output)
        assert f"{entry.path}: a Git LFS pointer, not the file; fix: git lfs pull" in result.output, (args, result.output)
        assert "allow-rewrite" not in result.output.replace("--allow-rewrite why", ""), (args, result.output)
    pointer = tmp_path / "pointer.pth"
    pointer.write_bytes((root / entry.path).read_bytes())
    result = run("add", pointer, "-C", root, "--base", small_base.stem, "--method", "state", "--data-version", "v1.42", "--train-json", tmp_path / "t.json", code=3)
    assert result.output.strip().endswith("a Git LFS pointer, not the file; fix: git lfs pull")
    base_pointer = tmp_path / "rwkv7-tiny-b-20260101.pth"
    base_pointer.write_bytes(lfs_pointer(small_base))
    result = run("add-base", base_pointer, "-C", root, code=3)
    assert result.output == f"error: {base_pointer}: a Git LFS pointer, not the file; fix: git lfs pull\n"
    assert snapshot(root) == before
