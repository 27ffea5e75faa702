"""Proofs that do not rest on our own word (issue 31): the Hub's Xet hash against the local bytes,
and a publish that hands the uploader no sha256 it has not just checked.

Publishing here goes through hf_xet's real Xet upload path (``hub_server``), as for real users.
"""

from __future__ import annotations

import os

from huggingface_hub import CommitOperationAdd, HfApi, constants
from huggingface_hub.hf_api import RepoFile

from registry.core.hashing import xet
from registry.core.hashing.xet import xet_digests
from registry.core.repo import Repo
from registry.hub import upload

from .test_publish import REPO, assert_nothing_recorded, assert_published, publish_args, weight_path

pytest_plugins = ["tests.hubserver", "tests.publish_fixtures"]  # the Hub fixtures; publish's registry and cli fixtures


def verify_remote(cli, root, code=0) -> dict:
    return cli.json("verify-remote", "--repo-id", REPO, "-C", root, "--json", code=code)


def content(report: dict, path: str) -> dict:
    return next(c for c in report["content"] if c["path"] == path)


def test_xet_upload_lists_xet_hashes_that_match_the_local_bytes(hub_server, registry, cli):
    cli(*publish_args(registry))

    assert hub_server.requests["xet_write_token"] > 0 and hub_server.uploaded_objects == 0  # Xet, not LFS
    assert_published(hub_server, registry)
    weight = weight_path(registry)
    listed = {f.path: f.xet_hash for f in HfApi().list_repo_tree(REPO, recursive=True) if isinstance(f, RepoFile)}
    assert listed[weight] == xet_digests(registry, [weight], None)[weight]
    report = verify_remote(cli, registry)
    assert report["ok"] and content(report, weight) == {
        "path": weight,
        "xet": "match",
        "sha256": "match",
        "note": "Xet hash matches the local bytes",
    }
    assert "1 file(s) verified by the Hub's Xet hash" in cli("verify-remote", "--repo-id", REPO, "-C", registry).output


def test_xet_hashes_are_cached_like_sha256s(registry, monkeypatch):
    weight = weight_path(registry)
    cache = Repo(registry).xet_cache_path
    os.utime(registry / weight, (1e9, 1e9))  # not just written: a fresh file is never cached (racy), as with sha256
    first = xet_digests(registry, [weight], cache)
    chunked: list = []
    monkeypatch.setattr(
        xet, "hash_xet_files", lambda paths, progress=None: chunked.append(paths) or dict.fromkeys(paths, "rehashed")
    )

    assert xet_digests(registry, [weight], cache) == first and chunked == [[]]  # the same file is not chunked twice
    (registry / weight).write_bytes((registry / weight).read_bytes()[:-1] + b"\0")
    assert xet_digests(registry, [weight], cache) == {weight: "rehashed"}  # a changed file is


def test_bytes_unlike_their_asserted_sha256_are_caught_by_publish_verify_remote_and_pull(
    hub_server, registry, tmp_path, cli
):
    weight = weight_path(registry)
    hub_server.store_other_bytes(REPO, weight)

    result = cli.json(*publish_args(registry, "--json"), code=3)

    assert {(p["code"], p["file"]) for p in result["problems"]} == {("verify.xet-mismatch", weight)}
    assert_nothing_recorded(registry)
    listed = {f.path: f for f in HfApi().list_repo_tree(REPO, recursive=True) if isinstance(f, RepoFile)}
    assert listed[weight].lfs.sha256 == Repo(registry).load_index().entries[0].sha256  # the sha256 label lies
    report = verify_remote(cli, registry, code=1)
    # the failed publish kept the repo id it staged out of the local index.json and card: they differ too
    assert sorted((p["code"], p["file"]) for p in report["problems"]) == [
        ("local.differs", "README.md"),
        ("local.differs", "index.json"),
        ("remote.xet-mismatch", weight),
    ]
    assert content(report, weight)["xet"] == "mismatch" and content(report, weight)["sha256"] == "match"
    pulled = cli("pull", "--repo-id", REPO, tmp_path / "pulled", code=3)
    assert f"error: {weight}:" in pulled.output and not (tmp_path / "pulled").exists()


def test_a_redacted_xet_hash_is_unverifiable_never_a_pass_nor_a_mismatch(hub_server, registry, cli):
    cli(*publish_args(registry))
    hub_server.redact_xet_hashes = True
    weight = weight_path(registry)

    report = verify_remote(cli, registry, code=1)

    assert not report["ok"]
    assert [(p["code"], p["file"]) for p in report["problems"]] == [("remote.unverifiable", weight)]
    assert (
        content(report, weight)["xet"] == "unverifiable"
        and "unverifiable without access" in content(report, weight)["note"]
    )


def test_an_lfs_only_file_is_compared_by_sha256_and_said_so(hub_server, registry, cli, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)  # a client without Xet: the basic LFS transfer
    cli(*publish_args(registry))
    assert hub_server.uploaded_objects == 1
    weight = weight_path(registry)

    report = verify_remote(cli, registry)

    assert report["ok"] and content(report, weight) == {
        "path": weight,
        "xet": "lfs-only",
        "sha256": "match",
        "note": "LFS-stored, sha256 only",
    }
    assert f"note: {weight}: LFS-stored, sha256 only" in cli("verify-remote", "--repo-id", REPO, "-C", registry).output


def change_when_uploading(path, monkeypatch) -> None:
    """Change one byte of ``path`` at the moment publish hands its plan to the upload (once: create_commit
    calls the same method again, to upload anything not uploaded yet)."""
    upload, calls = HfApi.preupload_lfs_files, []

    def change_then_upload(self, *args, **kwargs):
        if not calls:
            data = path.read_bytes()
            path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
        calls.append(args)
        return upload(self, *args, **kwargs)

    monkeypatch.setattr(HfApi, "preupload_lfs_files", change_then_upload)


def test_a_weight_changed_between_plan_and_upload_is_refused_and_nothing_committed(
    hub_server, registry, cli, monkeypatch
):
    monkeypatch.setattr(
        upload, "IN_MEMORY", 0
    )  # the weight goes by path, hashed by hf_xet as it uploads (a multi-GB weight's way)
    change_when_uploading(registry / weight_path(registry), monkeypatch)

    result = cli.json(*publish_args(registry, "--json"), code=3)

    assert [(p["code"], p["file"]) for p in result["problems"]] == [
        ("publish.changed-meanwhile", weight_path(registry))
    ]
    assert hub_server.commits_made == 0
    assert set(hub_server.files(REPO)) == {".gitattributes"}  # the Hub's initial commit, nothing else
    assert_nothing_recorded(registry)


def test_a_small_file_changed_after_its_check_is_sent_as_checked(hub_server, registry, cli, monkeypatch):
    weight = registry / weight_path(registry)
    planned = weight.read_bytes()
    change_when_uploading(weight, monkeypatch)

    cli(*publish_args(registry), code=3)  # the verification sees the local file differ from what was sent

    assert hub_server.files(REPO)[weight_path(registry)] == planned  # the checked bytes, not the changed ones


def test_the_xet_hub_keeps_whatever_sha256_the_client_asserts(hub_server, tmp_path):
    """Why the sha256 label proves nothing for a Xet upload (xet-core PR 570): the real client hands hf_xet a
    sha256 and the Hub lists it beside the bytes it stored; only the xetHash is computed from those bytes."""

    data = os.urandom(3 << 20)
    (tmp_path / "w.bin").write_bytes(data)
    api = HfApi()
    api.create_repo(REPO)
    add = CommitOperationAdd(path_in_repo="w.bin", path_or_fileobj=str(tmp_path / "w.bin"))
    add.upload_info.sha256 = bytes.fromhex("b" * 64)  # what a stale plan would hand over
    api.create_commit(REPO, [add], commit_message="asserted")

    listed = next(f for f in api.list_repo_tree(REPO) if isinstance(f, RepoFile) and f.path == "w.bin")
    assert listed.lfs.sha256 == "b" * 64 and hub_server.files(REPO)["w.bin"] == data
    assert listed.xet_hash == xet_digests(tmp_path, ["w.bin"], None)["w.bin"]
