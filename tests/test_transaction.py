"""A transaction's removals: staged like its writes, journaled as renames into staging, so a crash
at any rename leaves the old tree or, once the next command rolls the journal forward, the new one."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from registry.core.atomic import registry_lock, transaction
from registry.core.errors import RegistryError
from registry.core.names import JOURNAL_NAME, PRIVATE_DIR, STAGING_NAME

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
    assert not (tmp_path / PRIVATE_DIR / JOURNAL_NAME).exists() and list((tmp_path / PRIVATE_DIR / STAGING_NAME).iterdir()) == []


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
