"""registry migrate, and every command's refusal of an older format_version.

The format 1 fixture is built by hand from docs/formats.md ("index.json's format versions"): a
registry written by this tool, then its index.json put back in format 1's first shape (an
entry's gate record naming its receipt's path, without versions or figures, as before commit
cfc4c9d), with SHA256SUMS listing those bytes, as the old tool left it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry.artifacts.signature import SignaturePolicy
from registry.artifacts.synthetic import make_base_checkpoint, make_state_file
from registry.cli import main
from registry.core.models import INDEX_FORMAT_VERSION
from registry.core.repo import Repo
from registry.core.sums import parse_sums
from registry.gate.receipt import Receipt
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.init import init_registry
from registry.ops.validate import validate

from .conftest import SMALL, snapshot
from .keys import write_key
from .test_ops_artifacts import train_json
from .test_publish import write_receipt

MIGRATE = "run `registry migrate`"


def run(*args: object, code: int = 0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result


def errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def to_format_1(root: Path, receipt_named: bool = True) -> None:
    """Rewrite ``root``'s index.json as format 1 wrote it (docs/formats.md): ``"format_version": 1``,
    each gate record ``{"passed", "device", "file_sha256", "receipt", "gpu", "date"}``; SHA256SUMS's
    line for index.json made to match, as the old tool's own SHA256SUMS did."""
    index = root / "index.json"
    data = json.loads(index.read_text(encoding="utf-8"))
    data["format_version"] = 1
    for entry in data["entries"]:
        entry["gate"] = {
            "passed": True,
            "device": "cpu",
            "file_sha256": entry["sha256"],
            **({"receipt": f".registry/gates/{entry['sha256']}.json"} if receipt_named else {}),
            "gpu": None,
            "date": "2026-11-30",
        }
    index.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    sums = root / "SHA256SUMS"
    sha = hashlib.sha256(index.read_bytes()).hexdigest()
    lines = [f"{sha}  index.json" if line.endswith("  index.json") else line for line in sums.read_text().splitlines()]
    sums.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def current(tmp_path_factory) -> Path:
    """A registry of today's format: a base, a State entry, and the gate's sealed receipt for it."""
    tmp = tmp_path_factory.mktemp("migrate")
    root = init_registry(tmp / "reg", title="Migrate test").root
    base = make_base_checkpoint(tmp / "rwkv7-tiny-mig-20260101.pth", SMALL)
    add_base(root, BaseRequest(path=base, filename=base.name))
    entry = add_weight(
        root,
        AddRequest(
            make_state_file(tmp / "s1.pth", SMALL, seed=4), base.name[:-4], "state", "v1.41", train_json(tmp / "t.json")
        ),
    )
    write_receipt(root, entry)
    return root


@pytest.fixture
def old(current, tmp_path) -> Path:
    root = Path(shutil.copytree(current, tmp_path / "reg"))
    to_format_1(root)
    return root


def test_the_fixture_is_what_format_1_was(old):
    data = json.loads((old / "index.json").read_text())
    assert data["format_version"] == 1 < INDEX_FORMAT_VERSION and set(data["entries"][0]["gate"]) == {
        "passed",
        "device",
        "file_sha256",
        "receipt",
        "gpu",
        "date",
    }
    listed = dict(reversed(line.split("  ", 1)) for line in (old / "SHA256SUMS").read_text().splitlines())
    assert (
        listed["index.json"] == hashlib.sha256((old / "index.json").read_bytes()).hexdigest()
    )  # as the old tool left it


COMMANDS = [
    ["validate"],
    ["validate", "--json"],
    ["sums"],
    ["sums", "--check"],
    ["card"],
    ["card", "--check"],
    ["list"],
    ["set", "title", "New"],
    [
        "score",
        "rwkv7-tiny-mig-20260101/state/v1.41/s1.pth",
        "--benchmark",
        "b",
        "--value",
        "1",
        "--date",
        "2026-01-01",
        "--backend",
        "b",
    ],
    ["describe", "rwkv7-tiny-mig-20260101/state/v1.41/s1.pth", "--lang", "en", "--notes", "n"],
    ["smoke", "--device", "cpu"],
    ["publish", "--repo-id", "a/b", "--dry-run", "--assume-empty-remote", "--allow-cpu-gate"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_meeting_format_1_says_run_registry_migrate_in_one_line(old, command):
    before = snapshot(old)
    result = run(*command, "-C", old, code=3)
    if "--json" in command:
        document = json.loads(result.stdout)
        assert (
            document["ok"] is False
            and [p["code"] for p in document["problems"]] == ["index.old-format"]
            and MIGRATE in document["problems"][0]["fix"]
        )
    else:
        lines = errors(result.output)
        assert len(lines) == 1 and MIGRATE in lines[0] and "format_version 1" in lines[0], result.output
    assert "by hand" not in result.output
    assert snapshot(old) == before


def test_a_newer_format_says_upgrade(current, tmp_path):
    root = Path(shutil.copytree(current, tmp_path / "reg"))
    index = root / "index.json"
    index.write_text(index.read_text().replace(f'"format_version": {INDEX_FORMAT_VERSION}', '"format_version": 99', 1))
    for command in (["validate"], ["migrate"], ["list"]):
        lines = errors(run(*command, "-C", root, code=3).output)
        assert len(lines) == 1 and "newer rwkv-registry" in lines[0] and "upgrade rwkv-registry" in lines[0]


def test_migrate_brings_format_1_to_the_current_one(old, current):
    receipt = Receipt.model_validate_json(next((old / ".registry" / "gates").iterdir()).read_bytes())
    result = run("migrate", "-C", old)
    assert f"migrated index.json from format_version 1 to {INDEX_FORMAT_VERSION}" in result.output
    assert "versions and figures taken from this installation's receipt" in result.output
    assert "wrote " in result.output and "SHA256SUMS" in result.output and "index.json" in result.output
    index = Repo(old).load_index()
    assert index.format_version == INDEX_FORMAT_VERSION
    gate = index.entries[0].gate
    assert gate is not None and gate.passed and gate.versions["torch"] == receipt.environment.torch
    assert [c.name for c in gate.checks] == [c.name for c in receipt.checks]
    assert ".registry" not in (old / "index.json").read_text()
    assert validate(old) == []  # index.json, the card, evaluation.json and SHA256SUMS agree
    run("card", "-C", old, "--check")
    again = run("migrate", "-C", old)  # a second run has nothing to do
    assert "nothing to migrate" in again.output
    # the files the migration did not concern are byte-identical
    untouched = {
        p: b
        for p, b in snapshot(current).items()
        if p not in ("index.json", "README.md", "evaluation.json", "SHA256SUMS")
    }
    assert {p: b for p, b in snapshot(old).items() if p in untouched} == untouched


def test_a_receipt_not_written_here_lends_no_figures(old, tmp_path, monkeypatch):
    """.registry/ is untrusted input: a receipt this installation's gate did not seal is not read into index.json."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "someone-else"))
    result = run("migrate", "-C", old)
    assert "versions and figures stay unrecorded" in result.output
    gate = Repo(old).load_index().entries[0].gate
    assert gate is not None and gate.passed and gate.versions == {} and gate.checks == [] and gate.date == "2026-11-30"
    assert validate(old) == []


def test_migrate_json_and_dry_run(old):
    before = snapshot(old)
    planned = json.loads(run("migrate", "-C", old, "--dry-run", "--json").stdout)
    assert (
        planned["ok"]
        and planned["dry_run"]
        and planned["from_version"] == 1
        and planned["to_version"] == INDEX_FORMAT_VERSION
    )
    assert (
        {"index.json", "SHA256SUMS"} <= set(planned["written"])
        and planned["signature_stale"] is False
        and len(planned["changes"]) == 1
    )
    assert snapshot(old) == before and "would migrate" in run("migrate", "-C", old, "--dry-run").output
    assert snapshot(old) == before
    done = json.loads(run("migrate", "-C", old, "--json").stdout)
    assert {k: v for k, v in done.items() if k != "dry_run"} == {
        k: v for k, v in planned.items() if k != "dry_run"
    } and done["dry_run"] is False
    current = json.loads(run("migrate", "-C", old, "--json").stdout)
    assert current["from_version"] == current["to_version"] == INDEX_FORMAT_VERSION and current["written"] == []


def test_migrate_help():
    text = run("migrate", "--help").output
    assert "format_version" in text and "--dry-run" in text and "--json" in text


def test_migrate_says_the_signature_is_stale(current, tmp_path):
    root = Path(shutil.copytree(current, tmp_path / "reg"))
    private, public = write_key(tmp_path, "signer")
    run("sign", "--key", private, "-C", root)
    to_format_1(root)
    result = run("migrate", "-C", root)
    stale = [line for line in result.output.splitlines() if "model.sig" in line]
    assert (
        len(stale) == 1 and stale[0].startswith("warning: model.sig: stale signature") and "registry sign" in stale[0]
    )  # said once, by the write path
    assert json.loads((root / "index.json").read_text())["registry"]["signer"] is not None

    def signature_problems() -> list[str]:  # what publish checks of a present model.sig
        return [
            p.code
            for p in SignaturePolicy(public).folder_problems(Repo(root), parse_sums((root / "SHA256SUMS").read_bytes()))
        ]

    assert "sign.mismatch" in signature_problems()  # it is stale indeed
    run("sign", "--key", private, "-C", root)
    assert signature_problems() == [] and validate(root) == []


def test_migrate_refuses_a_file_changed_behind_the_tools_back(old):
    """Like every writing command, migrate does not launder an unrelated change into SHA256SUMS."""
    train = next(old.rglob("train.json"))
    train.write_text(train.read_text() + " ")
    before = snapshot(old)
    lines = errors(run("migrate", "-C", old, code=3).output)
    assert lines == [
        f"error: {train.relative_to(old).as_posix()}: sha256 "
        f"is {lines[0].split('sha256 is ')[1].split(' ')[0]} but SHA256SUMS "
        f"says {lines[0].split('SHA256SUMS says ')[1].split(';')[0]}; fix: restore the original file, or run "
        "`registry sums` if the change is intended"
    ]
    assert snapshot(old) == before


def test_a_dataset_registry_has_nothing_to_migrate(tmp_path):
    run("dataset", "init", tmp_path / "data")
    before = snapshot(tmp_path / "data")
    assert (
        "nothing to migrate" in run("migrate", "-C", tmp_path / "data").output and snapshot(tmp_path / "data") == before
    )
