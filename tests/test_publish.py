"""publish, pull and verify-remote through the real huggingface_hub client against tests/hubserver.py.

Every fault test checks the same promise: nothing half-published (no commit, no local record), and
a plain re-run completes.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from huggingface_hub import HfApi

from registry.artifacts.synthetic import make_base_checkpoint, make_state_file
from registry.cli import main
from registry.core.models import Entry, Index, Rewrite
from registry.core.repo import Repo
from registry.core.sums import parse_sums
from registry.gate.receipt import (
    CheckResult,
    Environment,
    Receipt,
    Timings,
    receipt_path,
)
from registry.gate.seal import sealed
from registry.hub.plan import LocalFile, RemoteFile, RemoteState, make_plan, verify_tree
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.card import write_card
from registry.ops.init import init_registry
from registry.ops.publish import commit_message
from registry.ops.sums import write_sums
from registry.ops.validate import allow_rewrite

from .conftest import SMALL, snapshot
from .hubserver import Blob
from .test_ops_artifacts import train_json

pytest_plugins = ["tests.hubserver"]  # the hub_server and instant_retries fixtures

REPO = "rwkv/agent-weights"
PROJECT = Path(__file__).resolve().parent.parent
STATE = "state/v1.41/s1224.pth"


# -- helpers -----------------------------------------------------------------------------------------------------


def write_receipt(root: Path, entry: Entry, device: str = "cpu", passed: bool = True) -> Path:
    """A plausible receipt for ``entry`` (the real gate is exercised in test_gate_smoke.py)."""
    files = {entry.path: entry.sha256, **{s.path: s.sha256 for s in entry.shards}}
    receipt = Receipt(
        entry=entry.path,
        method=entry.method,
        file_sha256=entry.sha256,
        files=files,
        base_sha256=entry.base_sha256,
        created=datetime.now(UTC).isoformat(),
        environment=Environment(
            device=device, torch="2.13.0", python="3.11.7", registry="0.1.0", kernel_source_hash="0" * 64
        ),
        checks=[CheckResult(name="finite-logits", passed=passed)],
        timings=Timings(load_s=0.1, prefill_tokens_per_s=100.0, decode_tokens_per_s=10.0, total_s=1.0),
        passed=passed,
    )
    path = receipt_path(Repo(root).gates_dir, entry.sha256)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sealed(receipt).model_dump_json(indent=2))  # as the gate writes it
    return path


def gate_all(root: Path, device: str = "cpu") -> None:
    for entry in Repo(root).load_index().entries:
        write_receipt(root, entry, device)


def add_state(root: Path, tmp: Path, name: str, seed: int) -> Entry:
    base = Repo(root).load_index().bases[0].name
    weights = make_state_file(tmp / f"{name}.pth", SMALL, seed=seed)
    entry = add_weight(root, AddRequest(weights, base, "state", "v1.41", train_json(tmp / f"{name}.json")))
    write_receipt(root, entry)
    return entry


class Cli:
    """Runs ``registry`` commands in-process and keeps every output, to search them for the token."""

    def __init__(self):
        self.outputs: list[str] = []

    def __call__(self, *args, code: int = 0):
        result = CliRunner().invoke(main, [str(a) for a in args])
        self.outputs.append(result.output)
        assert result.exit_code == code, result.output
        return result

    def json(self, *args, code: int = 0):
        """The command's stdout as JSON (progress bars and step lines go to stderr)."""
        return json.loads(self(*args, code=code).stdout)


@pytest.fixture
def cli() -> Cli:
    return Cli()


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A registry with one base and one State entry, built once (receipts are added per test)."""

    tmp = tmp_path_factory.mktemp("template")
    root = init_registry(tmp / "reg", title="Publish test").root
    base = make_base_checkpoint(tmp / "rwkv7-tiny-pub-20260101.pth", SMALL)
    add_base(root, BaseRequest(path=base, filename=base.name))
    add_weight(
        root,
        AddRequest(
            make_state_file(tmp / "s1224.pth", SMALL, seed=3),
            base.name[:-4],
            "state",
            "v1.41",
            train_json(tmp / "t.json"),
        ),
    )
    return root


@pytest.fixture
def registry(template, tmp_path) -> Path:
    root = tmp_path / "reg"
    shutil.copytree(template, root)
    gate_all(root)
    return root


def publish_args(root: Path, *extra) -> list:
    return ["publish", "--repo-id", REPO, "-C", root, "--allow-cpu-gate", *extra]


def weight_path(root: Path) -> str:
    return next(e.path for e in Repo(root).load_index().entries)


def hub_files(server) -> dict[str, bytes]:
    return server.files(REPO)


def local_files(root: Path) -> dict[str, bytes]:
    """What publish puts on the Hub: every file but the private .registry/ and git's own files
    (.gitattributes, registry content, included; .gitignore stays local)."""
    return {path: data for path, data in snapshot(root).items() if path != ".gitignore"}


def assert_nothing_recorded(root: Path) -> None:
    assert not (Repo(root).published_dir / "SHA256SUMS").exists()
    assert not (Repo(root).published_dir / "remote.json").exists()


def assert_published(server, root: Path) -> None:
    """The Hub's main holds exactly the registry, and the local record names its head."""
    assert hub_files(server) == local_files(root)
    record = json.loads((Repo(root).published_dir / "remote.json").read_text())
    assert record == {"repo_id": REPO, "revision": "main", "commit": server.head(REPO)}
    assert parse_sums((Repo(root).published_dir / "SHA256SUMS").read_bytes()) == parse_sums(
        (root / "SHA256SUMS").read_bytes()
    )


# -- the pure core -----------------------------------------------------------------------------------------------

SHA_A, SHA_B = "a" * 64, "b" * 64


def test_plan_classifies_by_lfs_sha256_or_git_blob_sha1():
    local = {
        "w/new.pth": LocalFile("w/new.pth", SHA_A, 10),
        "w/same.pth": LocalFile("w/same.pth", SHA_A, 10),
        "index.json": LocalFile("index.json", SHA_B, 5, git_sha1="1" * 40),
        "README.md": LocalFile("README.md", SHA_B, 5, git_sha1="2" * 40),
    }
    remote = RemoteState(
        REPO,
        "main",
        "c" * 40,
        {
            "w/same.pth": RemoteFile("w/same.pth", 10, "9" * 40, SHA_A),
            "index.json": RemoteFile("index.json", 5, "1" * 40),
            "README.md": RemoteFile("README.md", 5, "3" * 40),
            "notes.txt": RemoteFile("notes.txt", 1, "4" * 40),
        },
    )

    plan = make_plan(local, remote)

    assert {f.path: f.status for f in plan.files} == {
        "w/new.pth": "new",
        "w/same.pth": "unchanged",
        "index.json": "unchanged",
        "README.md": "changed",
        "notes.txt": "remote-only",
    }
    assert [f.path for f in plan.uploads] == ["README.md", "w/new.pth"] and plan.upload_bytes == 15
    assert plan.deletions == () and plan.problems == ()
    assert [f.path for f in make_plan(local, remote, delete_extra=True).deletions] == ["notes.txt"]
    assert make_plan({}, RemoteState(REPO, "main", None)).empty


def test_plan_refuses_changing_a_published_weight_unless_the_rewrite_is_recorded():
    local = {"w/a.pth": LocalFile("w/a.pth", SHA_B, 10)}
    remote = RemoteState(REPO, "main", "c" * 40, {"w/a.pth": RemoteFile("w/a.pth", 10, "9" * 40, SHA_A)})

    refused = make_plan(local, remote)
    allowed = make_plan(
        local, remote, [Rewrite(path="w/a.pth", old_sha256=SHA_A, new_sha256=SHA_B, reason="fix", date="2026-01-01")]
    )

    assert [(p.code, p.file) for p in refused.problems] == [("immutable.on-hub", "w/a.pth")]
    assert allowed.problems == () and [f.path for f in allowed.uploads] == ["w/a.pth"]


def test_verify_tree_wants_exactly_the_planned_files():
    local = {
        "w/a.pth": LocalFile("w/a.pth", SHA_A, 10),
        "index.json": LocalFile("index.json", SHA_B, 5, git_sha1="1" * 40),
    }
    plan = make_plan(local, RemoteState(REPO, "main", None))
    good = {"w/a.pth": RemoteFile("w/a.pth", 10, "9" * 40, SHA_A), "index.json": RemoteFile("index.json", 5, "1" * 40)}

    assert verify_tree(plan, local, good) == []
    bad = {"w/a.pth": RemoteFile("w/a.pth", 10, "9" * 40, SHA_B), "extra.txt": RemoteFile("extra.txt", 1, "5" * 40)}
    assert [(f.code, f.file) for f in verify_tree(plan, local, bad)] == [
        ("verify.missing", "index.json"),
        ("verify.unexpected", "extra.txt"),
        ("verify.mismatch", "w/a.pth"),
    ]


# -- end to end --------------------------------------------------------------------------------------------------


def test_publish_republish_add_pull_verify(hub_server, registry, tmp_path, cli):
    first = cli.json(*publish_args(registry, "--json"))

    assert first["ok"] and first["commit"]["oid"] == hub_server.head(REPO)
    # publish records where it published, in the index.json and card it uploaded
    assert json.loads((registry / "index.json").read_text())["registry"]["repo_id"] == REPO
    assert f"hf download {REPO}" in (registry / "README.md").read_text(encoding="utf-8")
    assert (hub_server.commits_made, hub_server.xet_uploaded_files) == (1, 1)  # one weight through Xet, the rest inline
    assert_published(hub_server, registry)

    again = cli(*publish_args(registry))
    assert "nothing to publish" in again.output
    assert (hub_server.commits_made, hub_server.xet_uploaded_files) == (1, 1)

    entry = add_state(registry, tmp_path, "s1374", seed=4)
    second = cli.json(*publish_args(registry, "--json"))
    uploads = {f["path"] for f in second["plan"]["files"] if f["status"] in ("new", "changed")}
    assert uploads == {entry.path, "index.json", "README.md", "SHA256SUMS"}
    assert (hub_server.commits_made, hub_server.xet_uploaded_files) == (2, 2)
    assert_published(hub_server, registry)
    last = HfApi().list_repo_commits(REPO)[0]
    assert last.title == "Publish 1 entry" and entry.path in last.message

    pulled = tmp_path / "pulled"
    cli("pull", "--repo-id", REPO, pulled)
    assert local_files(pulled) == local_files(registry)
    assert json.loads((pulled / ".registry/published/remote.json").read_text())["commit"] == hub_server.head(REPO)
    report = cli.json("verify-remote", "--repo-id", REPO, "-C", registry, "--json")
    assert report["ok"] and report["files"] == len(hub_files(hub_server))
    assert hub_server.requests["resolve"] > 0 and not hub_server.internal_errors


def test_dry_run_prints_the_plan_and_touches_nothing(hub_server, registry, cli):
    result = cli(*publish_args(registry, "--dry-run"))

    assert f"plan for {REPO}@main (new repo)" in result.output
    assert re.search(rf"new\s+{re.escape(weight_path(registry))}", result.output)
    assert (hub_server.requests["create_repo"], hub_server.commits_made) == (0, 0)
    assert_nothing_recorded(registry)
    as_json = cli.json(*publish_args(registry, "--dry-run", "--json"))
    assert as_json["commit"] is None and as_json["plan"]["upload"]["files"] == len(local_files(registry))


def test_dry_run_offline_reports_missing_gates_instead_of_failing(registry, cli):
    receipt_path(Repo(registry).gates_dir, Repo(registry).load_index().entries[0].sha256).unlink()

    result = cli(*publish_args(registry, "--dry-run", "--assume-empty-remote"), code=1)

    assert "plan for" in result.output and weight_path(registry) in result.output
    assert f"error: {weight_path(registry)}: no gate receipt" in result.output


def test_create_pr_and_tag(hub_server, registry, tmp_path, cli):
    cli(*publish_args(registry, "--tag", "v1"))
    api = HfApi()
    assert [(t.name, t.target_commit) for t in api.list_repo_refs(REPO).tags] == [("v1", hub_server.head(REPO))]
    main_head = hub_server.head(REPO)

    add_state(registry, tmp_path, "s1374", seed=4)
    result = cli.json(*publish_args(registry, "--create-pr", "--json"))

    assert result["commit"]["pr_revision"] == "refs/pr/1" and hub_server.head(REPO) == main_head
    record = json.loads((Repo(registry).published_dir / "remote.json").read_text())
    assert record == {"repo_id": REPO, "revision": "refs/pr/1", "commit": result["commit"]["oid"]}
    cli(*publish_args(registry, "--tag", "v1"), code=3)  # the tag exists


# -- refusals before anything is sent ----------------------------------------------------------------------------


def test_missing_receipt_is_refused_naming_the_file_and_the_fix(hub_server, registry, cli):
    receipt_path(Repo(registry).gates_dir, Repo(registry).load_index().entries[0].sha256).unlink()

    result = cli(*publish_args(registry), code=3)

    assert f"error: {weight_path(registry)}: no gate receipt" in result.output
    assert f"registry smoke {weight_path(registry)} --base-file rwkv7-tiny-pub-20260101.pth" in result.output
    assert (hub_server.requests["create_repo"], hub_server.commits_made) == (0, 0)
    assert_nothing_recorded(registry)


def test_cpu_receipt_needs_allow_cpu_gate(hub_server, registry, cli):
    result = cli("publish", "--repo-id", REPO, "-C", registry, code=3)

    assert "the gate ran on CPU only" in result.output and "--allow-cpu-gate" in result.output
    assert hub_server.commits_made == 0
    gate_all(registry, device="cuda")
    cli("publish", "--repo-id", REPO, "-C", registry)
    assert_published(hub_server, registry)


def test_failing_or_stale_receipts_are_refused(hub_server, registry, cli):
    entry = Repo(registry).load_index().entries[0]
    write_receipt(registry, entry, passed=False)
    assert "the gate failed (finite-logits)" in cli(*publish_args(registry), code=3).output

    path = write_receipt(registry, entry)
    stale = json.loads(path.read_text())
    stale["files"][entry.path] = "0" * 64
    path.write_text(
        sealed(Receipt.model_validate({**stale, "seal": None})).model_dump_json()
    )  # sealed here, so only staleness is wrong
    assert "the gate loaded other bytes" in cli(*publish_args(registry), code=3).output
    assert hub_server.commits_made == 0


def test_invalid_registry_is_refused_with_every_finding(hub_server, registry, cli):
    card = registry / "README.md"
    card.write_text(card.read_text().replace("Publish test", "Publish TEST"))
    (registry / "notes.txt").write_text("scratch\n")

    result = cli(*publish_args(registry), code=3)

    assert "error: README.md: differs from what index.json renders" in result.output
    assert "error: notes.txt: unexpected file at the registry root" in result.output
    assert "error: notes.txt: file is not in SHA256SUMS" in result.output
    assert (hub_server.requests["repo_info"], hub_server.commits_made) == (0, 0)


def test_changing_a_published_file_is_refused_unless_the_rewrite_is_recorded(hub_server, registry, tmp_path, cli):
    cli(*publish_args(registry))
    train = registry / weight_path(registry).rsplit("/", 1)[0] / "train.json"
    train.write_text(train.read_text().replace("0.01", "0.02"))
    write_sums(registry)
    write_card(registry)  # the card shows train.json's hyperparameters
    rel = train.relative_to(registry).as_posix()

    assert f"error: {rel}: published file changed since the last publish" in cli(*publish_args(registry), code=3).output
    clone = tmp_path / "clone"  # a copy without the local record: only the Hub knows the file was published
    shutil.copytree(registry, clone, ignore=shutil.ignore_patterns("published"))
    assert f"error: {rel}: already on the Hub with other bytes" in cli(*publish_args(clone), code=3).output
    assert hub_server.commits_made == 1

    allow_rewrite(registry, "learning rate was misreported")
    cli(*publish_args(registry))
    assert_published(hub_server, registry)
    assert f"rewrite {rel}: learning rate was misreported" in HfApi().list_repo_commits(REPO)[0].message


# -- faults: nothing half-published, and a re-run completes ------------------------------------------------------


def test_upload_dropped_for_good_commits_nothing_and_a_rerun_completes(lfs_hub_server, registry, cli, instant_retries):
    lfs_hub_server.drop_next("lfs_upload", times=6)  # the first attempt and the client's 5 retries

    result = cli(*publish_args(registry), code=4)

    assert f"error: {REPO}: Error while uploading" in result.output and "nothing was committed" in result.output
    assert (lfs_hub_server.commits_made, lfs_hub_server.uploaded_objects) == (0, 0)
    assert set(hub_files(lfs_hub_server)) == {".gitattributes"}  # the repo was created, nothing else
    assert_nothing_recorded(registry)
    cli(*publish_args(registry))
    assert_published(lfs_hub_server, registry)


def test_server_error_on_commit_commits_nothing_and_a_rerun_reuses_the_upload(hub_server, registry, cli):
    hub_server.fail_next("commit", status=500)

    result = cli(*publish_args(registry), code=4)

    assert "the Hub answered 500" in result.output and "run the command again" in result.output
    assert (hub_server.commits_made, hub_server.xet_uploaded_files) == (0, 1)
    assert_nothing_recorded(registry)
    cli(*publish_args(registry))
    assert (hub_server.commits_made, hub_server.xet_uploaded_files) == (1, 1)
    assert_published(hub_server, registry)


def test_remote_moving_between_plan_and_commit_is_refused_then_replanned(hub_server, registry, cli):
    cli(*publish_args(registry))
    registry_head = hub_server.head(REPO)
    add_state(registry, Path(registry).parent, "s1374", seed=4)
    hub_server.push_before_next_commit(REPO)

    result = cli(*publish_args(registry), code=4)

    assert "main moved since the plan was made" in result.output
    pushed = hub_server.head(REPO)
    assert pushed != registry_head and hub_server.commits_made == 1
    assert json.loads((Repo(registry).published_dir / "remote.json").read_text())["commit"] == registry_head
    rerun = cli(*publish_args(registry))
    assert re.search(r"remote-only\s+concurrent-push-\d+\.txt\s+\(kept", rerun.output)
    files = hub_files(hub_server)
    extra = {p for p in files if p.startswith("concurrent-push-")}
    assert len(extra) == 1 and {p: b for p, b in files.items() if p not in extra} == local_files(registry)
    cli(*publish_args(registry, "--delete-remote-extra"))
    assert_published(hub_server, registry)


def test_wrong_token_is_a_clear_error_without_the_token(hub_server, registry, cli, monkeypatch):
    wrong = "hf_WrongTokenZq81xYvKp3Ld"
    monkeypatch.setenv("HF_TOKEN", wrong)

    for args in (
        publish_args(registry),
        ["verify-remote", "--repo-id", REPO],
        ["pull", "--repo-id", REPO, registry.parent / "p"],
    ):
        result = cli(*args, code=3)
        assert f"error: {REPO}: the Hub refused the credentials (401); fix: set HF_TOKEN" in result.output
    assert not any(wrong in out or "WrongToken" in out for out in cli.outputs)
    assert hub_server.commits_made == 0 and not (registry.parent / "p").exists()


def test_verify_remote_and_pull_refuse_a_missing_repo(hub_server, tmp_path, cli):
    for args in (["verify-remote", "--repo-id", "rwkv/missing"], ["pull", "--repo-id", "rwkv/missing", tmp_path / "p"]):
        assert "error: rwkv/missing: no such repo on the Hub" in cli(*args, code=3).output
    assert list(tmp_path.iterdir()) == []
    assert hub_server.requests["create_repo"] == 0


def test_verify_remote_finds_tampered_files_and_local_differences(hub_server, registry, tmp_path, cli):
    cli(*publish_args(registry))
    weight = weight_path(registry)
    HfApi().upload_file(path_or_fileobj=b"\0not the published bytes", path_in_repo=weight, repo_id=REPO)
    entry = add_state(registry, tmp_path, "s1374", seed=4)

    report = cli.json("verify-remote", "--repo-id", REPO, "-C", registry, "--json", code=1)

    found = {(f["code"], f["file"]) for f in report["problems"]}
    assert ("remote.mismatch", weight) in found and ("local.unpublished", entry.path) in found
    assert "error" not in report and not report["ok"]


def test_pull_refuses_a_non_empty_target_and_a_corrupt_remote(hub_server, registry, tmp_path, cli):
    cli(*publish_args(registry))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert "exists and is not an empty directory" in cli("pull", "--repo-id", REPO, tmp_path / "full", code=3).output

    HfApi().upload_file(path_or_fileobj=b"\0tampered", path_in_repo=weight_path(registry), repo_id=REPO)
    result = cli("pull", "--repo-id", REPO, tmp_path / "new", code=3)
    assert f"error: {weight_path(registry)}:" in result.output
    assert not (tmp_path / "new").exists() and not [p for p in tmp_path.iterdir() if ".pull-" in p.name]


def test_the_token_never_appears_in_any_output(hub_server, registry, tmp_path, cli):
    hub_server.fail_next("commit", status=500)
    cli(*publish_args(registry, "--json"), code=4)
    cli(*publish_args(registry, "--dry-run", "--json"))
    cli(*publish_args(registry))
    cli(*publish_args(registry, "--json"))
    cli("verify-remote", "--repo-id", REPO, "-C", registry, "--json")
    cli("pull", "--repo-id", REPO, tmp_path / "pulled", "--json")
    cli("pull", "--repo-id", "rwkv/missing", tmp_path / "other", code=3)

    assert hub_server.token.startswith("hf_test_")
    assert not any(hub_server.token in out for out in cli.outputs)
    record = (Repo(registry).published_dir / "remote.json").read_text()
    assert hub_server.token not in record


def test_commit_message_lists_the_entries_added(registry):
    index = Repo(registry).load_index()
    local = {e.path: LocalFile(e.path, e.sha256, e.size) for e in index.entries}
    summary, description = commit_message(index, make_plan(local, RemoteState(REPO, "main", None)))
    assert summary == "Publish 1 entry" and f"add {index.entries[0].path} (state, data v1.41" in description


# -- CI: the documented checks run on a registry ------------------------------------------------------------------


def ci_blocks() -> list[dict]:
    text = (PROJECT / "docs" / "ci.md").read_text()
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def test_ci_docs_run_validate_and_card_check_on_a_registry(registry, cli):
    blocks = ci_blocks()
    hooks = next(b for b in blocks if isinstance(b, list))  # .pre-commit-hooks.yaml
    entries = {hook["id"]: hook["entry"] for hook in hooks}
    workflow = next(b for b in blocks if isinstance(b, dict) and "jobs" in b)
    steps = [s.get("run", "") for job in workflow["jobs"].values() for s in job["steps"]]
    config = next(b for b in blocks if isinstance(b, dict) and "repos" in b)  # .pre-commit-config.yaml
    assert {h["id"] for r in config["repos"] for h in r["hooks"]} <= set(entries)

    for entry in entries.values():
        command = shlex.split(entry)
        assert command[0] == "registry" and any(command[1] in run for run in steps)
        cli(*command[1:], registry)
    (registry / "README.md").write_text("# stale\n")
    for entry in entries.values():
        cli(*shlex.split(entry)[1:], registry, code=1)


def test_pull_refuses_a_hostile_tree_before_downloading_anything(hub_server, registry, tmp_path, cli):
    cli(*publish_args(registry))
    repo = hub_server._repos[("model", REPO)]
    head = repo.resolve("main")
    hostile = repo.add_commit(head.oid, {**head.tree, "../escape.txt": Blob(b"outside\n")}, "hostile", "", "mallory")
    repo.move_ref("main", hostile.oid)

    result = cli("pull", "--repo-id", REPO, tmp_path / "new", "--json", code=3)
    document = json.loads(result.stdout)
    assert document["problems"][0]["code"] == "remote.bad-path" and "'..'" in document["problems"][0]["message"]
    assert (
        "Traceback" not in result.output and not (tmp_path / "new").exists() and not (tmp_path / "escape.txt").exists()
    )
    assert not [p for p in tmp_path.iterdir() if ".pull-" in p.name]


def test_plan_restores_only_the_registry_own_bytes_and_only_when_asked():
    local = {"w.pth": LocalFile("w.pth", SHA_A, 1), "x.pth": LocalFile("x.pth", SHA_A, 1)}
    remote = RemoteState(REPO, "main", "c" * 40, {p: RemoteFile(p, 1, "0" * 40, SHA_B) for p in local})
    asked = make_plan(local, remote, restorable=frozenset({"w.pth"}), restore=True)
    assert asked.restored == {"w.pth"} and [p.file for p in asked.problems] == ["x.pth"]
    not_asked = make_plan(local, remote, restorable=frozenset({"w.pth"}))
    fixes = {p.file: p.fix for p in not_asked.problems}
    assert "publish --restore" in fixes["w.pth"] and "--allow-rewrite" in fixes["x.pth"] and not not_asked.restored
    summary, description = commit_message(Index(), asked)
    assert f"restore w.pth (sha256 {SHA_A})" in description


@pytest.mark.parametrize(
    "extra,code",
    [
        ({"README.MD": b"twin\n"}, "remote.name-collision"),
        ({"caf\u00e9.txt": b"1\n", "cafe\u0301.txt": b"2\n"}, "remote.name-collision"),
        ({"x\u202etxt.pth": b"x\n"}, "remote.bad-path"),
        ({"a\u200b.txt": b"x\n"}, "remote.bad-path"),
    ],
    ids=["case twin", "NFC and NFD twins", "bidi control", "zero-width space"],
)
def test_pull_refuses_names_that_read_or_land_as_others(hub_server, registry, tmp_path, cli, extra, code):
    cli(*publish_args(registry))
    repo = hub_server._repos[("model", REPO)]
    head = repo.resolve("main")
    hostile = repo.add_commit(
        head.oid, {**head.tree, **{name: Blob(data) for name, data in extra.items()}}, "twins", "", "mallory"
    )
    repo.move_ref("main", hostile.oid)
    result = cli("pull", "--repo-id", REPO, tmp_path / "new", "--json", code=3)
    assert json.loads(result.stdout)["problems"][0]["code"] == code and not (tmp_path / "new").exists()


# -- who may see the repo: --private and --gated on its first publish ---------------------------------------------


def test_publish_private_makes_the_first_publish_private_and_the_plan_and_card_say_so(hub_server, registry, cli):
    planned = cli.json(*publish_args(registry, "--private", "--dry-run", "--json"))
    assert planned["ok"] and planned["access"] == "private" and planned["plan"]["head"] is None
    assert "the repo will be private: its owners only" in cli(*publish_args(registry, "--private", "--dry-run")).output
    with pytest.raises(Exception, match="404|not found|Repository Not Found"):
        HfApi().model_info(REPO)  # a dry run creates nothing

    published = cli.json(*publish_args(registry, "--private", "--json"))
    assert published["ok"] and published["access"] == "private"
    info = HfApi().model_info(REPO)
    assert info.private is True and not info.gated
    assert json.loads((registry / "index.json").read_text())["registry"]["access"] == "private"
    card = (registry / "README.md").read_text(encoding="utf-8")
    assert (
        "This repository is private" in card
        and "本仓库是私有的" in card
        and card.index("private") < card.index(f"hf download {REPO}")
    )
    assert_published(hub_server, registry)
    assert hub_files(hub_server)["README.md"] == (registry / "README.md").read_bytes()  # the published card says so too
    # Without the owner's token it is not there.
    hub_server.require_token = False
    with pytest.raises(Exception, match="404|not found|Repository Not Found"):
        HfApi(token=False).model_info(REPO)
    hub_server.require_token = True

    # A later publish keeps it private, and the plan says so.
    assert cli.json(*publish_args(registry, "--dry-run", "--json"))["access"] == "private"
    # Once it holds a published registry, publish does not change who may see it.
    refused = cli(*publish_args(registry, "--gated", "auto"), code=3)
    assert f"error: {REPO}: is private: its owners only and holds a published registry" in refused.output
    assert (
        f"https://huggingface.co/{REPO}/settings" in refused.output
        and "registry set access gated-auto" in refused.output
    )
    assert HfApi().model_info(REPO).private is True


@pytest.mark.parametrize("mode", ["auto", "manual"])
def test_publish_gated_sets_the_gate_before_anything_is_committed(hub_server, registry, cli, mode):
    hub_server.fail_next("repo_settings", status=500)
    failed = cli(*publish_args(registry, "--gated", mode), code=4)
    assert "the Hub answered 500" in failed.output
    # The repo was created private and stays so until its gate is set; nothing was committed or recorded.
    info = HfApi().model_info(REPO)
    assert info.private is True and set(hub_files(hub_server)) == {".gitattributes"} and hub_server.commits_made == 0
    assert_nothing_recorded(registry)

    published = cli.json(*publish_args(registry, "--gated", mode, "--json"))
    assert published["ok"] and published["access"] == f"gated-{mode}"
    info = HfApi().model_info(REPO)
    assert info.private is False and info.gated == mode
    card = (registry / "README.md").read_text(encoding="utf-8")
    said = "approved automatically" if mode == "auto" else "approved by its owners"
    assert f"Access to this repository is gated: request it on the repository's page (requests are {said})" in card
    assert_published(hub_server, registry)


def test_publish_private_and_gated_together_is_a_usage_error(hub_server, registry, cli):
    result = cli(*publish_args(registry, "--private", "--gated", "manual"), code=2)
    assert (
        result.output.startswith("error: --gated: a private repo is seen by its owners only")
        and "fix: pass --private or --gated, not both" in result.output
    )
    assert_nothing_recorded(registry)


def test_registry_set_access_records_a_change_made_on_the_hub(registry, cli):
    cli("set", "access", "gated-manual", "-C", registry)
    assert "approved by its owners" in (registry / "README.md").read_text(encoding="utf-8")
    bad = cli("set", "access", "secret", "-C", registry, code=3)
    assert "'secret' is not who may see a repo" in bad.output
    cli("set", "access", "-C", registry)
    assert "gated" not in (registry / "README.md").read_text(encoding="utf-8")
