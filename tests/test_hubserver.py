"""The fake Hub in tests/hubserver.py, exercised through the real, unmodified huggingface_hub client.

Expected values (git blob ids, LFS pointers, sha256) are computed here independently of the server's helpers,
so these tests pin the server to what the client and the real Hub expect, not to itself.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    get_hf_file_metadata,
    hf_hub_download,
    hf_hub_url,
    snapshot_download,
)
from huggingface_hub.errors import (
    BadRequestError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import get_session

pytest_plugins = ["tests.hubserver"]  # the hub_server and instant_retries fixtures

REPO = "rwkv/rwkv7-tiny"
LFS_SIZE = 1_200_000  # above the server's 1 MiB LFS threshold


def git_blob_sha1(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def lfs_pointer(content: bytes) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256(content)}\nsize {len(content)}\n".encode()


def status_of(error: pytest.ExceptionInfo[HfHubHTTPError]) -> int:
    return error.value.response.status_code


@pytest.fixture
def api(request) -> HfApi:
    """A client for the test's Hub: ``lfs_hub_server`` where the test asks for it, else ``hub_server`` (Xet on)."""
    server = request.getfixturevalue("lfs_hub_server" if "lfs_hub_server" in request.fixturenames else "hub_server")
    return HfApi(endpoint=server.url, token=server.token)


@pytest.fixture
def repo(api) -> str:
    api.create_repo(REPO)
    return REPO


@pytest.fixture
def big() -> bytes:
    """Text, so that only its size makes it an LFS file."""
    return b"rwkv7 " * (LFS_SIZE // 6)


def commit(api: HfApi, files: dict[str, bytes | Path], **kwargs) -> huggingface_hub.CommitInfo:
    operations = [CommitOperationAdd(path, content) for path, content in files.items()]
    return api.create_commit(REPO, operations, commit_message=kwargs.pop("message", "update"), **kwargs)


# -- repos --------------------------------------------------------------------------------------------------------


def test_create_repo_starts_with_the_hub_initial_commit_and_honours_exist_ok(hub_server, api):
    url = api.create_repo(REPO)

    assert (url.repo_id, url.repo_type) == (REPO, "model")
    assert url.startswith(hub_server.url)
    assert list(hub_server.files(REPO)) == [".gitattributes"]
    with pytest.raises(HfHubHTTPError) as conflict:
        api.create_repo(REPO)
    assert status_of(conflict) == 409
    assert api.create_repo(REPO, exist_ok=True).repo_id == REPO


def test_module_level_helpers_use_the_fake_hub_and_the_env_token(hub_server):
    huggingface_hub.create_repo(REPO)  # bound to an HfApi built at import time, token from HF_TOKEN

    assert huggingface_hub.model_info(REPO).sha == hub_server.head(REPO)


def test_dataset_repos_are_served_under_their_url_prefix(hub_server, api):
    api.create_repo("rwkv/evals", repo_type="dataset")
    api.upload_file(path_or_fileobj=b"a,b\n", path_in_repo="data.csv", repo_id="rwkv/evals", repo_type="dataset")

    assert Path(hf_hub_download("rwkv/evals", "data.csv", repo_type="dataset")).read_bytes() == b"a,b\n"


# -- commits ------------------------------------------------------------------------------------------------------


def test_commit_sends_small_files_inline_and_large_or_binary_ones_through_lfs(lfs_hub_server, api, repo, big, tmp_path):
    weights = tmp_path / "rwkv7.pth"
    weights.write_bytes(b"\x00tiny torch pickle")  # LFS by .gitattributes, not by size

    info = commit(api, {"config.json": b'{"n_layer": 2}', "big.txt": big, "rwkv7.pth": weights})

    assert info.oid == lfs_hub_server.head(REPO)
    assert info.commit_url == f"{lfs_hub_server.url}/{REPO}/commit/{info.oid}"
    assert lfs_hub_server.files(REPO) == {
        ".gitattributes": lfs_hub_server.files(REPO)[".gitattributes"],
        "big.txt": big,
        "config.json": b'{"n_layer": 2}',
        "rwkv7.pth": weights.read_bytes(),
    }
    assert (lfs_hub_server.commits_made, lfs_hub_server.uploaded_objects) == (1, 2)
    assert lfs_hub_server.uploaded_bytes == len(big) + weights.stat().st_size
    assert [e.xet_hash for e in api.list_repo_tree(REPO) if e.path == "big.txt"] == [None]  # LFS-only


def test_unchanged_files_are_not_committed_again(lfs_hub_server, api, repo, big):
    commit(api, {"config.json": b"{}", "big.txt": big})

    info = commit(api, {"config.json": b"{}", "big.txt": big})

    assert info.oid == lfs_hub_server.head(REPO)
    assert (lfs_hub_server.commits_made, lfs_hub_server.uploaded_objects, lfs_hub_server.requests["commit"]) == (
        1,
        1,
        1,
    )


def test_deleting_files_and_folders(hub_server, api, repo):
    commit(api, {"keep.txt": b"k", "drop.txt": b"d", "old/a.txt": b"a", "old/b/c.txt": b"c"})

    api.create_commit(
        REPO, [CommitOperationDelete("drop.txt"), CommitOperationDelete("old/")], commit_message="clean up"
    )

    assert sorted(hub_server.files(REPO)) == [".gitattributes", "keep.txt"]
    with pytest.raises(RemoteEntryNotFoundError):
        api.delete_file("drop.txt", REPO)


def test_stale_parent_commit_is_rejected_with_412(hub_server, api, repo):
    first = commit(api, {"a.txt": b"1"}).oid
    second = commit(api, {"a.txt": b"2"}, parent_commit=first).oid

    with pytest.raises(HfHubHTTPError) as stale:
        commit(api, {"a.txt": b"3"}, parent_commit=first)

    assert status_of(stale) == 412
    assert hub_server.head(REPO) == second
    assert commit(api, {"a.txt": b"3"}, parent_commit=second[:7]).oid == hub_server.head(REPO)


def test_a_push_by_someone_else_makes_the_parent_stale(hub_server, api, repo):
    parent = hub_server.head(REPO)
    hub_server.push_before_next_commit(REPO)

    with pytest.raises(HfHubHTTPError) as stale:
        commit(api, {"a.txt": b"mine"}, parent_commit=parent)

    assert status_of(stale) == 412
    assert hub_server.head(REPO) != parent
    assert "a.txt" not in hub_server.files(REPO)


def test_create_pr_commits_to_a_pr_ref_and_leaves_main_alone(hub_server, api, repo):
    main = hub_server.head(REPO)

    info = commit(api, {"proposal.txt": b"please"}, create_pr=True)

    assert (info.pr_num, info.pr_revision) == (1, "refs/pr/1")
    assert info.pr_url == f"{hub_server.url}/{REPO}/discussions/1"
    assert hub_server.head(REPO) == main
    refs = api.list_repo_refs(REPO, include_pull_requests=True)
    assert [(pr.ref, pr.target_commit) for pr in refs.pull_requests] == [("refs/pr/1", info.oid)]
    assert Path(hf_hub_download(REPO, "proposal.txt", revision="refs/pr/1")).read_bytes() == b"please"


def test_readme_with_broken_metadata_is_rejected_before_anything_is_uploaded(lfs_hub_server, api, repo, big):
    with pytest.raises(ValueError, match="Invalid metadata in README.md"):
        commit(api, {"README.md": b"---\nlicense: [apache\n---\n# card\n", "big.txt": big})

    assert (lfs_hub_server.requests["preupload"], lfs_hub_server.uploaded_objects, lfs_hub_server.commits_made) == (
        0,
        0,
        0,
    )


def test_commit_naming_an_lfs_object_that_was_never_uploaded_is_rejected(hub_server, repo):
    lines = [
        {"key": "header", "value": {"summary": "sneaky", "description": ""}},
        {"key": "lfsFile", "value": {"path": "w.pth", "algo": "sha256", "oid": sha256(b"nope"), "size": 4}},
    ]
    response = get_session().post(
        f"{hub_server.url}/api/models/{REPO}/commit/main",
        content=b"".join(json.dumps(line).encode() + b"\n" for line in lines),
        headers={"Content-Type": "application/x-ndjson", "Authorization": f"Bearer {hub_server.token}"},
    )

    with pytest.raises(BadRequestError, match="has not been uploaded"):
        huggingface_hub.utils.hf_raise_for_status(response)
    assert hub_server.commits_made == 0


# -- listings, refs -----------------------------------------------------------------------------------------------


def test_tree_listing_pages_and_reports_lfs_sha256_and_git_blob_ids(hub_server, api, repo, big):
    initial = hub_server.head(REPO)
    info = commit(api, {"config.json": b"{}", "weights/big.txt": big, "weights/deep/note.md": b"hi"})
    hub_server.page_size = 2

    entries = {e.path: e for e in api.list_repo_tree(REPO, recursive=True, expand=True)}

    assert sorted(entries) == [
        ".gitattributes",
        "config.json",
        "weights",
        "weights/big.txt",
        "weights/deep",
        "weights/deep/note.md",
    ]
    assert hub_server.requests["tree"] == 3  # 6 entries, 2 per page
    small, large, folder = entries["config.json"], entries["weights/big.txt"], entries["weights"]
    assert (small.blob_id, small.size, small.lfs) == (git_blob_sha1(b"{}"), 2, None)
    assert (large.lfs.sha256, large.lfs.size, large.size) == (sha256(big), len(big), len(big))
    assert large.blob_id == git_blob_sha1(lfs_pointer(big))
    assert large.lfs.pointer_size == len(lfs_pointer(big))
    assert large.xet_hash and small.xet_hash is None  # stored through Xet, the default client path
    assert isinstance(folder, huggingface_hub.hf_api.RepoFolder)
    assert folder.last_commit.oid == small.last_commit.oid == info.oid
    assert entries[".gitattributes"].last_commit.oid == initial
    assert small.security.safe


def test_tree_listing_of_a_folder_is_not_recursive_by_default(api, repo):
    commit(api, {"weights/a.pth": b"\0", "weights/deep/b.txt": b"b"})

    assert sorted(e.path for e in api.list_repo_tree(REPO, "weights")) == ["weights/a.pth", "weights/deep"]
    with pytest.raises(RemoteEntryNotFoundError):
        list(api.list_repo_tree(REPO, "missing"))


def test_tags_branches_and_history(hub_server, api, repo):
    v1 = commit(api, {"a.txt": b"v1"}, message="first").oid
    api.create_tag(REPO, tag="v1.0", tag_message="release")
    api.create_branch(REPO, branch="dev")
    commit(api, {"a.txt": b"v2"}, message="second")
    dev_commit = commit(api, {"b.txt": b"dev"}, revision="dev", message="on dev").oid

    refs = api.list_repo_refs(REPO)
    assert {(b.name, b.ref, b.target_commit) for b in refs.branches} == {
        ("main", "refs/heads/main", hub_server.head(REPO)),
        ("dev", "refs/heads/dev", dev_commit),
    }
    assert [(t.name, t.target_commit) for t in refs.tags] == [("v1.0", v1)]
    assert Path(hf_hub_download(REPO, "a.txt", revision="v1.0")).read_bytes() == b"v1"
    assert [c.title for c in api.list_repo_commits(REPO, revision="dev")] == ["on dev", "first", "initial commit"]
    with pytest.raises(HfHubHTTPError) as duplicate:
        api.create_tag(REPO, tag="v1.0")
    assert status_of(duplicate) == 409
    api.delete_tag(REPO, tag="v1.0")
    api.delete_branch(REPO, branch="dev")
    refs = api.list_repo_refs(REPO)
    assert (refs.tags, [b.name for b in refs.branches]) == ([], ["main"])


# -- downloads ----------------------------------------------------------------------------------------------------


def test_downloads_return_the_committed_bytes_from_the_private_cache(hub_server, api, repo, big, tmp_path):
    commit(api, {"config.json": b"{}", "weights/big.txt": big})

    assert Path(hf_hub_download(REPO, "weights/big.txt")).read_bytes() == big
    snapshot = Path(snapshot_download(REPO))
    assert snapshot.is_relative_to(tmp_path / "hf_home" / "hub")
    downloaded = {p.relative_to(snapshot).as_posix(): p.read_bytes() for p in snapshot.rglob("*") if p.is_file()}
    assert downloaded == hub_server.files(REPO)


def test_file_metadata_carries_commit_etag_and_size(hub_server, api, repo, big):
    head = commit(api, {"config.json": b"{}", "big.txt": big}).oid

    small = get_hf_file_metadata(hf_hub_url(REPO, "config.json"))
    large = api.get_hf_file_metadata(url=hf_hub_url(REPO, "big.txt", endpoint=hub_server.url))

    assert (small.commit_hash, small.etag, small.size) == (head, git_blob_sha1(b"{}"), 2)
    assert (large.commit_hash, large.etag, large.size) == (head, sha256(big), len(big))


def test_resolve_honours_byte_ranges(hub_server, api, repo):
    commit(api, {"digits.txt": b"0123456789"})
    url = hf_hub_url(REPO, "digits.txt")
    auth = {"Authorization": f"Bearer {hub_server.token}"}

    partial = get_session().get(url, headers={**auth, "Range": "bytes=2-5"})
    tail = get_session().get(url, headers={**auth, "Range": "bytes=-3"})

    assert (partial.status_code, partial.content, partial.headers["Content-Range"]) == (206, b"2345", "bytes 2-5/10")
    assert (tail.status_code, tail.content) == (206, b"789")


# -- errors -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("token", ["hf_wrong", False])
def test_missing_or_wrong_token_is_a_plain_401(hub_server, repo, token):
    intruder = HfApi(endpoint=hub_server.url, token=token)

    for call in (lambda: intruder.model_info(REPO), lambda: hf_hub_download(REPO, ".gitattributes", token=token)):
        with pytest.raises(HfHubHTTPError) as denied:
            call()
        assert status_of(denied) == 401
        assert not isinstance(denied.value, RepositoryNotFoundError)


def test_missing_repo_revision_and_file_raise_the_client_specific_errors(api, repo):
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("rwkv/missing")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("rwkv/missing", "config.json")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(REPO, ".gitattributes", revision="no-such-branch")
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(REPO, "no-such-file.json")
    assert not api.repo_exists("rwkv/missing")
    assert not api.file_exists(REPO, "no-such-file.json")


def test_injected_commit_failure_raises_and_leaves_no_commit(lfs_hub_server, api, repo, big):
    head = lfs_hub_server.head(REPO)
    lfs_hub_server.fail_next("commit")

    with pytest.raises(HfHubHTTPError) as failure:
        commit(api, {"big.txt": big})

    assert status_of(failure) == 500
    assert (lfs_hub_server.head(REPO), lfs_hub_server.commits_made) == (head, 0)
    commit(api, {"big.txt": big})  # the object uploaded by the failed attempt is reused
    assert (lfs_hub_server.commits_made, lfs_hub_server.uploaded_objects) == (1, 1)


def test_upload_dropped_on_every_retry_raises_and_a_rerun_succeeds(lfs_hub_server, api, repo, big, instant_retries):
    operations = [CommitOperationAdd("big.txt", big)]
    lfs_hub_server.drop_next("lfs_upload", times=6)  # the first attempt and the client's 5 retries

    with pytest.raises(RuntimeError, match="Error while uploading 'big.txt'"):
        api.create_commit(REPO, operations, commit_message="upload")

    assert lfs_hub_server.requests["lfs_upload"] == 6
    assert (lfs_hub_server.uploaded_objects, lfs_hub_server.requests["commit"]) == (0, 0)
    api.create_commit(REPO, operations, commit_message="upload")
    assert lfs_hub_server.files(REPO)["big.txt"] == big


def test_a_single_dropped_upload_is_retried_by_the_client(lfs_hub_server, api, repo, big, instant_retries):
    lfs_hub_server.drop_next("lfs_upload")

    commit(api, {"big.txt": big})

    assert (lfs_hub_server.requests["lfs_upload"], lfs_hub_server.uploaded_objects) == (2, 1)


def test_error_replies_drain_the_body_so_keep_alive_connections_stay_usable(hub_server, repo):
    connection = http.client.HTTPConnection(hub_server.url.removeprefix("http://"))
    body = os.urandom(2 << 20)

    connection.request("POST", f"/api/models/{REPO}/commit/main", body=body)  # no token: 401
    rejected = connection.getresponse()
    rejected.read()
    socket = connection.sock
    connection.request("GET", "/api/whoami-v2", headers={"Authorization": f"Bearer {hub_server.token}"})
    answered = connection.getresponse()

    assert (rejected.status, answered.status) == (401, 200)
    assert json.loads(answered.read())["name"] == hub_server.username
    assert connection.sock is socket  # same connection
    connection.close()
