"""What a pull request or the Hub can do to publish and pull (issue #30 items 4 and 11, #27.5),
through the real huggingface_hub client against tests/hubserver.py."""
# ruff: noqa: F811  (the fixtures of tests/test_publish.py, imported by name)

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from registry.core.repo import Repo
from registry.core.sums import parse_sums, render_sums
from registry.gate.receipt import Receipt
from registry.gate.seal import sealed
from registry.ops.sums import write_sums
from registry.ops.validate import validate

from .conftest import snapshot
from .test_publish import (
    REPO,
    assert_nothing_recorded,
    assert_published,
    cli,  # noqa: F401  (fixture)
    hub_files,
    publish_args,
    registry,  # noqa: F401  (fixture)
    template,  # noqa: F401  (fixture)
)

pytest_plugins = ["tests.hubserver"]


# -- 11. a server error is not a machine failure, and nothing local changes before the commit lands ---------------


@pytest.mark.parametrize(
    ("endpoint", "status"),
    [
        ("commit", 501),
        ("commit", 503),
        ("preupload", 501),
        ("create_repo", 501),
        ("xet_write_token", 501),
        ("lfs_batch", 501),
        ("lfs_upload", 501),
        ("lfs_verify", 501),
        ("validate_yaml", 501),
    ],
)
def test_a_server_error_is_exit_4_and_changes_nothing_local(request, registry, cli, instant_retries, endpoint, status):
    hub_server = request.getfixturevalue(
        "lfs_hub_server" if endpoint.startswith("lfs_") else "hub_server"
    )  # only a client without Xet reaches the LFS endpoints
    before = snapshot(registry)
    hub_server.fail_next(endpoint, status=status, times=10)
    result = cli(*publish_args(registry), code=4)
    assert str(status) in result.output or "HfHubHTTPError" in result.output
    errors = [
        line for line in result.output.splitlines() if line.startswith("error: ")
    ]  # hf_xet's messages hold "error: " too
    assert len(errors) == 1 and result.output.endswith(errors[0] + "\n"), result.output  # one error line, the last
    assert snapshot(registry) == before  # index.json, README.md and SHA256SUMS still as they were
    assert_nothing_recorded(registry)
    assert hub_server.commits_made == 0
    hub_server.clear_failures()
    cli(*publish_args(registry))
    assert_published(hub_server, registry)


def test_a_server_error_on_the_xet_download_path_is_exit_4_and_pull_writes_nothing(
    hub_server, registry, cli, tmp_path, instant_retries
):
    cli(*publish_args(registry))
    hub_server.fail_next("xet_read_token", status=501, times=10)
    result = cli("pull", "--repo-id", REPO, tmp_path / "pulled", code=4)
    assert "the Hub answered 501" in result.output
    assert not (tmp_path / "pulled").exists()


# -- 4. a receipt this installation did not write does not count ---------------------------------------------------


def _receipt(root: Path) -> Path:
    (path,) = (root / ".registry" / "gates").glob("*.json")
    return path


def _blockers(cli, root: Path) -> set[tuple[str, str]]:
    plan = cli.json(*publish_args(root, "--dry-run", "--json"), code=1)
    return {(b["code"], b["file"]) for b in plan["blockers"]}


@pytest.mark.parametrize("how", ["hand-written", "edited", "another user's key"])
def test_a_receipt_this_installation_did_not_write_does_not_count(
    hub_server, registry, cli, tmp_path, monkeypatch, how
):
    entry = Repo(registry).load_index().entries[0]
    receipt_file = _receipt(registry)
    receipt = Receipt.model_validate_json(receipt_file.read_text())
    assert cli.json(*publish_args(registry, "--dry-run", "--json"))["blockers"] == []  # sealed here: it counts
    if how == "hand-written":  # what a pull request can carry: a well-formed receipt, no seal
        receipt_file.write_text(receipt.model_copy(update={"seal": None}).model_dump_json(indent=2))
    elif how == "edited":  # a CPU run made to look like a CUDA one, seal kept
        edited = json.loads(receipt_file.read_text())
        edited["environment"]["device"] = "cuda"
        receipt_file.write_text(json.dumps(edited, indent=2))
    else:
        with monkeypatch.context() as elsewhere:
            elsewhere.setenv("XDG_CONFIG_HOME", str(tmp_path / "someone-else"))
            receipt_file.write_text(sealed(receipt.model_copy(update={"seal": None})).model_dump_json(indent=2))
    assert ("gate.not-ours", entry.path) in _blockers(cli, registry)
    refused = cli(*publish_args(registry), code=3)
    assert "was not written by this installation's gate" in refused.output and hub_server.commits_made == 0


# -- 4. what sits beside the registry: .gitattributes, hidden folders, git's and pre-commit's files ------------------


def test_gitattributes_that_drop_lfs_for_weights_fail_validate(registry, cli):
    weight = Repo(registry).load_index().entries[0].path
    attributes = registry / ".gitattributes"
    written = attributes.read_text()  # init's: one line per binary kind (.pth, .safetensors, .gguf)
    for text, line in [
        ("*.safetensors filter=lfs diff=lfs merge=lfs -text\n", None),
        (written + "*.pth -filter -diff -merge text\n", len(written.splitlines()) + 1),
    ]:
        attributes.write_text(text)
        assert ("sums.mismatch", ".gitattributes") in {
            (p.code, p.file) for p in validate(registry)
        }  # SHA256SUMS covers it
        write_sums(registry)
        found = {(p.code, p.file): p.message for p in validate(registry)}
        assert ("gitattributes.no-lfs", weight) in found and (
            line is None or f"line {line}" in found[("gitattributes.no-lfs", weight)]
        )
        assert cli(*publish_args(registry), code=3) and hub_server_untouched(registry)
    attributes.unlink()
    write_sums(registry)
    assert "gitattributes.missing" in {p.code for p in validate(registry)}


def hub_server_untouched(root: Path) -> bool:
    return not (Repo(root).published_dir / "remote.json").exists()


def test_hidden_folders_are_checked_and_gits_files_are_reported_as_not_covered_and_never_published(
    hub_server, registry, cli
):
    hidden = registry / ".gitx" / "objects.pth"  # a pickle behind a name that looked like git's
    hidden.parent.mkdir()
    hidden.write_bytes(b"\x80\x04K\x01.")
    write_sums(registry)
    assert ("layout.hidden", ".gitx/objects.pth") in {(p.code, p.file) for p in validate(registry)}
    assert cli(*publish_args(registry), code=3)
    shutil.rmtree(hidden.parent)
    write_sums(registry)

    (registry / ".github" / "workflows").mkdir(parents=True)
    (registry / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    (registry / ".pre-commit-config.yaml").write_text("repos: []\n")
    (registry / ".gitignore").write_text(".registry/\n")
    checked = cli.json("validate", "-C", registry, "--json")
    assert checked["ok"] and checked["not_covered"] == [".github/", ".gitignore", ".pre-commit-config.yaml"]
    human = cli("validate", "-C", registry)
    assert "not checked and never published: .github/, .gitignore, .pre-commit-config.yaml" in human.output
    cli(*publish_args(registry))
    published = set(hub_files(hub_server))
    assert published == set(parse_sums((registry / "SHA256SUMS").read_bytes())) | {"SHA256SUMS"}
    assert (
        ".gitattributes" in published
        and not {".github/workflows/ci.yml", ".pre-commit-config.yaml", ".gitignore"} & published
    )


def test_pull_refuses_a_remote_gitattributes_that_sha256sums_does_not_cover(hub_server, registry, cli, tmp_path):
    cli(*publish_args(registry))
    HfApi().upload_file(path_or_fileobj=b"*.pth -filter\n", path_in_repo=".gitattributes", repo_id=REPO)
    result = cli("pull", "--repo-id", REPO, tmp_path / "pulled", code=3)
    assert ".gitattributes" in result.output and not (tmp_path / "pulled").exists()
    assert not [p for p in tmp_path.iterdir() if ".pull-" in p.name]


def test_pull_and_verify_remote_refuse_a_remote_index_json_with_a_key_twice(hub_server, registry, cli, tmp_path):
    cli(*publish_args(registry))
    index = (registry / "index.json").read_text(encoding="utf-8")
    twice = (
        index.rstrip()[:-1].rstrip() + ',\n  "entries": []\n}\n'
    ).encode()  # a reviewer sees the entries; json's last key wins
    sums = parse_sums((registry / "SHA256SUMS").read_bytes())
    sums["index.json"] = hashlib.sha256(twice).hexdigest()  # SHA256SUMS made to agree, as a hostile remote would
    operations = [CommitOperationAdd("index.json", twice), CommitOperationAdd("SHA256SUMS", render_sums(sums))]
    HfApi().create_commit(REPO, operations, commit_message="hostile")
    for args in (["pull", "--repo-id", REPO, tmp_path / "pulled"], ["verify-remote", "--repo-id", REPO]):
        result = cli(*args, code=3)
        assert '"entries" appears twice' in result.output, result.output
    assert not (tmp_path / "pulled").exists()


# -- issue 38 item 2: a Hub that keeps lying is never reported repaired --------------------------------------------


def _record(root: Path) -> bytes | None:
    path = Repo(root).published_dir / "remote.json"
    return path.read_bytes() if path.exists() else None


@pytest.mark.parametrize("lie", ["weight", "README.md", "index.json"])
def test_a_restore_against_a_hub_that_keeps_serving_other_bytes_exits_non_zero_saying_what_differs(
    hub_server, registry, cli, lie
):
    """After a clean publish the Hub starts serving other bytes for a file (its listing unchanged, so the
    plan sees nothing to send): publish --restore, and a plain re-run, must re-read the commit and refuse."""
    cli(*publish_args(registry))
    path = next(e.path for e in Repo(registry).load_index().entries) if lie == "weight" else lie
    recorded = _record(registry)
    hub_server.serve_other_bytes(REPO, path)
    for extra in (("--restore",), ()):
        result = cli.json(*publish_args(registry, *extra, "--json"), code=3)
        assert [p["file"] for p in result["problems"]] == [path], result
        assert result["problems"][0]["code"] in ("verify.xet-mismatch", "verify.served-mismatch")
        assert _record(registry) == recorded  # nothing recorded as published
        out = cli(*publish_args(registry, *extra), code=3).output
        assert [line for line in out.splitlines() if line.startswith("error:")][0].startswith(f"error: {path}: ")


def test_a_re_run_publish_after_the_hub_stored_other_bytes_is_not_reported_published(hub_server, registry, cli):
    weight = next(e.path for e in Repo(registry).load_index().entries)
    hub_server.store_other_bytes(REPO, weight)
    cli(*publish_args(registry), code=3)
    result = cli.json(*publish_args(registry, "--json"), code=3)  # the labels now match: the plan is empty
    assert [(p["code"], p["file"]) for p in result["problems"]] == [("verify.xet-mismatch", weight)]
    assert_nothing_recorded(registry)


def test_another_persons_file_that_publish_keeps_is_a_note_of_verify_remote_not_a_failure(hub_server, registry, cli):
    """Issue 38: publish keeps a file someone else put on the Hub (it says "kept"); verify-remote then
    reported it as the registry's failure and told to delete it."""
    cli(*publish_args(registry))
    HfApi().upload_file(path_or_fileobj=b"a colleague's notes\n", path_in_repo="notes.md", repo_id=REPO)
    cli(*publish_args(registry))  # nothing to send: notes.md is kept
    assert hub_files(hub_server)["notes.md"] == b"a colleague's notes\n"
    report = cli.json("verify-remote", "--repo-id", REPO, "-C", registry, "--json")
    assert report["ok"] and report["problems"] == [] and report["kept"] == ["notes.md"]
    text = cli("verify-remote", "--repo-id", REPO, "-C", registry).output
    assert "note: notes.md: on the Hub but not in its SHA256SUMS" in text


def test_pull_refuses_a_repo_that_carries_the_tools_private_folder(hub_server, registry, cli, tmp_path):
    """Issue 38: a journal inside a pulled repo would land in the new registry's .registry/."""
    cli(*publish_args(registry))
    journal = json.dumps(
        {"dirs": [], "renames": [["README.md", next(e.path for e in Repo(registry).load_index().entries)]]}
    ).encode()
    HfApi().upload_file(path_or_fileobj=journal, path_in_repo=".registry/journal.json", repo_id=REPO)
    result = cli("pull", "--repo-id", REPO, tmp_path / "pulled", code=3)
    assert "error: " in result.output and ".registry/journal.json, in the tool's private folder" in result.output
    assert not (tmp_path / "pulled").exists()
