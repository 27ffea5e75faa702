"""Registry core: init, SHA256SUMS, validate findings, safe writes."""

from __future__ import annotations

import json
import mmap
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry.cli import main
from registry.core.errors import RegistryError
from registry.core.hashing import StatCache, hash_file
from registry.core.hashing import tree as tree_module
from registry.core.hashing.engine import MAPPED_WINDOW, hash_in_background, hash_mapped
from registry.core.libc import mapped, same_bytes
from registry.core.models import INDEX_FORMAT_VERSION, Base, Index
from registry.core.repo import render_index
from registry.core.resources import schema_dir
from registry.core.sums import parse_sums, render_sums
from registry.index.schema_files import all_models, render_schema
from registry.ops.init import init_registry
from registry.ops.sums import write_sums
from registry.ops.validate import validate, validate_index_file

from .conftest import sha256_of, snapshot

PROJECT = Path(__file__).resolve().parent.parent


def codes(root: Path) -> set[str]:
    return {f.code for f in validate(root)}


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_init_creates_valid_registry_checkable_by_coreutils(empty_registry):
    assert validate(empty_registry) == []
    names = sorted(p.name for p in empty_registry.iterdir())
    assert "index.json" in names and "SHA256SUMS" in names and ".gitattributes" in names
    subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=empty_registry, check=True)


def test_init_refuses_existing_registry(empty_registry):
    with pytest.raises(RegistryError) as err:
        init_registry(empty_registry)
    assert err.value.code == "init.exists"


def test_sums_format_sorted_lf_two_spaces():
    data = render_sums({"b/x.pth": "b" * 64, "a.json": "a" * 64})
    assert data == ("a" * 64 + "  a.json\n" + "b" * 64 + "  b/x.pth\n").encode()
    assert parse_sums(data) == {"a.json": "a" * 64, "b/x.pth": "b" * 64}


@pytest.mark.parametrize(
    "bad",
    [
        b"zz  file\n",
        b"a" * 64 + b" file\n",
        b"A" * 64 + b"  file\n",
        b"a" * 64 + b"  file",
        b"a" * 64 + b"  f\n" + b"b" * 64 + b"  f\n",
    ],
)
def test_sums_parse_rejects_malformed(bad):
    with pytest.raises(RegistryError) as err:
        parse_sums(bad)
    assert err.value.code in {"sums.malformed", "sums.duplicate"}


def test_validate_reports_sums_problems(empty_registry):
    sums = empty_registry / "SHA256SUMS"
    original = sums.read_bytes()
    sums.write_bytes(original.replace(original[:4], b"0000"))
    assert "sums.mismatch" in codes(empty_registry)
    sums.write_bytes(original + b"f" * 64 + b"  ghost.json\n")
    assert "sums.missing-file" in codes(empty_registry)
    sums.write_bytes(b"")
    assert "sums.unlisted-file" in codes(empty_registry)
    sums.write_bytes(b"not a sums line\n")
    assert "sums.malformed" in codes(empty_registry)
    sums.unlink()
    assert "sums.missing" in codes(empty_registry)


def test_malformed_and_schema_breaking_json(empty_registry):
    index = empty_registry / "index.json"
    index.write_text('{"bases": [', encoding="utf-8")
    findings = validate(empty_registry)
    assert findings[0].code == "json.malformed" and findings[0].file.startswith("index.json:")
    index.write_text(json.dumps({"format_version": INDEX_FORMAT_VERSION, "bases": [{"name": "x"}]}), encoding="utf-8")
    findings = validate(empty_registry)
    assert {f.code for f in findings} == {"schema.invalid"}
    assert any("$.bases[0]" in f.message for f in findings)


def test_cli_validate_json_output_and_exit(empty_registry):
    ok = run("validate", empty_registry, "--json")
    assert ok.exit_code == 0 and json.loads(ok.output) == {
        "ok": True,
        "problems": [],
        "not_covered": [".gitignore"],
    }  # init writes .gitignore, which validate never checks
    (empty_registry / "stray.txt").write_text("x")
    bad = run("validate", empty_registry, "--json")
    assert bad.exit_code == 1
    finding = json.loads(bad.output)["problems"][0]
    assert set(finding) == {"code", "file", "message", "fix"}


def test_stray_symlink_and_bad_names(empty_registry):
    (empty_registry / "notes.txt").write_text("x")
    outside = empty_registry.parent / "outside.pth"
    outside.write_bytes(b"secret")
    os.symlink(outside, empty_registry / "link.pth")
    (empty_registry / "we\nird.pth").write_bytes(b"x")
    (empty_registry / "back\\slash.pth").write_bytes(b"x")
    found = {f.code: f for f in validate(empty_registry)}
    assert {"layout.stray-file", "layout.symlink", "layout.bad-name"} <= set(found)
    assert "outside.pth" in found["layout.symlink"].message


def test_symlinked_directory_is_not_followed(empty_registry, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "big.pth").write_bytes(b"x")
    os.symlink(elsewhere, empty_registry / "rwkv7-x")
    findings = validate(empty_registry)
    assert [f.code for f in findings] == ["layout.symlink"]


def test_unknown_method_bad_version_unlisted_weight(empty_registry):
    index = Index.model_validate_json((empty_registry / "index.json").read_text())
    index.bases.append(Base(name="b1", filename="b1.pth", sha256="1" * 64))
    (empty_registry / "index.json").write_bytes(render_index(index))
    for rel in ("b1/lora/v1/x.pth", "b1/state/1.0/x.pth", "b1/state/v1/x.pth"):
        (empty_registry / rel).parent.mkdir(parents=True, exist_ok=True)
        (empty_registry / rel).write_bytes(b"x")
    found = codes(empty_registry)
    assert {
        "layout.unknown-method",
        "layout.bad-data-version",
        "index.unlisted-weight",
        "layout.missing-train-json",
    } <= found


def test_empty_directory_and_missing_index(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert [f.code for f in validate(empty)] == ["layout.empty"]
    result = run("validate", empty)
    assert result.exit_code == 1 and "registry init" in result.output


def test_read_only_directory_refused_and_unchanged(empty_registry):
    before = snapshot(empty_registry)
    (empty_registry / "index.json").write_bytes((empty_registry / "index.json").read_bytes())
    os.chmod(empty_registry, 0o555)
    try:
        result = run("sums", empty_registry)
        assert result.exit_code == 5  # the machine (permissions), not the input
        assert "read-only" in result.output and "chmod" in result.output
    finally:
        os.chmod(empty_registry, 0o755)
    assert snapshot(empty_registry) == before


def test_failed_command_leaves_registry_byte_identical(empty_registry):
    (empty_registry / "index.json").write_text("{broken", encoding="utf-8")
    before = snapshot(empty_registry)
    result = run("sums", empty_registry)
    # sums itself does not parse the index; validate must still flag it and nothing else changed
    assert result.exit_code == 0
    assert snapshot(empty_registry)["index.json"] == before["index.json"]
    assert not list((empty_registry / ".registry" / "staging").iterdir())


def test_stat_cache_skips_unchanged_and_rehashes_changed(tmp_path, monkeypatch):
    root = tmp_path
    f = root / "a.bin"
    f.write_bytes(b"1" * 1000)
    old = time.time() - 10
    os.utime(f, (old, old))
    cache_path = root / ".registry" / "statcache.json"
    hashed: list[Path] = []
    real = tree_module.hash_files

    def counting(paths, progress=None, workers=None):
        paths = list(paths)
        hashed.extend(paths)
        return real(paths, progress, workers)

    monkeypatch.setattr(tree_module, "hash_files", counting)
    first = tree_module.digest_tree(root, ["a.bin"], StatCache(cache_path))
    assert hashed == [f]
    hashed.clear()
    assert tree_module.digest_tree(root, ["a.bin"], StatCache(cache_path)) == first and hashed == []
    f.write_bytes(b"2" * 1000)  # same size, rewritten now: must be re-hashed
    second = tree_module.digest_tree(root, ["a.bin"], StatCache(cache_path))
    assert hashed == [f] and second != first


def test_hash_file_matches_sha256sum(tmp_path):
    f = tmp_path / "x"
    f.write_bytes(os.urandom(3 * (1 << 20) + 17))
    out = subprocess.run(["sha256sum", str(f)], capture_output=True, text=True, check=True).stdout.split()[0]
    assert hash_file(f) == out == sha256_of(f)


def test_schemas_checked_in_match_models():
    for kind in all_models():
        path = schema_dir() / f"{kind}.schema.json"
        assert path.read_text(encoding="utf-8") == render_schema(kind), (
            f"{path} drifted: run `python -m registry.index.schema_files`"
        )


def test_project_catalog_is_valid_and_holds_the_seed_base():
    assert validate_index_file(PROJECT / "index.json") == []
    catalog = Index.model_validate_json((PROJECT / "index.json").read_text())
    base = catalog.base_by_name("rwkv7-g1k-7.2b-20260930-ctx25600")
    assert base.sha256 == "0853d4ce2e4e0629762797d05036a84cc69fb2fb9eff5590dd22aeb518a4c842"
    assert base.source == "BlinkDL/rwkv7-g1" and base.vocab == "rwkv_vocab_v20230424.txt"
    assert catalog.entries == []


def test_sums_command_rewrites_after_change(empty_registry):
    card = empty_registry / "README.md"
    card.write_text(card.read_text(encoding="utf-8").replace("这一段由人维护", "hello"), encoding="utf-8")
    assert "sums.mismatch" in codes(empty_registry)
    write_sums(empty_registry)
    assert validate(empty_registry) == []
    shutil.rmtree(empty_registry / ".registry")
    assert validate(empty_registry) == []


def _index_with_entry(root: Path, **overrides) -> dict:
    data = json.loads((root / "index.json").read_text())
    data["bases"] = [{"name": "b1", "filename": "b1.pth", "sha256": "1" * 64}]
    entry = {
        "path": "b1/state/v1/x.pth",
        "method": "state",
        "base_sha256": "1" * 64,
        "data": {"version": "v1", "sha256": "2" * 64},
        "sha256": "3" * 64,
        "size": 1,
    }
    entry.update(overrides)
    data["entries"] = [entry]
    return data


@pytest.mark.parametrize("bad_path", ["../outside.pth", "/etc/passwd", "b1/state/v1/../../x.pth", "b1//x.pth"])
def test_entry_path_that_leaves_the_root_is_refused(empty_registry, bad_path):
    (empty_registry / "index.json").write_text(json.dumps(_index_with_entry(empty_registry, path=bad_path)))
    findings = validate(empty_registry)
    assert any(f.code == "schema.invalid" and "$.entries[0].path" in f.message for f in findings), findings


def test_duplicate_entry_and_unknown_method_in_index(empty_registry):
    data = _index_with_entry(empty_registry)
    data["entries"].append(dict(data["entries"][0]))
    (empty_registry / "index.json").write_text(json.dumps(data))
    assert "index.duplicate-entry" in codes(empty_registry)
    (empty_registry / "index.json").write_text(json.dumps(_index_with_entry(empty_registry, method="lora")))
    findings = validate(empty_registry)
    assert any(f.code == "schema.invalid" and "$.entries[0].method" in f.message for f in findings)


def test_index_sha_must_equal_sums_sha(empty_registry, tmp_path):
    """An entry whose recorded sha256 differs from the file (and so from SHA256SUMS) is flagged."""
    data = _index_with_entry(empty_registry)
    (empty_registry / "b1" / "state" / "v1").mkdir(parents=True)
    (empty_registry / "b1" / "state" / "v1" / "x.pth").write_bytes(b"x")
    (empty_registry / "b1" / "state" / "v1" / "train.json").write_text(
        json.dumps(
            {"trainer": {"name": "t", "version": "1"}, "hyperparameters": {}, "command": "c", "data_sha256": "2" * 64}
        )
    )
    (empty_registry / "index.json").write_text(json.dumps(data))
    write_sums(empty_registry)
    assert "index.sha-mismatch" in codes(empty_registry)


def test_same_bytes_sees_any_difference_and_length():
    a = memoryview(bytearray(os.urandom(1 << 16)))
    b = memoryview(bytearray(a))
    assert same_bytes(a, b) and same_bytes(a[:0], b[:0])
    for position in (0, len(a) // 2, len(a) - 1):
        b[position] ^= 1
        assert not same_bytes(a, b)
        b[position] ^= 1
    assert not same_bytes(a, b[:-1])
    assert same_bytes(bytes(a), a) and not same_bytes(bytes(a), b"x" * len(a))  # read-only buffers too


def test_mapped_reads_any_range_and_lets_go(tmp_path):
    data = os.urandom(3 * mmap.ALLOCATIONGRANULARITY + 123)
    path = tmp_path / "f"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        for offset, length in [
            (0, len(data)),
            (1, 10),
            (mmap.ALLOCATIONGRANULARITY + 7, 5000),
            (len(data) - 3, 3),
            (17, 0),
        ]:
            with mapped(fd, offset, length) as view:
                assert bytes(view) == data[offset : offset + length]
            if length:
                with pytest.raises(ValueError):  # released with its mapping: nothing stays mapped
                    len(view)
        with pytest.raises(EOFError):  # past the end: refused before mapping, not a SIGBUS
            with mapped(fd, len(data) - 10, 11):
                pass
    finally:
        os.close(fd)


def test_console_entry_flushes_output_and_keeps_exit_codes(tmp_path):
    """``python -m registry`` goes through the entry point that skips the interpreter teardown:
    what the command printed still arrives, and refusals still exit non-zero."""

    def registry(*args):
        return subprocess.run([sys.executable, "-m", "registry", *args], capture_output=True, text=True, cwd=tmp_path)

    created = registry("init", "reg", "--title", "T")
    assert created.returncode == 0, created.stderr
    listed = registry("list", "-C", "reg", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["bases"] == []
    refused = registry("validate", "missing")
    assert refused.returncode == 3 and refused.stderr.startswith("error: ") and refused.stderr.count("\n") == 1
    usage = registry("no-such-command")
    assert usage.returncode == 2 and "No such command" in usage.stderr


def test_mapped_and_background_hashes_agree_with_sha256sum(tmp_path):
    for size in (0, 1, MAPPED_WINDOW + 4097):
        path = tmp_path / f"f{size}"
        path.write_bytes(os.urandom(size))
        expected = subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[
            0
        ]
        assert hash_mapped(path) == expected == hash_in_background(path).result(timeout=60)


def test_background_hash_of_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(RegistryError) as err:
        hash_in_background(tmp_path / "gone.pth").result(timeout=60)
    assert err.value.code == "fs.read-failed" and "gone.pth" in err.value.one_line()


def test_a_stat_cache_that_arrived_with_the_folder_vouches_for_nothing(tmp_path, monkeypatch):
    """Issue 38: .registry/statcache.json is untrusted input; one the tool did not seal (a clone's, a
    forged one naming the file's current stat and another sha256) makes no file skip its hashing."""

    f = tmp_path / "a.bin"
    f.write_bytes(b"1" * 1000)
    old = time.time() - 10
    os.utime(f, (old, old))
    st = f.stat()
    cache_path = tmp_path / ".registry" / "statcache.json"
    cache_path.parent.mkdir()
    forged = [st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_ctime_ns, "0" * 64]
    for form in (
        {"version": 2, "files": {"a.bin": forged}},
        {"content": {"version": 2, "files": {"a.bin": forged}}, "seal": "00" * 32},
    ):
        cache_path.write_text(json.dumps(form))
        assert tree_module.digest_tree(tmp_path, ["a.bin"], StatCache(cache_path)) == {"a.bin": sha256_of(f)}


def test_a_fifo_at_the_stat_cache_is_neither_read_nor_replaced(tmp_path):
    f = tmp_path / "a.bin"
    f.write_bytes(b"1" * 1000)
    os.utime(f, (time.time() - 10,) * 2)
    cache_path = tmp_path / ".registry" / "statcache.json"
    cache_path.parent.mkdir()
    os.mkfifo(cache_path)
    assert tree_module.digest_tree(tmp_path, ["a.bin"], StatCache(cache_path)) == {"a.bin": sha256_of(f)}
    assert stat.S_ISFIFO(cache_path.lstat().st_mode)


def test_a_listed_file_the_registry_excludes_is_not_called_missing(empty_registry):
    """Issue 38: .gitignore is on disk; SHA256SUMS listing it is wrong, but not because it is gone."""
    assert (empty_registry / ".gitignore").is_file()
    sums = empty_registry / "SHA256SUMS"
    sums.write_bytes(sums.read_bytes() + f"{sha256_of(empty_registry / '.gitignore')}  .gitignore\n".encode())
    found = [p for p in validate(empty_registry) if p.file == ".gitignore"]
    assert [p.code for p in found] == ["sums.excluded-file"] and "not on disk" not in found[0].message
