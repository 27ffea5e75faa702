"""history, diff and rollback through the real huggingface_hub client against tests/hubserver.py.

Two releases: the first with one State weight scored on a benchmark, the second adding a weight
and changing that score.  Rollback is checked at the server: one commit, REV's tree, and not one
LFS or Xet upload (the counters of tests/hubserver.py), even when it brings a weight back.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from registry.core.models import Score
from registry.core.published import RemoteRecord, kept_releases, record_remote
from registry.core.repo import Repo
from registry.dataset.synthetic import SEED_002, build_version
from registry.hub.local import local_sums
from registry.index.releases import Release, compare
from registry.ops.dataset_add import add_version
from registry.ops.dataset_init import init_dataset
from registry.ops.validate import validate

from .conftest import snapshot
from .test_dataset import DATASET_REPO, request
from .test_publish import REPO, add_state, local_files, publish_args, weight_path

pytest_plugins = ["tests.hubserver", "tests.publish_fixtures"]  # the Hub fixtures; publish's registry and cli fixtures

BENCH = ["--benchmark", "agent-bench", "--date", "2026-10-17", "--backend", "rwkv-pip"]


def two_releases(server, registry: Path, tmp_path: Path, cli) -> tuple[str, str, str]:
    """Publish twice; the first and second commits, and the weight the second added."""
    cli("score", weight_path(registry), "-C", registry, "--value", "61.5", *BENCH)
    cli(*publish_args(registry))
    first = server.head(REPO)
    added = add_state(registry, tmp_path, "s1374", seed=4).path
    cli("score", weight_path(registry), "-C", registry, "--value", "63", *BENCH)
    cli(*publish_args(registry))
    return first, server.head(REPO), added


def uploads(server) -> tuple[int, int, int, int]:
    """Every way content reaches the Hub: LFS batch calls and PUTs, Xet write tokens and shards."""
    return server.requests["lfs_batch"], server.uploaded_objects, server.requests["xet_write_token"], server.xet_uploads


def test_history_diff_and_rollback_of_two_releases(hub_server, registry, tmp_path, cli):
    first, second, added = two_releases(hub_server, registry, tmp_path, cli)
    scored = weight_path(registry)

    found = cli.json("history", "-C", registry, "--json")
    assert [r["commit"] for r in found["releases"]][:2] == [second, first] and found["repo_id"] == REPO
    newest, oldest = found["releases"][0], found["releases"][1]
    assert (
        newest["published_here"]
        and f"1 weight(s) added ({added})" in newest["summary"]
        and "scores 1 changed" in newest["summary"]
    )
    assert f"1 weight(s) added ({scored})" in oldest["summary"] and "scores 1 added" in oldest["summary"]
    assert found["releases"][2]["title"] == "initial commit" and not found["releases"][2]["release"]
    assert f"{second[:12]}" in cli("history", "-C", registry).output

    changes = cli.json("diff", first, "main", "-C", registry, "--json")
    assert [(w["status"], w["path"], w["method"], w["data_version"]) for w in changes["weights"]] == [
        ("added", added, "state", "v1.41")
    ]
    assert changes["weights"][0]["new_sha256"] == Repo(registry).load_index().entry_by_path(added).sha256
    assert [(s["status"], s["owner"], s["benchmark"], s["old"], s["new"]) for s in changes["scores"]] == [
        ("changed", scored, "agent-bench", "61.5 %", "63 %")
    ]
    assert changes["card"]["added"] > 0 and {"index.json", "README.md", "evaluation.json"} <= {
        f["path"] for f in changes["files"]
    }
    text = cli("diff", first, second, "-C", registry).output
    assert f"weight added    {added}" in text and "61.5 % -> 63 %" in text
    assert (
        cli.json("diff", "-C", registry, "--json")["summary"] == "no change"
    )  # the last release against the working registry
    assert "no branch, tag or commit 'v9'" in cli("diff", "v9", "-C", registry, code=3).output

    before = uploads(hub_server)
    commits = hub_server.commits_made
    undone = cli.json("rollback", first, "-C", registry, "--json")

    assert added in undone["deleted"] and "index.json" in undone["copied"]
    assert hub_server.commits_made == commits + 1 and undone["commit"] == hub_server.head(REPO)
    assert hub_server.files(REPO) == hub_server.files(REPO, first)
    assert (
        undone["local"] == "updated"
        and local_files(registry) == hub_server.files(REPO)
        and not (registry / added).exists()
    )
    assert validate(registry) == []
    assert json.loads((Repo(registry).published_dir / "remote.json").read_text())["commit"] == undone["commit"]
    assert cli.json("verify-remote", "--repo-id", REPO, "-C", registry, "--json")["ok"]

    # undo the undo: the weight comes back by a copy on the Hub, and only a download locally
    redone = cli.json("rollback", second, "-C", registry, "--json")
    assert added in redone["copied"] and hub_server.files(REPO) == hub_server.files(REPO, second)
    assert {c["path"]: c["xet"] for c in redone["content"]}[added] == "match"
    assert local_files(registry) == hub_server.files(REPO) and (registry / added).is_file() and validate(registry) == []
    assert (
        before[2:] == (2, 2) and uploads(hub_server) == before
    )  # two publishes: one Xet upload each; not one LFS or Xet upload in either rollback, counted at the server
    assert hub_server.commits_made == commits + 2 and not hub_server.internal_errors
    assert "Roll back to" in cli("history", "-C", registry).output


def test_rollback_uploads_no_lfs_object_without_xet(lfs_hub_server, registry, tmp_path, cli):
    first, second, added = two_releases(lfs_hub_server, registry, tmp_path, cli)
    cli("rollback", first, "-C", registry)
    before = uploads(lfs_hub_server)

    cli("rollback", second, "-C", registry)

    assert lfs_hub_server.files(REPO) == lfs_hub_server.files(REPO, second) and (registry / added).is_file()
    assert uploads(lfs_hub_server) == before and before[:2] == (
        2,
        2,
    )  # the two publishes sent one weight each; rollbacks none


def test_rollback_is_refused_when_the_remote_moved_since_it_was_read(hub_server, registry, tmp_path, cli):
    first, second, _ = two_releases(hub_server, registry, tmp_path, cli)
    local = snapshot(registry)
    hub_server.push_before_next_commit(REPO)

    result = cli("rollback", first, "-C", registry, code=4)

    assert "main moved since it was read" in result.output and "nothing was committed" in result.output
    pushed = hub_server.head(REPO)
    assert pushed != second and hub_server.files(REPO, pushed).keys() - hub_server.files(REPO, second).keys() == {
        next(p for p in hub_server.files(REPO) if p.startswith("concurrent-push-"))
    }
    assert snapshot(registry) == local
    assert json.loads((Repo(registry).published_dir / "remote.json").read_text())["commit"] == second


def test_rollback_refuses_what_is_not_a_release_and_spares_unpublished_work(hub_server, registry, tmp_path, cli):
    first, second, _ = two_releases(hub_server, registry, tmp_path, cli)
    initial = cli.json("history", "-C", registry, "--json")["releases"][2]["commit"]
    assert "is not a release of a registry" in cli("rollback", initial, "-C", registry, code=3).output
    assert "no SHA256SUMS" in cli("rollback", initial, "-C", registry, "--json", code=3).stdout
    assert hub_server.head(REPO) == second

    dry = cli.json("rollback", first, "-C", registry, "--dry-run", "--json")
    assert dry["commit"] is None and dry["deleted"] and hub_server.head(REPO) == second

    unpublished = add_state(registry, tmp_path, "s1500", seed=5).path
    local = snapshot(registry)
    done = cli.json("rollback", first, "-C", registry, "--json")
    assert hub_server.files(REPO) == hub_server.files(REPO, first) and done["local"] == "unchanged"
    assert (
        "unpublished changes" in done["local_note"]
        and f"registry pull --repo-id {REPO} --revision {done['commit']}" in done["local_note"]
    )
    assert snapshot(registry) == local and (registry / unpublished).is_file()
    offline = cli.json(
        "diff", "--offline", "-C", registry, "--json"
    )  # the local record against the working registry, no Hub
    assert [(w["status"], w["path"]) for w in offline["weights"]] == [("added", unpublished)]
    kept = cli.json("history", "--offline", "-C", registry, "--json")  # the Hub is not read: the releases kept here
    assert kept["source"] == "local" and [r["commit"] for r in kept["releases"]] == [second, first]
    assert "scores 1 changed" in kept["releases"][0]["summary"] and kept["releases"][0]["published_here"]
    between = cli.json("diff", first[:12], second, "--offline", "-C", registry, "--json")
    assert [(s["status"], s["old"], s["new"]) for s in between["scores"]] == [("changed", "61.5 %", "63 %")] and len(
        between["weights"]
    ) == 1
    shutil.rmtree(Repo(registry).published_dir / "releases")  # a registry that published before releases were kept
    assert [r["commit"] for r in cli.json("history", "--offline", "-C", registry, "--json")["releases"]] == [second]
    sums_only = cli.json("diff", "--offline", "-C", registry, "--json")
    assert [(w["status"], w["path"]) for w in sums_only["weights"]] == [
        ("added", unpublished)
    ] and "SHA256SUMS only" in sums_only["notes"][0]

    HfApi().upload_file(path_or_fileobj=b"\0not the published bytes", path_in_repo=weight_path(registry), repo_id=REPO)
    tampered = hub_server.head(REPO)
    refused = cli.json(
        "rollback", tampered, "-C", registry, "--json", code=3
    )  # a state whose files disagree with its SHA256SUMS
    assert [(p["code"], p["file"]) for p in refused["problems"]] == [("remote.mismatch", weight_path(registry))]
    assert hub_server.head(REPO) == tampered and snapshot(registry) == local


def test_history_diff_and_rollback_of_a_dataset_registry(hub_server, tmp_path, cli):
    built = {spec.version: build_version(tmp_path / "src" / spec.version, spec) for spec in SEED_002}
    root = init_dataset(tmp_path / "distill", title="distill").root
    add_version(root, request(built["v1.41"]))
    cli("publish", "--repo-id", DATASET_REPO, "-C", root)
    first = hub_server.head(DATASET_REPO, repo_type="dataset")
    add_version(root, request(built["v2.1"]))
    cli("publish", "-C", root)

    found = cli.json("history", "-C", root, "--json")
    assert "1 data version(s) added (v2.1)" in found["releases"][0]["summary"]
    changes = cli.json("diff", first, "main", "-C", root, "--json")
    assert [(v["status"], v["path"]) for v in changes["versions"]] == [("added", "v2.1")] and changes[
        "kind"
    ] == "dataset"
    assert not any(f["path"].startswith("v2.1/") for f in changes["files"])  # named by the version

    done = cli.json("rollback", first, "-C", root, "--json")
    assert hub_server.files(DATASET_REPO, repo_type="dataset") == hub_server.files(
        DATASET_REPO, first, repo_type="dataset"
    )
    assert done["local"] == "updated" and not (root / "v2.1").exists() and validate(root) == []
    assert {p: b for p, b in snapshot(root).items() if p != ".gitignore"} == hub_server.files(
        DATASET_REPO, repo_type="dataset"
    )


@pytest.mark.parametrize("command", [["history"], ["diff"], ["rollback", "main"]])
def test_without_a_repo_id_or_record_the_commands_say_what_to_pass(registry, cli, command, tmp_path):
    fresh = tmp_path / "fresh"
    shutil.copytree(registry, fresh)
    result = cli(*command, "-C", fresh, "--json", code=3)
    assert json.loads(result.stdout)["ok"] is False and "fix" in json.loads(result.stdout)["problems"][0]


def test_a_rollback_the_hub_stores_wrongly_is_caught_by_the_xet_hash(hub_server, registry, tmp_path, cli):
    first, second, added = two_releases(hub_server, registry, tmp_path, cli)
    cli("rollback", first, "-C", registry)
    local = snapshot(registry)
    hub_server.store_other_bytes(REPO, added)  # the copy's oid is REV's, the bytes the Hub keeps are not

    result = cli("rollback", second, "-C", registry, "--json", code=3)

    assert [(p["code"], p["file"]) for p in json.loads(result.stdout)["problems"]] == [("verify.xet-mismatch", added)]
    assert snapshot(registry) == local  # the local registry does not follow a commit that failed verification


def test_compare_names_replaced_weights_moved_recommendation_removed_scores_and_card_sections(registry, tmp_path):
    index = Repo(registry).load_index()
    entry = index.entries[0]
    entry.scores = [Score(benchmark="agent-bench", value=61.5, date="2026-10-17", backend="rwkv-pip")]
    sums = {entry.path: entry.sha256, "index.json": "1" * 64}
    old = Release("old", sums, index.model_copy(deep=True), "# Title\n\n## Weights\n\n| a |\n\n## Scores\n\nnone\n")
    entry.sha256, entry.recommended, entry.scores = "f" * 64, True, []
    new = Release(
        "new",
        {entry.path: entry.sha256, "index.json": "2" * 64},
        index,
        "# Title\n\n## Weights\n\n| b |\n\n## Scores\n\nnone\n",
    )

    diff = compare(old, new)

    assert [(c.status, c.artifact.path, c.old and c.old.sha256, c.artifact.method) for c in diff.artifacts] == [
        ("changed", entry.path, sums[entry.path], "state")
    ]
    assert [(s.status, s.benchmark, s.old, s.new) for s in diff.scores] == [("removed", "agent-bench", "61.5 %", None)]
    assert diff.recommended == ((), (entry.path,)) and [f.path for f in diff.files] == ["index.json"]
    assert diff.card is not None and (diff.card.added, diff.card.removed, diff.card.sections) == (1, 1, ("Weights",))
    assert (
        f"1 weight(s) replaced ({entry.path})" in diff.summary()
        and f"recommended none -> {entry.path}" in diff.summary()
    )
    assert compare(new, new).summary() == "no change"


def test_kept_releases_are_read_as_untrusted_input(registry):
    repo = Repo(registry)
    record_remote(repo, local_sums(repo), RemoteRecord(repo_id=REPO, revision="main", commit="a" * 40))
    kept = repo.published_dir / "releases"
    shutil.copytree(kept / ("a" * 40), kept / ("b" * 40))  # its record names another commit than its folder
    (kept / ("c" * 40)).mkdir()  # no record: debris of a crash
    (kept / ("c" * 40) / "index.json").write_text("{}")
    (kept / ("d" * 40)).symlink_to(kept / ("a" * 40))  # a link to a release
    (kept / ("e" * 40)).mkdir()
    (kept / ("e" * 40) / "release.json").write_text('{"repo_id": 1}')  # does not parse as a record

    assert [(r.commit, folder.name) for r, folder in kept_releases(repo)] == [("a" * 40, "a" * 40)]
    record_remote(repo, local_sums(repo), RemoteRecord(repo_id=REPO, revision="main", commit="../../../escape"))
    assert (
        not (registry / "escape").exists() and len(kept_releases(repo)) == 1
    )  # a commit id that is not one names no folder


def test_rollback_spares_a_file_edited_by_hand_that_sha256sums_does_not_know_of(hub_server, registry, tmp_path, cli):
    first, _, _ = two_releases(hub_server, registry, tmp_path, cli)
    card = registry / "README.md"
    card.write_bytes(card.read_bytes() + b"\nedited by hand\n")  # SHA256SUMS still names the published card
    local = snapshot(registry)
    assert "README.md" in cli.json("diff", "-C", registry, "--json")["notes"][0]  # diff says what SHA256SUMS does not

    done = cli.json("rollback", first, "-C", registry, "--json")

    assert (
        hub_server.files(REPO) == hub_server.files(REPO, first)
        and done["local"] == "unchanged"
        and "unpublished changes" in done["local_note"]
    )
    assert snapshot(registry) == local
