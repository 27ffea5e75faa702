"""Issue 43 item 3: an author's evaluation.json (seed 004) is read, shown on the card and never rewritten.

The file is written at test time in seed 004's shape: each metric's value for the checkpoint and
for the checkpoint it was initialized from, its exact definition, and the counts (128 HQA
questions, 1,000 LongBench QA questions, 200 from each of five subsets).  The weights are random
RWKV-7 checkpoints built here; the repo is made by hand, as its author would, and adopted.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from registry.cli import main
from registry.core.author_evaluation import parse_author_evaluation, read_author_evaluation
from registry.core.errors import RegistryError
from registry.ops.validate import validate

from .conftest import snapshot

BASE = "rwkv7-tiny-a-20260101"  # conftest's small_base
VERSION_DIR = f"{BASE}/full/v1"
WEIGHT = f"{VERSION_DIR}/rwkv-final.pth"
EVALUATION = f"{VERSION_DIR}/evaluation.json"
SUBEM = (
    "HQA-style normalization; a nonempty prediction scores 1 if it contains a nonempty gold answer or vice "
    "versa, the maximum over references; invalid or empty answers score 0. Not an official LongBench metric."
)

# Seed 004's evaluation.json as its author would write it: indented their way, keys in their order,
# fields the registry has no word for (error events, subsets, the pipeline, the decoding).
SEED_004_EVALUATION = """{
    "model": "Xirui1208/readall-readtwice-step5-20260921",
    "initialization": {"model": "Xirui1208/readall-readtwice-step36-20260920", "step": 36},
    "decoding": {"temperature": 0, "top_p": 1, "do_sample": false},
    "benchmarks": {
        "HQA 224k": {
            "questions": 128,
            "evaluation_error_events": 0,
            "pipeline": "paged ReadTwice, 5,000-token chunks, 24 sections per page, seed 801",
            "metrics": {
                "EM": {"initialization": 57.81, "value": 57.81, "unit": "%", "definition": "exact match after HQA normalization"},
                "F1": {"initialization": 72.15, "value": 73.19, "unit": "%", "definition": "token F1 after HQA normalization"},
                "bidirectional SubEM": {"initialization": "74.22%", "value": "75.78%"}
            }
        },
        "LongBench QA": {
            "questions": 1000,
            "subsets": {"NarrativeQA": 200, "Qasper": 200, "HotpotQA": 200, "2WikiMQA": 200, "MuSiQue": 200},
            "output_cap_hits": 1,
            "api_failures": 0,
            "metrics": [
                {"name": "EM", "initialization": 32.20, "value": 32.90, "unit": "%"},
                {"name": "F1", "initialization": 44.27, "value": 44.75, "unit": "%"},
                {"name": "custom bidirectional SubEM", "initialization": 42.40, "value": 42.70, "unit": "%", "count": 1000}
            ]
        }
    },
    "definitions": {"custom bidirectional SubEM": "%s"},
    "caveat": "fixed development-set results; the gains are small"
}
""".replace("%s", SUBEM)


def run(*args, code: int | None = None):
    result = CliRunner().invoke(main, [str(a) for a in args])
    if code is not None:
        assert result.exit_code == code, result.output
    return result


@pytest.fixture(scope="module")
def finetune(small_base, tmp_path_factory) -> Path:
    """A full fine-tune of the small base (a few values changed), as its author saved it."""
    import torch

    tensors = torch.load(small_base, weights_only=True)
    tensors["emb.weight"] = tensors["emb.weight"] + 1
    path = tmp_path_factory.mktemp("finetune") / "rwkv-final.pth"
    torch.save(tensors, path)
    return path


def hand_made(folder: Path, finetune: Path, evaluation: str | bytes | None = SEED_004_EVALUATION) -> Path:
    """The repo as its author made it: the checkpoint in the layout, its train.json, their
    evaluation.json beside it, a README."""
    (folder / VERSION_DIR).mkdir(parents=True)
    shutil.copy(finetune, folder / WEIGHT)
    train = {"trainer": "RWKV-LM", "data": {"sha256": "ab" * 32}, "command": "python train.py"}
    (folder / VERSION_DIR / "train.json").write_text(json.dumps(train, indent=2))
    (folder / "README.md").write_text("# ReadAll step5 (tiny)\n\nA full fine-tune, evaluated greedily.\n")
    if evaluation is not None:
        data = evaluation.encode() if isinstance(evaluation, str) else evaluation
        (folder / EVALUATION).write_bytes(data)
    return folder


def adopted(tmp_path: Path, small_base: Path, finetune: Path) -> Path:
    folder = hand_made(tmp_path / "readall", finetune)
    run("adopt", folder, "--base-file", small_base, code=0)
    return folder


def test_seed_004_evaluation_is_read_with_definitions_counts_and_the_initialization(tmp_path):
    path = tmp_path / "evaluation.json"
    path.write_text(SEED_004_EVALUATION)
    read = read_author_evaluation(path, "evaluation.json")

    assert read.model == "Xirui1208/readall-readtwice-step5-20260921"
    assert read.initialization == "Xirui1208/readall-readtwice-step36-20260920"
    by_name = {m.full_name: m for m in read.metrics}
    assert list(by_name) == [
        "HQA 224k EM", "HQA 224k F1", "HQA 224k bidirectional SubEM",
        "LongBench QA EM", "LongBench QA F1", "LongBench QA custom bidirectional SubEM",
    ]  # fmt: skip
    f1 = by_name["HQA 224k F1"]
    assert (f1.value.number, f1.value.unit, f1.value.written) == (73.19, "%", "73.19%")
    assert (f1.initialization and f1.initialization.written, f1.change) == ("72.15%", "+1.04 pp")
    assert by_name["HQA 224k EM"].change == "+0.00 pp"  # no gain, said so
    assert by_name["HQA 224k bidirectional SubEM"].change == "+1.56 pp"  # written as "75.78%" text
    assert [read.count_of(m) for m in read.metrics] == [128, 128, 128, 1000, 1000, 1000]
    assert f1.definition == "token F1 after HQA normalization"
    assert ("LongBench QA custom bidirectional SubEM", SUBEM) in read.all_definitions
    kept = dict(read.shown_extra)  # every field the registry has no word for, as written
    assert kept["HQA 224k: evaluation_error_events"] == "0"
    assert json.loads(kept["LongBench QA: subsets"])["MuSiQue"] == 200
    assert kept["LongBench QA: output_cap_hits"] == "1" and kept["initialization.step"] == "36"
    assert json.loads(kept["decoding"]) == {"do_sample": False, "temperature": 0, "top_p": 1}
    assert kept["caveat"] == "fixed development-set results; the gains are small"


def test_flat_shapes_people_write_are_read_too():
    flat = parse_author_evaluation(
        {
            "checkpoint": "me/step5",
            "initialized_from": "me/step36",
            "results": [{"metric": "exam", "score": "41/60", "baseline": "39/60", "n": 60}],
            "metrics": {"accuracy": 0.5},
        },
        "evaluation.json",
    )
    # "metrics" is read where both are given; "results" is kept as written
    assert [(m.name, m.value.written) for m in flat.metrics] == [("accuracy", "0.5")]
    assert "results" in flat.extra and flat.model == "me/step5" and flat.initialization == "me/step36"
    listed = parse_author_evaluation(
        {"results": [{"metric": "exam", "score": "41/60", "baseline": "39/60", "n": 60}]}, "evaluation.json"
    )
    (exam,) = listed.metrics
    assert (exam.value.unit, exam.change, exam.count) == ("/60", "+2", 60)
    by_name = parse_author_evaluation(
        {"initialization": {"name": "step36", "metrics": {"EM": 57.0}}, "metrics": {"EM": 58.5}}, "evaluation.json"
    )
    assert by_name.metrics[0].initialization is not None and by_name.metrics[0].change == "+1.5"


def test_an_adopted_authors_evaluation_is_on_the_card_and_kept_byte_for_byte(tmp_path, small_base, finetune):
    folder = adopted(tmp_path, small_base, finetune)
    index = json.loads((folder / "index.json").read_text())
    assert [(e["path"], e["evaluation"]) for e in index["entries"]] == [(WEIGHT, EVALUATION)]
    assert (folder / EVALUATION).read_text() == SEED_004_EVALUATION  # adopted as written
    assert f"{EVALUATION}" in (folder / "SHA256SUMS").read_text()

    card = (folder / "README.md").read_text()
    section = card[card.index("The author's evaluation") :]
    assert f"### `{EVALUATION}`" in section and f"Weights evaluated: `{WEIGHT}`" in section
    assert "Initialized from: Xirui1208/readall-readtwice-step36-20260920" in section
    assert "Initialization (Xirui1208/readall-readtwice-step36-20260920)" in section
    assert "| HQA 224k | F1 | 72.15% | 73.19% | +1.04 pp | 128 |" in section
    assert "| LongBench QA | custom bidirectional SubEM | 42.4% | 42.7% | +0.3 pp | 1000 |" in section
    assert f"- LongBench QA custom bidirectional SubEM: {SUBEM}" in section
    assert "- HQA 224k F1: token F1 after HQA normalization" in section
    assert '- LongBench QA: subsets: {"2WikiMQA": 200, "HotpotQA": 200' in section
    assert "- HQA 224k: evaluation_error_events: 0" in section
    assert run("card", "-C", folder, "--check").exit_code == 0
    assert validate(folder) == []


def test_a_score_added_later_keeps_every_byte_of_the_authors_file(tmp_path, small_base, finetune):
    folder = adopted(tmp_path, small_base, finetune)
    authors = (folder / EVALUATION).read_bytes()
    result = run(
        "score", "-C", folder, WEIGHT, "--benchmark", "HQA 224k F1", "--value", "73.5%", "--count", "128",
        "--date", "2026-12-01", "--backend", "rwkv 0.8.30", "--notes", "re-run on our machine",
    )  # fmt: skip
    assert result.exit_code == 0, result.output

    assert (folder / EVALUATION).read_bytes() == authors  # every field as the author wrote it
    index = json.loads((folder / "index.json").read_text())
    (entry,) = index["entries"]
    assert [(s["benchmark"], s["value"]) for s in entry["scores"]] == [("HQA 224k F1", 73.5)]
    assert entry["evaluation"] == EVALUATION
    ours = json.loads((folder / "evaluation.json").read_text())  # the registry's own, at the root
    assert [(r["benchmark"], r["subject"]["name"]) for r in ours["results"]] == [("HQA 224k F1", WEIGHT)]
    card = (folder / "README.md").read_text()
    ours_section = card[card.index("### Scores") : card.index("## The author's evaluation")]
    authors_section = card[card.index("## The author's evaluation") :]
    assert "| HQA 224k | F1 | 72.15% | 73.19% | +1.04 pp | 128 |" in authors_section  # the author's, unchanged
    assert "73.5%" not in authors_section and "73.5%" in ours_section and "re-run on our machine" in ours_section
    assert run("card", "-C", folder, "--check").exit_code == 0
    assert validate(folder) == []


MALFORMED = {
    "not JSON": (b'{"metrics": {"EM": 57.81,}}', "json.malformed"),
    "an array": (b"[57.81, 57.81]", "evaluation.invalid"),
    "no metric": (b'{"model": "me/step5", "decoding": "greedy"}', "evaluation.no-metrics"),
    "a value in words": (b'{"metrics": {"EM": {"value": "high"}}}', "evaluation.bad-value"),
    "a negative count": (b'{"metrics": {"EM": {"value": 57.81, "count": -128}}}', "evaluation.bad-count"),
    "a definition that is a number": (b'{"metrics": {"EM": {"value": 1, "definition": 7}}}', "evaluation.invalid"),
    "a key twice": (b'{"metrics": {"EM": 1, "EM": 2}}', "json.duplicate-key"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_authors_evaluation_is_refused_in_one_line_leaving_the_folder_unchanged(
    case, tmp_path, small_base, finetune
):
    data, code = MALFORMED[case]
    folder = hand_made(tmp_path / "readall", finetune, data)
    before = snapshot(folder)
    result = run("adopt", folder, "--base-file", small_base, "--json", code=3)
    (problem,) = json.loads(result.stdout)["problems"]
    assert (problem["code"], problem["file"].split(":")[0]) == (code, EVALUATION), problem  # json: with line:column
    assert snapshot(folder) == before and not (folder / "index.json").exists()

    plain = run("adopt", folder, "--base-file", small_base, code=3)
    lines = plain.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {EVALUATION}") and "; fix: " in lines[0], plain.stderr
    assert snapshot(folder) == before


def test_an_evaluation_json_put_beside_a_weight_later_is_declared_by_describe(tmp_path, small_base, finetune):
    folder = hand_made(tmp_path / "readall", finetune, evaluation=None)
    run("adopt", folder, "--base-file", small_base, code=0)
    (folder / EVALUATION).write_bytes(b'{"metrics": {"EM": {"value": "1e400"}}}')  # refused: not a finite result
    assert {p.code for p in validate(folder)} >= {"layout.undeclared-evaluation"}
    before = snapshot(folder)
    refused = run("describe", "-C", folder, WEIGHT, "--author-evaluation", code=3)
    assert refused.stderr.startswith(f"error: {EVALUATION}: ") and len(refused.stderr.strip().splitlines()) == 1
    assert snapshot(folder) == before

    (folder / EVALUATION).write_text(SEED_004_EVALUATION)
    unlisted = run("describe", "-C", folder, WEIGHT, "--author-evaluation", code=3)  # a file nothing checked yet
    assert "not in SHA256SUMS; fix: run `registry sums`" in unlisted.stderr
    assert {k: v for k, v in snapshot(folder).items() if k != EVALUATION} == {
        k: v for k, v in before.items() if k != EVALUATION
    }
    run("sums", "-C", folder, code=0)
    run("describe", "-C", folder, WEIGHT, "--author-evaluation", code=0)
    assert json.loads((folder / "index.json").read_text())["entries"][0]["evaluation"] == EVALUATION
    assert "| HQA 224k | F1 | 72.15% | 73.19% | +1.04 pp | 128 |" in (folder / "README.md").read_text()
    assert (folder / EVALUATION).read_text() == SEED_004_EVALUATION
    assert validate(folder) == [] and run("card", "-C", folder, "--check").exit_code == 0

    (folder / EVALUATION).write_text(SEED_004_EVALUATION.replace("73.19", "79.19"))  # changed behind the tool
    assert "sums.mismatch" in {p.code for p in validate(folder)}
    (folder / EVALUATION).write_text(SEED_004_EVALUATION)
    run("describe", "-C", folder, WEIGHT, "--no-author-evaluation", code=0)
    assert "The author's evaluation" not in (folder / "README.md").read_text()
    assert {p.code for p in validate(folder)} == {"layout.undeclared-evaluation"}


def test_a_root_weight_keeps_the_authors_evaluation_at_the_root(tmp_path, small_base, finetune):
    """A checkpoint at the root (seed 004's place) with the author's evaluation.json at the root: the
    registry renders none of its own there, and its later results stay in index.json and on the card."""
    folder = tmp_path / "readall"
    folder.mkdir()
    shutil.copy(finetune, folder / "rwkv-final.pth")
    train = {"trainer": "RWKV-LM", "base": f"{BASE}.pth", "data": {"sha256": "ab" * 32}}
    (folder / "train.json").write_text(json.dumps(train))
    (folder / "README.md").write_text("# ReadAll step5 (tiny)\n")
    (folder / "evaluation.json").write_text(SEED_004_EVALUATION)
    report = json.loads(run("adopt", folder, "--base-file", small_base, "--json", code=0).stdout)
    assert "evaluation.json" not in report["writes"]
    assert (folder / "evaluation.json").read_text() == SEED_004_EVALUATION
    assert json.loads((folder / "index.json").read_text())["entries"][0]["evaluation"] == "evaluation.json"
    assert "| HQA 224k | F1 | 72.15% | 73.19% | +1.04 pp | 128 |" in (folder / "README.md").read_text()

    run("score", "-C", folder, "rwkv-final.pth", "--benchmark", "exam", "--value", "52.2%",
        "--date", "2026-12-01", "--backend", "rwkv 0.8.30", code=0)  # fmt: skip
    assert (folder / "evaluation.json").read_text() == SEED_004_EVALUATION
    card = (folder / "README.md").read_text()
    assert "52.2%" in card and "the root's `evaluation.json` is the author's" in card
    assert validate(folder) == [] and run("card", "-C", folder, "--check").exit_code == 0


def test_an_evaluation_json_beside_no_weight_is_refused_by_adopt(tmp_path, small_base, finetune):
    folder = hand_made(tmp_path / "readall", finetune)
    (folder / f"{BASE}/state/v1").mkdir(parents=True)
    (folder / f"{BASE}/state/v1/evaluation.json").write_text(SEED_004_EVALUATION)
    before = snapshot(folder)
    result = run("adopt", folder, "--base-file", small_base, code=3)
    assert result.stderr.startswith(f"error: {BASE}/state/v1/evaluation.json: an evaluation.json beside no weight")
    assert snapshot(folder) == before


def test_parse_refusals_name_the_json_path():
    with pytest.raises(RegistryError) as caught:
        parse_author_evaluation({"benchmarks": {"HQA": {"questions": "all", "metrics": {"EM": 1}}}}, "x.json")
    assert caught.value.problems[0].message.startswith("benchmarks.HQA.questions: ")


def test_validate_names_a_declared_evaluation_that_is_elsewhere_or_gone(tmp_path, small_base, finetune):
    folder = adopted(tmp_path, small_base, finetune)
    index_path = folder / "index.json"
    good = index_path.read_text()
    index_path.write_text(good.replace(f'"evaluation": "{EVALUATION}"', '"evaluation": "docs/evaluation.json"'))
    assert "index.bad-evaluation" in {p.code for p in validate(folder)}
    index_path.write_text(good)
    (folder / EVALUATION).unlink()
    found = {p.code: p for p in validate(folder)}
    assert found["evaluation.author-missing"].file == EVALUATION and "sums.missing-file" in found
