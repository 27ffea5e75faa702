"""The CLI contract every command keeps: exit codes, --json refusals, -C / RWKV_REGISTRY,
REGISTRY_DEBUG, and light commands that never import torch."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from huggingface_hub.utils import are_progress_bars_disabled, enable_progress_bars

from registry.artifacts.synthetic import make_state_file
from registry.cli import main
from registry.hub.remote import Hub
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.card import check_card
from registry.ops.list import list_registry

from .conftest import SMALL

# Runs the CLI in a fresh interpreter and reports, at exit, whether torch was ever imported.
PROBE = (
    "import atexit, sys; atexit.register(lambda: print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', "
    "file=sys.stderr)); from registry.cli import main; main()"
)


def probe(*args, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RWKV_REGISTRY", "REGISTRY_DEBUG"))}
    return subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
    )


def invoke(*args, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


@pytest.mark.parametrize(
    "args",
    [
        ["validate"],
        ["sums", "--check"],
        ["sums"],
        ["list"],
        ["card", "--check"],
        ["card"],
        ["publish", "--repo-id", "ns/name", "--dry-run", "--assume-empty-remote"],
        ["set", "title", "T"],
        ["set", "summary", "S", "--lang", "en"],
        ["eval-setup", "exam", "--items", "568"],
        ["describe", "--method", "miss", "--profile", "p"],
        ["train-stage", "x/full/v1/x.pth", "s1", "--gpus", "6"],
        ["score", "--base", "b", "--benchmark", "e", "--value", "1", "--date", "2026-10-16", "--backend", "b"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_light_commands_never_import_torch(empty_registry, args):
    result = probe(*args, cwd=empty_registry)
    assert result.stderr.strip().endswith("NO-TORCH"), result.stderr
    assert result.returncode in (0, 1, 3), (
        result.stderr
    )  # publish --dry-run exits 1 (no gate receipts yet); describe, train-stage, score refuse in an empty registry (3)


def test_init_imports_no_torch(tmp_path):
    result = probe("init", tmp_path / "new", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr.strip().endswith("NO-TORCH")


def test_registry_env_and_dash_c_mean_the_same_on_every_command(tmp_path):
    env = {"RWKV_REGISTRY": str(tmp_path / "env-reg")}
    assert invoke("init", env=env).exit_code == 0
    for args in (["validate"], ["sums", "--check"], ["card", "--check"], ["list"], ["sums"], ["card"]):
        assert invoke(*args, env=env).exit_code == 0, args
        assert invoke(*args, "-C", tmp_path / "env-reg").exit_code == 0, args
    assert invoke("init", "-C", tmp_path / "dash-c").exit_code == 0
    assert (tmp_path / "dash-c" / "index.json").is_file()


def test_dir_and_a_different_dash_c_is_a_usage_error(empty_registry, tmp_path):
    result = invoke("validate", empty_registry, "-C", tmp_path / "other", "--json")
    assert result.exit_code == 2 and json.loads(result.stdout)["problems"][0]["code"] == "usage"


def test_exit_codes_are_distinct(empty_registry, tmp_path):
    assert invoke("validate", empty_registry).exit_code == 0
    (empty_registry / "stray.txt").write_text("x")
    assert invoke("validate", empty_registry).exit_code == 1  # checked, found problems
    assert invoke("validate", "--bogus").exit_code == 2  # usage
    assert invoke("list", "-C", tmp_path / "missing").exit_code == 3  # refused
    (empty_registry / "stray.txt").unlink()
    (empty_registry / "SHA256SUMS").unlink()
    (empty_registry / "SHA256SUMS").mkdir()
    failed = invoke("sums", "-C", empty_registry, "--json")
    assert failed.exit_code == 5 and json.loads(failed.stdout)["problems"][0]["file"] == str(
        empty_registry / "SHA256SUMS"
    )


def test_every_refusal_under_json_is_one_document(tmp_path):
    for args in (
        ["list", "-C", tmp_path / "nope", "--json"],
        ["sums", "-C", tmp_path / "nope", "--json"],
        [
            "score",
            "x.pth",
            "-C",
            tmp_path / "nope",
            "--benchmark",
            "b",
            "--value",
            "1",
            "--date",
            "2026-01-01",
            "--backend",
            "b",
            "--json",
        ],
    ):
        result = invoke(*args)
        document = json.loads(result.stdout)  # stdout alone: the error line goes to stderr
        assert (
            result.exit_code == 3
            and document["ok"] is False
            and {"code", "file", "message", "fix"} == set(document["problems"][0])
        )


def test_registry_debug_prints_the_traceback_with_its_cause(empty_registry):
    (empty_registry / "index.json").write_text("{broken")
    quiet = probe("list", cwd=empty_registry)
    assert quiet.returncode == 3 and "Traceback" not in quiet.stderr
    env = {**os.environ, "REGISTRY_DEBUG": "1"}
    loud = subprocess.run(
        [sys.executable, "-m", "registry", "list"], cwd=empty_registry, capture_output=True, text=True, env=env
    )
    assert loud.returncode == 3 and "Traceback" in loud.stderr and "JSONDecodeError" in loud.stderr
    assert "direct cause" in loud.stderr and loud.stderr.rstrip().splitlines()[-1].startswith("error: ")


def test_a_pre_commit_config_at_the_root_is_not_a_stray_file(empty_registry):
    (empty_registry / ".pre-commit-config.yaml").write_text("repos: []\n")
    assert invoke("validate", empty_registry).exit_code == 0


# ----------------------------------------------------------------------------------------------
# Option ranges, options that exclude each other, a full disk: one line each, not click's usage block

SCORE = ["--benchmark", "b", "--value", "1", "--date", "2026-01-01", "--backend", "b"]
USAGE_ERRORS = [
    (["describe"], "PATH"),
    (["describe", "x.pth", "--method", "full"], "PATH"),
    (["describe", "--method", "full", "--base", "b"], "PATH"),
    (["describe", "--method", "full", "--parameters", "0"], "--parameters"),
    (["describe", "--method", "full", "--stop-token", "-1"], "--stop-token"),
    (["train-stage", "x.pth", "s1", "--deepspeed-stage", "5"], "--deepspeed-stage"),
    (["train-stage", "x.pth", "s1", "--gpus", "0"], "--gpus"),
    (["train-stage", "x.pth", "s1", "--tokens", "-1"], "--tokens"),
    (["train-stage", "x.pth", "s1", "--conversations", "-5"], "--conversations"),
    (["train-stage", "x.pth", "s1", "--supervised-tokens", "-1"], "--supervised-tokens"),
    (["eval-setup", "exam", "--items", "0"], "--items"),
    (["score", "x.pth", "--runs", "0", *SCORE], "--runs"),
    (["score", "--reference", "r", *SCORE], "--base"),
    (["score", *SCORE], "--base"),
    (["export-hf", "x.pth", "--base", "b"], "--base"),
    (["export-hf", "x.pth", "--base-file", "b.pth"], "--base-file"),
    (["score", "--base", "b", "--method", "lora", *SCORE], "--method"),
    (["score", "x.pth", "--value", "1"], "--benchmark"),
    (["validate", "--bogus"], "--bogus"),
]


@pytest.mark.parametrize("args,option", USAGE_ERRORS, ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_a_usage_error_is_one_line_naming_the_option(empty_registry, args, option):
    result = invoke(*args, "-C", empty_registry)
    assert result.exit_code == 2 and "Usage:" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {option}: ") and "; fix: " in lines[0], result.stderr
    problem = json.loads(invoke(*args, "-C", empty_registry, "--json").stdout)["problems"][0]
    assert problem["code"] == "usage" and problem["file"] == option and problem["fix"]


def test_a_range_error_says_which_values_fit(empty_registry):
    line = invoke("train-stage", "x.pth", "s1", "--deepspeed-stage", "5", "-C", empty_registry).stderr
    assert (
        line == "error: --deepspeed-stage: 5 is not in the range 0<=x<=3; fix: pass --deepspeed-stage a whole number "
        "at least 0 and at most 3\n"
    )


WRITE_COMMANDS = [
    ["set", "title", "T"], ["set", "summary", "S", "--lang", "en"],
    ["eval-setup", "exam", "--items", "5"], ["sums"], ["card"],
    ["describe", "--base", "rwkv7-tiny-a-20260101", "--known-issue", "k", "--lang", "en"],
    ["score", "--base", "rwkv7-tiny-a-20260101", *SCORE],
]  # fmt: skip


@pytest.mark.parametrize("args", WRITE_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_full_disk_names_the_file_it_could_not_write(empty_registry, small_base, monkeypatch, args):
    """A write or fsync that finds the disk full (ENOSPC) carries no file name: the line still names one."""

    add_base(empty_registry, BaseRequest(path=small_base, filename=small_base.name))

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    result = invoke(*args, "-C", empty_registry)
    assert result.exit_code == 5, result.output
    line = result.stderr.strip()
    assert line.startswith(f"error: {empty_registry}/") and ": No space left on device; fix: free disk space" in line, (
        line
    )


def test_a_full_disk_during_add_and_init_names_a_file(empty_registry, small_base, tmp_path, monkeypatch):
    add_base(empty_registry, BaseRequest(path=small_base, filename=small_base.name))
    state = make_state_file(tmp_path / "s.pth", SMALL)
    train = tmp_path / "t.json"
    train.write_text(
        json.dumps(
            {"trainer": {"name": "t", "version": "1"}, "hyperparameters": {}, "command": "t", "data_sha256": "ab" * 32}
        )
    )
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
    for args in (
        [
            "add",
            state,
            "-C",
            empty_registry,
            "--base",
            "rwkv7-tiny-a-20260101",
            "--method",
            "state",
            "--data-version",
            "v1",
            "--train-json",
            train,
        ],
        ["init", tmp_path / "new"],
    ):
        result = invoke(*args)
        assert result.exit_code == 5 and re.match(
            rf"error: {re.escape(str(args[-1] if args[0] == 'init' else empty_registry))}/\S+: No space left "
            r"on device; fix: ",
            result.stderr,
        ), result.stderr


SHRINK_DURING_CONVERT = """
import mmap, os, sys
from pathlib import Path
from registry.core import sigbus
from registry.ops import convert

sigbus.install()

def shrinking_inspect(path):  # whatever reads the source, a SIGBUS while it does must name the file
    with open(path, "rb") as handle:
        mapping = mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ)
    os.truncate(path, 0)
    print(mapping[len(mapping) // 2])

convert.inspect_weights = shrinking_inspect
convert.convert_standalone(Path(sys.argv[1]), 1 << 30)
"""


def test_a_sigbus_in_standalone_convert_names_the_source(tmp_path):
    source = tmp_path / "s.pth"
    source.write_bytes(bytes(1 << 20))
    died = subprocess.run(
        [sys.executable, "-c", SHRINK_DURING_CONVERT, str(source)], capture_output=True, text=True, timeout=120
    )
    assert died.returncode == 5 and died.stderr.startswith(
        f"error: {source}: the file shrank while it was being read (SIGBUS)"
    ), (died.returncode, died.stderr)


SHRINK_WHILE_HASHING = """
import os, sys
from contextlib import contextmanager
from pathlib import Path
from registry.core import sigbus
from registry.core.hashing import engine

sigbus.install()
real = engine.mapped

@contextmanager
def shrinking_mapped(fd, offset, length):  # the source is truncated while the hashing thread maps it
    with real(fd, offset, length) as window:
        os.truncate(sys.argv[1], 0)
        yield window

engine.mapped = shrinking_mapped
print(engine.hash_in_background(Path(sys.argv[1])).result())
"""


def test_a_sigbus_in_the_background_hash_of_a_convert_names_the_source(tmp_path):
    """Issue 38: convert hashes its source on a thread, before and after it names it for inspection."""
    source = tmp_path / "s.pth"
    source.write_bytes(bytes(1 << 20))
    died = subprocess.run(
        [sys.executable, "-c", SHRINK_WHILE_HASHING, str(source)], capture_output=True, text=True, timeout=120
    )
    assert died.returncode == 5 and died.stderr.startswith(
        f"error: {source}: the file shrank while it was being read (SIGBUS)"
    ), (died.returncode, died.stderr)


def _action_script() -> str:
    """The Python step of action.yml that turns validate's JSON into workflow annotations."""
    text = (Path(__file__).resolve().parent.parent / "action.yml").read_text()
    body = text.split("python - <<'EOF'\n", 1)[1].split("\n        EOF\n", 1)[0]
    return "\n".join(line.removeprefix("        ") for line in body.splitlines())


def test_the_action_annotates_a_json_error_at_its_line_and_column(empty_registry, tmp_path):
    (empty_registry / "index.json").write_text('{\n  "registry": \n}\n')
    result = tmp_path / "result.json"
    result.write_text(invoke("validate", empty_registry, "--json").stdout)
    ran = subprocess.run(
        [sys.executable, "-c", _action_script()],
        capture_output=True,
        text=True,
        env={**os.environ, "RESULT": str(result), "REGISTRY": str(empty_registry)},
        timeout=60,
    )
    annotation = next(line for line in ran.stdout.splitlines() if line.startswith("::error "))
    assert annotation.startswith(f"::error file={empty_registry}/index.json,line=3,col=1,title=json.malformed::"), (
        annotation
    )


def test_list_prints_whole_paths_when_not_on_a_terminal(empty_registry, small_base, tmp_path):
    add_base(empty_registry, BaseRequest(path=small_base, filename=small_base.name))
    train = tmp_path / "t.json"
    train.write_text(
        json.dumps(
            {"trainer": {"name": "t", "version": "1"}, "hyperparameters": {}, "command": "t", "data_sha256": "ab" * 32}
        )
    )
    state = make_state_file(tmp_path / f"{'state-lr0.01-step1224-' * 5}final.pth", SMALL)
    entry = add_weight(empty_registry, AddRequest(state, small_base.name[:-4], "state", "v1.41", train))
    listed = invoke("list", "-C", empty_registry)  # CliRunner's stdout is no terminal, as in a pipe
    assert listed.exit_code == 0 and entry.path in listed.stdout and len(entry.path) > 80


def test_pull_help_says_what_revision_means_there():
    text = " ".join(invoke("pull", "--help").stdout.split())
    assert "--revision TEXT Branch, tag or commit to download." in text and "publish" not in text


def test_the_catalog_note_points_at_nothing_a_wheel_user_lacks(empty_registry, small_base):
    result = invoke("add-base", small_base, "-C", empty_registry)
    note = result.stderr.strip()
    assert (
        result.exit_code == 0
        and note.startswith(f"note: {small_base.name} is not in the known-bases catalog; ")
        and "docs/" not in note
    )


# ----------------------------------------------------------------------------------------------
# The output sink (registry/cli/output.py): --json is an option like any other, no side channel


def test_the_cli_leaves_the_environment_as_it_found_it(empty_registry, monkeypatch):
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    before = dict(os.environ)
    assert invoke("list", "-C", empty_registry, "--json").exit_code == 0
    assert invoke("validate", "--bogus", "--json").exit_code == 2
    assert (
        dict(os.environ) == before
    )  # the Hub client's bars are switched by an argument (Hub(progress=...)), not by a variable


def test_the_hub_client_s_bars_follow_the_argument():
    enable_progress_bars()
    Hub("ns/name")
    assert not are_progress_bars_disabled()
    Hub("ns/name", progress=False)
    assert are_progress_bars_disabled()
    enable_progress_bars()


@pytest.mark.parametrize(
    "args,json_mode",
    [
        (["validate", "--bogus", "--json"], True),  # an unknown option before the flag: the flag is still read
        (["validate", "--json", "--bogus"], True),
        (["nope", "--json"], True),  # no such command
        (["validate", "--bogus", "--", "--json"], False),  # after `--` it is an argument, as click reads it
        (["validate", "--bogus", "-C", "--json"], False),  # the value of -C, as click reads it
        (["validate", "--json", "--index-only"], True),  # an option missing its value: the flag before it still counts
        (["--json", "validate"], True),  # given to the group, which has no such option
        (["dataset", "--json"], True),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else str(a),
)
def test_a_refused_command_line_reads_the_json_flag_as_click_parses_it(args, json_mode):
    result = invoke(*args)
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    if json_mode:
        assert json.loads(result.stdout)["problems"][0]["code"] == "usage"
    else:
        assert result.stdout == ""


def test_list_and_card_check_are_ops_functions(empty_registry):
    listing = list_registry(empty_registry)
    assert (
        listing.as_dict()
        == json.loads(invoke("list", "-C", empty_registry, "--json").stdout)
        == {"bases": [], "entries": [], "checkpoints": []}
    )
    assert check_card(empty_registry).problems == [] and check_card(empty_registry).diff == ""
    readme = empty_registry / "README.md"
    readme.write_text(readme.read_text() + "edited\n")
    stale = check_card(empty_registry)
    assert [p.file for p in stale.problems] == ["README.md"] and "-edited" in (stale.diff or "")
    assert stale.diff == json.loads(invoke("card", "--check", "-C", empty_registry, "--json").stdout)["diff"]


def test_every_refusal_line_names_a_file_even_an_empty_argument_or_a_missing_base(empty_registry, small_base):
    """Issue 38: `add-base ""` and exporting a base without --base-file printed lines naming no file."""

    empty = invoke("add-base", "", "-C", empty_registry)
    assert empty.exit_code in (2, 3) and empty.stderr.startswith('error: "": '), empty.stderr
    add_base(empty_registry, BaseRequest(path=small_base, filename=small_base.name))
    missing = invoke("export-hf", "--base", small_base.name[:-4], "-C", empty_registry)
    assert missing.exit_code == 3 and missing.stderr.startswith(f"error: {small_base.name}: exporting base"), (
        missing.stderr
    )
