"""A transaction's removals: staged like its writes, journaled as renames into staging, so a crash
at any rename leaves the old tree or, once the next command rolls the journal forward, the new one."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry.cli import main
from registry.core.atomic import JOURNAL_PURPOSE, registry_lock, transaction
from registry.core.errors import RegistryError
from registry.core.names import JOURNAL_NAME, PRIVATE_DIR, STAGING_NAME
from registry.core.userkey import seal

from .conftest import snapshot

RENAMES_OF_A_COMMIT = 3  # the journal's own atomic write, the new file, the removal


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs, not even the transaction's rollback."""


def _tree(root: Path) -> None:
    (root / "kept.txt").write_bytes(b"old")
    (root / "export").mkdir()
    (root / "export" / "stale.bin").write_bytes(b"stale")


def _killed_at(monkeypatch, kill_at: int) -> Callable[[], None]:
    """From now on the ``kill_at``-th ``os.replace`` (counting from 0) raises :class:`Killed`;
    the returned function lifts that, as a fresh process would not have it."""
    replace, done = os.replace, []

    def replace_until_killed(*args, **kwargs):
        if len(done) == kill_at:
            raise Killed
        done.append(args)
        return replace(*args, **kwargs)

    monkeypatch.setattr(os, "replace", replace_until_killed)
    return lambda: monkeypatch.setattr(os, "replace", replace)


def _change(root: Path) -> None:
    with transaction(root) as txn:
        txn.write("kept.txt", b"new")
        txn.remove("export/stale.bin")


@pytest.mark.parametrize("kill_at", range(RENAMES_OF_A_COMMIT + 1))
def test_a_kill_at_any_rename_leaves_the_old_tree_or_one_the_next_command_completes(tmp_path, monkeypatch, kill_at):
    _tree(tmp_path)
    before = snapshot(tmp_path)
    revive = _killed_at(monkeypatch, kill_at)
    if kill_at < RENAMES_OF_A_COMMIT:
        with pytest.raises(Killed):
            _change(tmp_path)
    else:
        _change(tmp_path)
    revive()
    with registry_lock(tmp_path):  # the next command: rolls a journal forward, clears staging
        pass
    after = snapshot(tmp_path)
    if kill_at == 0:  # before the journal: nothing public was touched
        assert after == before
    else:
        assert after == {"kept.txt": b"new"} and not (tmp_path / "export" / "stale.bin").exists()
    assert (
        not (tmp_path / PRIVATE_DIR / JOURNAL_NAME).exists()
        and list((tmp_path / PRIVATE_DIR / STAGING_NAME).iterdir()) == []
    )


def test_a_refused_transaction_removes_nothing(tmp_path):
    _tree(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(RuntimeError), transaction(tmp_path) as txn:
        txn.remove("export/stale.bin")
        raise RuntimeError("a later check refuses")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("odd", ["folder", "link"])
def test_only_a_regular_file_is_removed(tmp_path, odd):
    _tree(tmp_path)
    target = tmp_path / "export" / "odd"
    target.mkdir() if odd == "folder" else target.symlink_to(tmp_path / "kept.txt")
    before = snapshot(tmp_path)
    with pytest.raises(RegistryError) as refused, transaction(tmp_path) as txn:
        txn.remove("export/odd")
    assert refused.value.code == "fs.not-a-file" and snapshot(tmp_path) == before and target.exists()


@pytest.mark.parametrize("put_there", ["other file", "folder"])
def test_a_replayed_removal_leaves_what_was_put_there_since(tmp_path, monkeypatch, put_there):
    """Killed after the journal, before the removal's rename; then something else takes the path:
    rolling forward must not delete it (the journal names the file by its identity)."""
    _tree(tmp_path)
    revive = _killed_at(monkeypatch, 2)  # the journal and the new file are in place
    with pytest.raises(Killed):
        _change(tmp_path)
    revive()
    stale = tmp_path / "export" / "stale.bin"
    stale.unlink()
    stale.mkdir() if put_there == "folder" else stale.write_bytes(b"someone else's, and longer")
    with registry_lock(tmp_path):
        pass
    assert stale.is_dir() if put_there == "folder" else stale.read_bytes() == b"someone else's, and longer"
    assert (tmp_path / "kept.txt").read_bytes() == b"new" and not (tmp_path / PRIVATE_DIR / JOURNAL_NAME).exists()


def test_a_path_is_not_both_written_and_removed(tmp_path):
    _tree(tmp_path)
    with pytest.raises(ValueError), transaction(tmp_path) as txn:
        txn.write("export/stale.bin", b"x")
        txn.remove("export/stale.bin")
    with pytest.raises(ValueError), transaction(tmp_path) as txn:
        txn.remove("export/stale.bin")
        txn.write("export/stale.bin", b"x")


def test_a_removal_through_a_linked_folder_is_refused(tmp_path):
    root, outside = tmp_path / "reg", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "stale.bin").write_bytes(b"not the registry's")
    (root / "export").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RegistryError), transaction(root) as txn:
        txn.remove("export/stale.bin")
    assert (outside / "stale.bin").read_bytes() == b"not the registry's"
    assert not (root / PRIVATE_DIR / JOURNAL_NAME).exists()  # refused before the commit began


# --- journals that arrive with a folder (issue 38): refused in one line, nothing touched ---------------


def _everything(root: Path) -> dict[str, object]:
    """Every entry under ``root``, the private folder included: a file's bytes, a link's target, a folder."""
    found: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        found[rel] = (
            ("link", os.readlink(path)) if path.is_symlink() else ("dir",) if path.is_dir() else path.read_bytes()
        )
    return found


def _weights(root: Path) -> None:
    _tree(root)
    (root / "README.md").write_bytes(b"# a card\n")
    (root / "s1.pth").write_bytes(b"the weight, which must never be lost")
    (root / PRIVATE_DIR / STAGING_NAME).mkdir(parents=True)


def _journal(root: Path, journal: object) -> None:
    (root / PRIVATE_DIR / JOURNAL_NAME).write_text(json.dumps(journal))


def _sealed(root: Path, plan: dict) -> dict:
    """A journal sealed with this user's key for this copy: only the path checks stand in its way."""
    plan = {"registry": _private_identity(root), "dirs": [], "renames": [], "removals": [], **plan}
    return {"plan": plan, "seal": seal(JOURNAL_PURPOSE, json.dumps(plan, sort_keys=True).encode())}


def _private_identity(root: Path) -> list[int]:
    st = (root / PRIVATE_DIR).lstat()
    return [st.st_dev, st.st_ino]


FOREIGN = {
    # the one-line journal of the report: README.md renamed onto a State
    "rename into a weight (the old format)": lambda root: _journal(
        root, {"dirs": [], "renames": [["README.md", "s1.pth"]]}
    ),
    "a removal of a weight": lambda root: _journal(
        root, {"dirs": [], "renames": [], "removals": [["s1.pth", ".registry/staging/x", [0, 0, 0, 0]]]}
    ),
    "a forged seal": lambda root: _journal(
        root,
        {
            "plan": {
                "registry": _private_identity(root),
                "dirs": [],
                "renames": [["README.md", "s1.pth"]],
                "removals": [],
            },
            "seal": "00" * 32,
        },
    ),
    "a forged staging path": lambda root: _journal(
        root, _sealed(root, {"renames": [[".registry/staging/../../README.md", "s1.pth"]]})
    ),
    "a rename from outside staging": lambda root: _journal(root, _sealed(root, {"renames": [["README.md", "s1.pth"]]})),
    "a removal into another folder": lambda root: _journal(
        root, _sealed(root, {"removals": [["s1.pth", "export/x", list(_identity_of(root / "s1.pth"))]]})
    ),
    "a rename out of the root": lambda root: _journal(
        root, _sealed(root, {"renames": [[".registry/staging/a", "../elsewhere"]]})
    ),
    "another copy's journal": lambda root: _journal(
        root, _sealed(root, {"registry": [0, 1], "renames": [[".registry/staging/a", "s1.pth"]]})
    ),
    "a link": lambda root: (root / PRIVATE_DIR / JOURNAL_NAME).symlink_to(root / "README.md"),
    "not JSON": lambda root: (root / PRIVATE_DIR / JOURNAL_NAME).write_bytes(b"\xff{"),
}


def _identity_of(path: Path) -> tuple[int, ...]:
    st = path.lstat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@pytest.mark.parametrize("form", sorted(FOREIGN))
def test_a_journal_this_registry_did_not_write_is_refused_and_nothing_is_touched(tmp_path, form):
    _weights(tmp_path)
    (tmp_path / PRIVATE_DIR / STAGING_NAME / "a").write_bytes(b"staged by someone else")
    FOREIGN[form](tmp_path)
    before = _everything(tmp_path)
    with pytest.raises(RegistryError) as refused, registry_lock(tmp_path):
        pass
    assert refused.value.code == "fs.foreign-journal" and refused.value.problem.file == f"{PRIVATE_DIR}/{JOURNAL_NAME}"
    assert _everything(tmp_path) == before  # not the weight, not staging, not even a lock file


def test_a_copy_of_a_folder_with_an_interrupted_commit_is_refused_while_the_original_completes(tmp_path, monkeypatch):
    original, copy = tmp_path / "original", tmp_path / "copy"
    original.mkdir()
    _tree(original)
    revive = _killed_at(monkeypatch, 1)  # the journal is in place, nothing public renamed yet
    with pytest.raises(Killed):
        _change(original)
    revive()
    shutil.copytree(original, copy, symlinks=True)  # a clone, a download, a tarball: the journal travels
    before = _everything(copy)
    with pytest.raises(RegistryError) as refused, registry_lock(copy):
        pass
    assert refused.value.code == "fs.foreign-journal" and _everything(copy) == before
    with registry_lock(original):  # the registry that wrote it finishes its own commit
        pass
    assert (original / "kept.txt").read_bytes() == b"new" and not (original / "export" / "stale.bin").exists()


@pytest.mark.parametrize(
    "odd",
    [
        "staging linked to a folder",
        "lock linked to a weight",
        "lock a second name of a weight",
        "private folder a link",
    ],
)
def test_nothing_under_the_private_folder_reaches_a_file_outside_it(tmp_path, odd):
    _weights(tmp_path)
    private = tmp_path / PRIVATE_DIR
    if odd == "staging linked to a folder":  # recovery empties staging: here it would empty export/
        shutil.rmtree(private / STAGING_NAME)
        (private / STAGING_NAME).symlink_to(tmp_path / "export", target_is_directory=True)
    elif odd == "lock linked to a weight":  # the lock is opened with O_TRUNC
        (private / "lock").symlink_to(tmp_path / "s1.pth")
    elif odd == "lock a second name of a weight":
        os.link(tmp_path / "s1.pth", private / "lock")
    else:
        shutil.rmtree(private)
        (tmp_path / "elsewhere").mkdir()
        private.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    before = _everything(tmp_path)
    with pytest.raises(RegistryError) as refused, registry_lock(tmp_path):
        pass
    assert refused.value.code in ("fs.private-not-own", "fs.private-not-dir")
    assert _everything(tmp_path) == before


@pytest.mark.parametrize("command", ["validate", "list", "adopt --dry-run", "publish --dry-run"])
def test_a_journal_inside_a_pulled_repo_is_refused_by_any_command_in_one_line(empty_registry, small_base, command):
    """A clone carrying .registry/journal.json: the first command to read it refuses, naming it; the
    one-line journal of the report (README.md renamed onto a weight) never runs."""
    shutil.copy(small_base, empty_registry / "weights.pth")
    (empty_registry / PRIVATE_DIR).mkdir(exist_ok=True)
    _journal(empty_registry, {"dirs": [], "renames": [["README.md", "weights.pth"]]})
    before = _everything(empty_registry)
    name, *flags = command.split()
    where = [str(empty_registry)] if name == "adopt" else ["-C", str(empty_registry)]
    hub = ["--repo-id", "someone/model", "--assume-empty-remote"] if name == "publish" else []
    result = CliRunner().invoke(main, [name, *where, *flags, *hub])
    assert result.exit_code == 3, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors == [line for line in result.output.splitlines() if line.strip()]  # nothing else printed
    assert len(errors) == 1 and errors[0].startswith(
        f"error: {PRIVATE_DIR}/{JOURNAL_NAME}: a commit journal this registry did not write"
    )
    assert _everything(empty_registry) == before


def test_a_dry_run_neither_finishes_a_commit_nor_writes_a_cache(empty_registry, tmp_path, small_base, monkeypatch):
    """--dry-run writes nothing: no stat cache (publish validates first), and an interrupted commit of
    this registry's own is left for a real command."""
    for path in empty_registry.rglob("*"):
        os.utime(path, (1e9, 1e9), follow_symlinks=False)  # old enough to be cached (young files never are)
    (empty_registry / PRIVATE_DIR / "statcache.json").unlink(missing_ok=True)
    before = _everything(empty_registry)
    result = CliRunner().invoke(
        main, ["publish", "-C", str(empty_registry), "--repo-id", "someone/model", "--dry-run", "--assume-empty-remote"]
    )
    assert _everything(empty_registry) == before, result.output
    folder = tmp_path / "hand-made"
    folder.mkdir()
    shutil.copy(small_base, folder / small_base.name)
    _tree(folder)
    revive = _killed_at(monkeypatch, 1)
    with pytest.raises(Killed):
        _change(folder)
    revive()
    pending = _everything(folder)
    result = CliRunner().invoke(main, ["adopt", str(folder), "--dry-run"])
    assert result.exit_code == 3 and f"error: {PRIVATE_DIR}/{JOURNAL_NAME}: an interrupted command" in result.output
    assert _everything(folder) == pending
