"""The metadata commands (set, describe, train-stage, eval-setup, score on bases and references):
what they record, what the card then shows, and the one-line refusals that leave the registry
byte-identical."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry.cli import main
from registry.core.models import Index
from registry.core.repo import render_index
from registry.ops.demo import build_agent_registry
from registry.ops.validate import validate

from .conftest import snapshot

STATE = "rwkv7-tiny-g1k-20260930-ctx4096/state/v1.41/v141b-s1224.pth"
BASE = "rwkv7-tiny-g1k-20260930-ctx4096"
NOT_UTF8 = os.fsdecode(b"caf\xe9")  # what Python hands over for command-line bytes that are not UTF-8


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return build_agent_registry(tmp_path_factory.mktemp("meta"), lambda *_: None).root


@pytest.fixture
def reg(template, tmp_path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "reg"))


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def index_of(root: Path) -> Index:
    return Index.model_validate_json((root / "index.json").read_text())


def card(root: Path) -> str:
    return (root / "README.md").read_text(encoding="utf-8")


def test_set_edits_registry_fields_and_rerenders(reg):
    assert run("set", "title", "New title", "-C", reg).exit_code == 0
    assert run("set", "license", "apache-2.0", "-C", reg).exit_code == 0
    assert run("set", "repo-id", "ns/other", "-C", reg, "--json").exit_code == 0
    assert run("set", "languages", "en", "zh", "-C", reg).exit_code == 0
    assert run("set", "intended-use", "Agents on a laptop.", "--lang", "en", "-C", reg).exit_code == 0
    info = index_of(reg).registry
    assert (info.title, info.license, info.repo_id, info.languages) == (
        "New title",
        "apache-2.0",
        "ns/other",
        ["en", "zh"],
    )
    text = card(reg)
    assert (
        "# New title" in text
        and "hf download ns/other" in text
        and "## Intended use · 用途" in text
        and "- Agents on a laptop." in text
    )
    assert run("set", "license", "-C", reg).exit_code == 0 and index_of(reg).registry.license is None  # no value: unset
    assert validate(reg) == []


def test_describe_a_base_an_entry_and_a_method(reg):
    assert run("describe", "--base", BASE, "--known-issue", "基模问题甲", "-C", reg).exit_code == 0
    assert (
        run(
            "describe", STATE, "--notes", "新说明", "--parameters", "7200000000", "--dtype", "bf16", "-C", reg
        ).exit_code
        == 0
    )
    assert run("describe", "--method", "miss", "--profile", "g1k-think2", "-C", reg).exit_code == 0
    index = index_of(reg)
    assert index.bases[0].known_issues.zh == ["基模问题甲"]
    assert all(e.serving.profile == "g1k-think2" for e in index.entries if e.method == "miss" and not e.derived_from)
    text = card(reg)
    assert "- 基模问题甲" in text and "新说明" in text and "约 17 GiB" in text and "--profile g1k-think2" in text
    # a twin stands for its source
    twin = next(e for e in index.entries if e.derived_from == STATE)
    assert run("describe", twin.path, "--notes", "经由 twin", "-C", reg).exit_code == 0
    assert index_of(reg).entry_by_path(STATE).notes.zh == ["经由 twin"]


def test_score_on_a_base_and_a_reference_replaces_the_same_result(reg):
    args = [
        "--benchmark",
        "exam",
        "--date",
        "2026-10-17",
        "--backend",
        "rwkv_lightning 1.8.2",
        "--setup",
        "exam",
        "-C",
        reg,
    ]
    assert run("score", "--base", BASE, "--reference", "MiSS v2.0 r16 lr3e-5", "--value", "47.0", *args).exit_code == 0
    base = index_of(reg).bases[0]
    (reference,) = [r for r in base.references if r.name == "MiSS v2.0 r16 lr3e-5"]
    assert [s.value for s in reference.scores] == [47.0]  # replaced, not appended
    assert "47.0%（未上传）" not in card(reg) and "MiSS v2.0 r16 lr3e-5（未上传）" in card(reg)
    results = json.loads((reg / "evaluation.json").read_text())["results"]
    compared = next(
        r
        for r in results
        if r["subject"]["name"].endswith("r16-lr2e-5-e2/adapter-final.pth") and r["benchmark"] == "exam"
    )
    assert compared["baseline"] == {"name": "MiSS v2.0 r16 lr3e-5", "value": 47.0}  # the baseline's value follows it


def test_train_stage_and_eval_setup(reg):
    assert (
        run(
            "train-stage",
            STATE,
            "warm start",
            "--gpus",
            "8",
            "--precision",
            "BF16",
            "--caveat",
            "只训了一半",
            "-C",
            reg,
        ).exit_code
        == 0
    )
    assert run("train-stage", STATE, "warm start", "--gpus", "4", "-C", reg).exit_code == 0  # replaced in place
    assert run("eval-setup", "exam", "--gpu", "RTX 4090", "--metric", "exam=答对的题占比", "-C", reg).exit_code == 0
    entry = index_of(reg).entry_by_path(STATE)
    (stage,) = entry.training
    assert (stage.gpus, stage.precision, stage.caveats.zh) == (4, "BF16", ["只训了一半"])
    text = card(reg)
    assert (
        "| GPU 数 | 4 |" in text
        and "只训了一半" in text
        and "| GPU | RTX 4090 |" in text
        and "- `exam`: 答对的题占比" in text
    )
    setup = next(s for s in json.loads((reg / "evaluation.json").read_text())["setups"] if s["name"] == "exam")
    assert setup["items"] == 568 and setup["gpu"] == "RTX 4090"  # updating keeps what was recorded before


@pytest.mark.parametrize(
    ("args", "field", "fix"),
    [
        (
            ["describe", "--method", "full", "--prompt-format", "User: hi\n\nAssistant:"],
            "--method",
            "add full weights first",
        ),
        (["describe", STATE, "--prompt-format", "User: hi\n\nBot:"], "--prompt-format", "correct --prompt-format"),
        (
            ["describe", STATE, "--prompt-format", "User: hi\n\nAssistant: "],
            "--prompt-format",
            "correct --prompt-format",
        ),
        (["describe", STATE, "--dataset-revision", "5d3040d2"], "--dataset-revision", "full commit sha"),
        (
            ["describe", STATE, "--dataset-revision", "5D3040D21F51B3CE90B9396B058E552C47F43CD5"],
            "--dataset-revision",
            "full commit sha",
        ),
        (
            [
                "score",
                STATE,
                "--benchmark",
                "exam",
                "--value",
                "1",
                "--date",
                "2026-10-17",
                "--backend",
                "b",
                "--baseline",
                "no such weights",
            ],
            "--baseline",
            "pass --baseline the base's name",
        ),
        # the base has an exam result, but not on this date with this backend: nothing comparable
        (
            [
                "score",
                STATE,
                "--benchmark",
                "exam",
                "--value",
                "1",
                "--date",
                "2026-10-18",
                "--backend",
                "b",
                "--setup",
                "exam",
                "--baseline",
                BASE,
            ],
            "--baseline",
            "same --setup, --date and --backend",
        ),
        (
            [
                "score",
                "--base",
                BASE,
                "--benchmark",
                "exam",
                "--value",
                "1",
                "--date",
                "2026-10-16",
                "--backend",
                "rwkv_lightning 1.8.1",
                "--baseline",
                BASE,
            ],
            "--baseline",
            "record the baseline's result first",
        ),
        (
            [
                "score",
                STATE,
                "--benchmark",
                "exam",
                "--value",
                "1",
                "--date",
                "2026-10-16",
                "--backend",
                "rwkv_lightning 1.8.1",
                "--setup",
                "exam",
                "--baseline",
                STATE,
            ],
            "--baseline",
            "record the baseline's result first",
        ),
        (["describe", STATE, "--stop-text", ""], "--stop-text", "correct --stop-text"),
        (
            [
                "score",
                STATE,
                "--benchmark",
                "exam",
                "--value",
                "1",
                "--date",
                "2026-10-17",
                "--backend",
                "b",
                "--setup",
                "nope",
            ],
            "--setup",
            "registry eval-setup nope",
        ),
        (["set", "languages", "zh", "fr"], "languages", "pass zh, en, or both"),
        (["set", "summary", "x", "--lang", "fr"], "--lang", "pass --lang zh or --lang en"),
        (["describe", STATE, "--notes", "x", "--lang", "de"], "--lang", "pass --lang zh or --lang en"),
        (["set", "summary", NOT_UTF8], "summary", "as UTF-8 text"),
        (["describe", STATE, "--notes", NOT_UTF8], "--notes", "as UTF-8 text"),
        (["train-stage", STATE, "s1", "--loss-masking", NOT_UTF8], "--loss-masking", "as UTF-8 text"),
        (["eval-setup", "exam", "--gpu", NOT_UTF8], "--gpu", "as UTF-8 text"),
        (
            [
                "score",
                STATE,
                "--benchmark",
                "exam",
                "--value",
                "1",
                "--date",
                "2026-10-17",
                "--backend",
                "b",
                "--notes",
                NOT_UTF8,
            ],
            "--notes",
            "as UTF-8 text",
        ),
        (["set", "repo-id", "not a repo"], "repo-id", "NAMESPACE/NAME"),
        (["set", "license", "Apache License 2.0"], "license", "SPDX-like id"),
        (["describe", "--base", BASE, "--profile", "g1k"], "--profile", "name the weights"),
        (["describe", STATE, "--adapter-id", "x"], "--adapter-id", "drop --adapter-id"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_input_is_one_line_naming_the_field_and_changes_nothing(reg, args, field, fix):
    before = snapshot(reg)
    result = run(*args, "-C", reg)
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert result.exit_code == 3, result.output
    assert (
        len(errors) == 1 and errors[0].startswith(f"error: {field}: ") and "; fix: " in errors[0] and fix in errors[0]
    ), errors
    assert not errors[0].startswith(f"error: {field}: {field}: ") and "Value error" not in errors[0], (
        errors
    )  # no pydantic noise
    assert snapshot(reg) == before
    document = json.loads(run(*args, "-C", reg, "--json").stdout)
    assert document["ok"] is False and document["problems"][0]["file"] == field
    assert snapshot(reg) == before


def test_a_hand_edited_unknown_baseline_is_a_validate_finding(reg):
    index = index_of(reg)
    index.entries[0].scores[0].baseline = "ghost"

    (reg / "index.json").write_bytes(render_index(index))
    assert "index.bad-baseline" in {f.code for f in validate(reg)}
    index.entries[0].scores[0].baseline = BASE  # exists, but has no result of that benchmark, date and backend
    (reg / "index.json").write_bytes(render_index(index))
    bad = [f for f in validate(reg) if f.code == "index.bad-baseline"]
    assert bad and "no " in bad[0].message and "same setup, date and backend" in bad[0].message
    refused = run("describe", STATE, "--notes", "x", "-C", reg)
    assert refused.exit_code == 3 and "index.json" in refused.output


def test_a_baseline_that_is_no_result_holder_is_told_the_bases_name(reg):
    score = ["--benchmark", "exam", "--value", "40", "--date", "2026-10-16", "--backend", "b 1"]
    assert run("score", "--base", BASE, *score, "-C", reg).exit_code == 0
    before = snapshot(reg)
    refused = run("score", STATE, *score, "--baseline", "base", "-C", reg, "--json")
    problem = json.loads(refused.stdout)["problems"][0]
    assert refused.exit_code == 3 and snapshot(reg) == before
    assert problem["file"] == "--baseline" and f"pass --baseline the base's name ({BASE})" in problem["fix"]
    assert run("score", STATE, *score, "--baseline", BASE, "-C", reg).exit_code == 0  # as the fix says
