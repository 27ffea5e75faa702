"""Dataset registries (seed 002) and their binding to the weights trained on them (seed 001).

The fixtures build, at test time, a dataset registry shaped like No-22/rwkv-agent-distill (two
versions, the three row forms, manifests, logs) and a model registry shaped like
No-22/rwkv-agent-weights whose entries cite the versions' data sha256.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from huggingface_hub import HfApi

import registry.ops.validate_dataset as validating
from registry.artifacts.synthetic import make_adapter_file, make_base_checkpoint, make_state_file
from registry.cli import main
from registry.core.hashing import hash_file
from registry.core.names import DATASET_CHECKED_NAME, PRIVATE_DIR
from registry.dataset.models import DatasetIndex, wire_hash
from registry.dataset.rows import MAX_FINDINGS, FileReport, RowError, check_spans, cut
from registry.dataset.synthetic import SEED_002, BuiltVersion, build_version
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.dataset_add import VersionRequest, add_version
from registry.ops.dataset_init import init_dataset
from registry.ops.dataset_link import link_models
from registry.ops.init import init_registry
from registry.ops.sums import write_sums
from registry.ops.validate import validate

from .conftest import SMALL, snapshot, user_environment
from .test_ops_artifacts import train_json
from .test_publish import gate_all

pytest_plugins = ["tests.hubserver"]

DATES = {"v1.41": date(2026, 10, 13), "v2.1": date(2026, 10, 18)}
TEACHERS = {"v1.41": ["DeepSeek v4 Flash"], "v2.1": ["Qwen3.7-Flash"]}
DATASET_REPO = "No-22/rwkv-agent-distill"
MODEL_REPO = "No-22/rwkv-agent-weights"


def request(built: BuiltVersion, **changes) -> VersionRequest:
    spec = built.spec
    fields = dict(
        source=built.folder,
        version=spec.version,
        date=DATES[spec.version],
        thinking=spec.thinking,
        teachers=TEACHERS[spec.version],
        trained_file=built.trained_path,
        trained_sha256=built.trained_sha256,
        train_rows=spec.train_rows,
        validation_rows=spec.validation_rows,
        wire_canonical=spec.wire_canonical,
        wire_hash=built.wire_hash,
        vocabulary="rwkv_vocab_v20230424.txt",
    )
    return VersionRequest(**{**fields, **changes})


def add_args(built: BuiltVersion, root: Path, **changes) -> list[str]:
    """`registry dataset add` for a built version (``changes``: option -> value)."""
    spec = built.spec
    options = {
        "--version": spec.version,
        "--date": DATES[spec.version].isoformat(),
        "--thinking": spec.thinking,
        "--teacher": TEACHERS[spec.version][0],
        "--trained-file": built.trained_path,
        "--trained-sha256": built.trained_sha256,
        "--train-rows": spec.train_rows,
        "--validation-rows": spec.validation_rows,
        "--wire-canonical": spec.wire_canonical,
        "--wire-hash": built.wire_hash,
        "--vocab": "rwkv_vocab_v20230424.txt",
    }
    options.update(changes)
    return ["dataset", "add", str(built.folder), "-C", str(root), *[str(x) for pair in options.items() for x in pair]]


def run(*args, code: int = 0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, BuiltVersion]:
    """Seed 002's two version folders, as the packer left them (read-only for the tests: copy to change)."""
    tmp = tmp_path_factory.mktemp("dataset-sources")
    return {spec.version: build_version(tmp / spec.version, spec) for spec in SEED_002}


@pytest.fixture(scope="module")
def dataset_template(sources, tmp_path_factory) -> Path:
    root = init_dataset(tmp_path_factory.mktemp("dataset") / "distill", title="RWKV-Agent 蒸馏训练集").root
    for built in sources.values():
        add_version(root, request(built))
    return root


@pytest.fixture
def dataset(dataset_template, tmp_path) -> Path:
    return Path(shutil.copytree(dataset_template, tmp_path / "distill"))


def copy_source(built: BuiltVersion, tmp_path: Path) -> BuiltVersion:
    folder = tmp_path / f"src-{built.spec.version}"
    shutil.copytree(built.folder, folder)
    return BuiltVersion(folder, built.spec, built.trained_path, built.trained_sha256)


def edit_line(path: Path, number: int, change) -> None:
    """Replace line ``number`` (1-based) of a jsonl file with ``change(parsed)``."""
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = json.dumps(change(json.loads(lines[number - 1])), ensure_ascii=False).encode()
    path.write_bytes(b"\n".join(lines))


@pytest.fixture(scope="module")
def models_template(sources, tmp_path_factory) -> Path:
    """Seed 001's shape: a State trained on v1.41 and a MiSS adapter trained on v2.1, citing their data sha256."""
    tmp = tmp_path_factory.mktemp("models")
    root = init_registry(tmp / "weights", title="RWKV-Agent 权重").root
    base = make_base_checkpoint(tmp / "rwkv7-tiny-g1k-20260930.pth", SMALL)
    add_base(root, BaseRequest(path=base, filename=base.name))
    name = base.name[:-4]
    state = make_state_file(tmp / "v141b-s1224.pth", SMALL, seed=3)
    add_weight(
        root,
        AddRequest(
            state,
            name,
            "state",
            "v1.41",
            train_json(tmp / "ts.json", sources["v1.41"].trained_sha256),
            recommended=True,
            dataset_repo=DATASET_REPO,
        ),
    )
    (tmp / "r16").mkdir()
    adapter = make_adapter_file(tmp / "r16" / "adapter-final.pth", SMALL, hash_file(base), rank=4, seed=4)
    add_weight(
        root,
        AddRequest(
            adapter,
            name,
            "miss",
            "v2.1",
            train_json(tmp / "tm.json", sources["v2.1"].trained_sha256),
            run="r16-lr2e-5-e2",
            recommended=True,
            dataset_repo=DATASET_REPO,
        ),
    )
    return root


@pytest.fixture
def models(models_template, tmp_path) -> Path:
    return Path(shutil.copytree(models_template, tmp_path / "weights"))


def codes(problems) -> list[str]:
    return [p.code for p in problems]


# -- the row forms, pure ------------------------------------------------------------------------------------------


def test_spans_out_of_range_overlapping_or_unsorted_are_refused():
    assert check_spans("abcdef", [[0, 2], [2, 4], [5, 6]]) == [(0, 2), (2, 4), (5, 6)]
    for spans, words in (
        ([[0, 7]], "ends past the text (6 characters)"),
        ([[3, 2]], "empty or reversed"),
        ([[-1, 2]], "empty or reversed"),
        ([[0, 3], [2, 4]], "overlaps"),
        ([[3, 4], [0, 2]], "comes before"),
        ([[0, 1.5]], "not a pair of integers"),
        ("0,1", "not a list"),
    ):
        with pytest.raises(RowError, match=re.escape(words)):
            check_spans("abcdef", spans)


def test_a_row_cut_at_its_spans_is_its_segments_and_joins_back_to_its_text():
    text = "System: x\n\nUser: q\n\nAssistant: a\n\nUser:"
    start = text.index(" a")
    pieces = cut(text, [(start, start + 2)])
    assert pieces == [(text[:start], False), (" a", True), ("\n\nUser:", False)]
    assert "".join(p for p, _ in pieces) == text
    assert cut("ab", [(0, 2)]) == [("ab", True)]


# -- adding and validating --------------------------------------------------------------------------------------


def test_two_versions_added_validate_clean_and_sha256sum_agrees(dataset, sources):
    assert validate(dataset) == []
    subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=dataset, check=True)
    index = DatasetIndex.model_validate_json((dataset / "index.json").read_text())
    assert [(v.version, v.trained_file.sha256, v.train_rows, v.wire.hash) for v in index.versions] == [
        (b.spec.version, b.trained_sha256, b.spec.train_rows, wire_hash(b.spec.wire_canonical))
        for b in sources.values()
    ]
    assert (dataset / "v1.41" / "dataset" / "train" / "segments-1-41.jsonl").read_bytes() == (
        sources["v1.41"].folder / "dataset/train/segments-1-41.jsonl"
    ).read_bytes()
    for path in (
        "v1.41/release-manifest.json",
        "v2.1/final-stats.json",
        "v2.1/pack.log",
        "v2.1/train-rows.jsonl",
        "v1.41/dataset/validation/manifest.json",
    ):
        assert (dataset / path).is_file(), path


def test_add_through_the_cli_prints_one_json_document(sources, tmp_path):
    root = tmp_path / "ds"
    assert json.loads(run("dataset", "init", root, "--json").stdout) == {
        "ok": True,
        "registry": str(root),
        "kind": "dataset",
    }
    document = json.loads(run(*add_args(sources["v2.1"], root), "--json").stdout)
    assert document["ok"] and document["version"]["trained_file"]["sha256"] == sources["v2.1"].trained_sha256
    assert json.loads(run("validate", root, "--json").stdout) == {
        "ok": True,
        "problems": [],
        "not_covered": [".gitignore"],
    }


@pytest.mark.parametrize(
    ("changes", "code", "words"),
    [
        ({"--train-rows": 35}, "version.count-mismatch", "holds 36 rows but --train-rows says 35"),
        ({"--validation-rows": 5}, "version.count-mismatch", "holds 4 rows but --validation-rows says 5"),
        (
            {"--trained-sha256": "0" * 64},
            "version.trained-sha-mismatch",
            "index.json says the trainer read 000000000000",
        ),
        ({"--thinking": "full"}, "version.thinking-mismatch", "wire canonical says thinking=off"),
        (
            {"--wire-canonical": "format=xml;thinking=off", "--wire-hash": wire_hash("format=xml;thinking=off")},
            "rows.bad-row",
            "is not the version's",
        ),
        ({"--wire-hash": "0" * 64}, "args.invalid", "is not the sha256 of the wire canonical"),
        ({"--trained-file": "dataset/train/train.jsonl"}, "version.trained-file-form", "segments*.jsonl"),
    ],
)
def test_add_refuses_what_the_files_contradict_and_changes_nothing(dataset, sources, changes, code, words):
    before = snapshot(dataset)
    result = CliRunner().invoke(main, [*add_args(sources["v1.41"], dataset, **changes), "--version", "v1.42", "--json"])
    assert result.exit_code == 3, result.output
    problems = json.loads(result.stdout)["problems"]
    assert any(p["code"] == code and words in p["message"] for p in problems), problems
    assert snapshot(dataset) == before


def test_add_refuses_an_existing_version_and_a_stray_file(dataset, sources, tmp_path):
    before = snapshot(dataset)
    assert "already in the registry" in run(*add_args(sources["v1.41"], dataset), code=3).output
    source = copy_source(sources["v1.41"], tmp_path)
    (source.folder / "dataset" / "train" / "notes.txt").write_text("x")
    assert "a split folder holds" in run(*add_args(source, dataset, **{"--version": "v1.42"}), code=3).output
    assert snapshot(dataset) == before


def test_a_loss_span_past_the_end_of_its_text_is_refused_with_file_and_line(dataset, sources, tmp_path):
    source = copy_source(sources["v2.1"], tmp_path)
    rows = source.folder / "dataset" / "train" / "rows.jsonl"
    edit_line(
        rows,
        3,
        lambda row: {**row, "loss_spans": [*row["loss_spans"][:-1], [row["loss_spans"][-1][0], len(row["text"]) + 1]]},
    )
    before = snapshot(dataset)
    output = run(*add_args(source, dataset, **{"--version": "v2.2"}), code=3).output
    assert f"{rows}:3: loss span #" in output and "ends past the text" in output
    assert snapshot(dataset) == before
    # the same row in a registered version: validate names the registry's file and line
    shutil.copyfile(rows, dataset / "v2.1" / "dataset" / "train" / "rows.jsonl")
    write_sums(dataset)
    problems = [p for p in validate(dataset) if p.code == "rows.bad-row"]
    assert [p.file for p in problems] == ["v2.1/dataset/train/rows.jsonl:3"]


def test_a_segments_file_one_character_off_rows_is_found(dataset):
    segments = dataset / "v1.41" / "dataset" / "train" / "segments.jsonl"
    edit_line(
        segments,
        5,
        lambda value: {
            "segments": [
                {**value["segments"][0], "text": "X" + value["segments"][0]["text"][1:]},
                *value["segments"][1:],
            ]
        },
    )
    write_sums(dataset)  # the checksums agree: only the row check can see it
    problems = [p for p in validate(dataset) if p.code.startswith("rows.")]
    assert [(p.code, p.file) for p in problems] == [
        ("rows.not-in-rows", "v1.41/dataset/train/segments.jsonl:5"),
        ("rows.missing-rows", "v1.41/dataset/train/segments.jsonl"),
    ]


def test_a_train_flag_off_its_span_or_a_duplicated_row_is_found(dataset):
    trained = dataset / "v2.1" / "dataset" / "train" / "segments-shuffled.jsonl"
    edit_line(trained, 2, lambda value: {"segments": [{**s, "train": not s["train"]} for s in value["segments"]]})
    texts = dataset / "v2.1" / "dataset" / "validation" / "train.jsonl"
    lines = texts.read_bytes().splitlines(keepends=True)
    texts.write_bytes(b"".join([lines[0], lines[0], *lines[2:]]))  # row 2 replaced by a copy of row 1
    write_sums(dataset)
    found = {(p.code, p.file) for p in validate(dataset) if p.code.startswith("rows.")}
    assert ("rows.not-in-rows", "v2.1/dataset/train/segments-shuffled.jsonl:2") in found
    assert ("rows.not-in-rows", "v2.1/dataset/validation/train.jsonl:2") in found


def test_a_shuffled_file_is_the_same_rows_in_any_order(dataset):
    segments = dataset / "v2.1" / "dataset" / "validation" / "segments.jsonl"
    segments.write_bytes(b"".join(reversed(segments.read_bytes().splitlines(keepends=True))))
    manifest = dataset / "v2.1" / "release-manifest.json"
    release = json.loads(manifest.read_text())
    release["files"]["dataset/validation/segments.jsonl"] = hash_file(segments)
    manifest.write_text(json.dumps(release))
    write_sums(dataset)
    assert validate(dataset) == []


def test_a_row_whose_wire_hash_is_not_its_canonicals_is_found(dataset):
    rows = dataset / "v1.41" / "dataset" / "validation" / "rows.jsonl"
    edit_line(rows, 2, lambda row: {**row, "meta": {**row["meta"], "wire_hash": "0" * 64}})
    write_sums(dataset)
    problems = [p for p in validate(dataset) if p.code == "rows.bad-row"]
    assert [p.file for p in problems] == [
        "v1.41/dataset/validation/rows.jsonl:2"
    ] and "not the sha256 of its meta.wire_canonical" in problems[0].message


def test_the_release_manifest_is_checked_against_the_files(dataset):
    log = dataset / "v2.1" / "pack.log"
    log.write_text(log.read_text() + "edited\n")
    write_sums(dataset)
    assert [(p.code, p.file) for p in validate(dataset)] == [("version.manifest-mismatch", "v2.1/pack.log")]


def test_layout_rules_of_a_dataset_registry(dataset):
    (dataset / "v3.0").mkdir()
    (dataset / "v3.0" / "rows.jsonl").write_text("")
    (dataset / "v1.41" / "dataset" / "train" / "extra.bin").write_text("")
    (dataset / "notes.txt").write_text("")
    found = {(p.code, p.file) for p in validate(dataset)}
    assert {
        ("layout.unknown-version-dir", "v3.0/rows.jsonl"),
        ("layout.stray-file", "v1.41/dataset/train/extra.bin"),
        ("layout.stray-file", "notes.txt"),
    } <= found


def test_a_changed_file_the_weights_were_trained_on_is_found(dataset, sources):
    trained = dataset / "v1.41" / "dataset" / "train" / "segments-1-41.jsonl"
    trained.write_bytes(trained.read_bytes() + trained.read_bytes().splitlines(keepends=True)[0])
    assert {"sums.mismatch", "version.trained-sha-mismatch"} <= set(codes(validate(dataset)))


# -- the card ---------------------------------------------------------------------------------------------------


def test_card_has_hub_dataset_front_matter_and_check_finds_a_stale_card(dataset):
    card = (dataset / "README.md").read_text()
    front = yaml.safe_load(card.split("---\n")[1])
    assert front["configs"][0] == {
        "config_name": "v2.1",
        "default": True,
        "data_files": [
            {"split": "train", "path": "v2.1/dataset/train/rows.jsonl"},
            {"split": "validation", "path": "v2.1/dataset/validation/rows.jsonl"},
        ],
    }
    assert (
        front["language"] == ["zh", "en"]
        and front["task_categories"] == ["text-generation"]
        and front["size_categories"] == ["n<1K"]
    )
    for expected in (
        "## 版本 · Versions",
        "| v1.41 | 2026-10-13 | 不带思考 / without thinking | 36 / 4 |",
        "## 与基模的关系 · Relation to bases",
        "## 目录 · Directory layout",
        "## 数据格式 · Row formats",
        "## 已知问题 · Known issues",
    ):
        assert expected in card, expected
    run("card", "--check", dataset)
    run(
        "dataset",
        "set",
        "summary",
        "RWKV-Agent 用来教 RWKV-7 当本地工具 Agent 的训练数据。",
        "--lang",
        "zh",
        "-C",
        dataset,
    )
    run("dataset", "set", "license", "apache-2.0", "-C", dataset)
    assert (
        "RWKV-Agent 用来教" in (dataset / "README.md").read_text()
        and "license: apache-2.0" in (dataset / "README.md").read_text()
    )
    (dataset / "README.md").write_text((dataset / "README.md").read_text().replace("## 构成", "## 组成"))
    assert "README.md is stale" in run("card", "--check", dataset, code=1).output
    assert "card.stale" in codes(validate(dataset))
    run("card", dataset)
    assert validate(dataset) == []


def test_dataset_commands_have_help():
    for name in ("init", "add", "link", "set"):
        output = run("dataset", name, "--help").output
        assert "--json" in output and "-C, --registry" in output, name


# -- both directions ----------------------------------------------------------------------------------------------


def test_link_derives_the_weights_table_and_both_validates_agree(dataset, models, sources):
    source = link_models(dataset, models)
    assert {(w.path.split("/", 1)[1], w.data_version) for w in source.weights} == {
        ("state/v1.41/v141b-s1224.pth", "v1.41"),
        ("miss/v2.1/r16-lr2e-5-e2/adapter-final.pth", "v2.1"),
    }
    card = (dataset / "README.md").read_text()
    assert (
        "| v2.1 | 2026-10-18 | 带思考 / with thinking | 48 / 6 | Qwen3.7-Flash |" in card
        and "MiSS r16-lr2e-5-e2 |" in card
        and "State v141b-s1224 |" in card
    )
    assert validate(dataset, linked=models) == []
    assert validate(models, linked=dataset) == []
    assert json.loads(run("validate", models, "--linked", dataset, "--json").stdout)["ok"]


def test_a_weight_whose_data_is_in_no_version_is_caught_both_ways(dataset, models, tmp_path):
    link_models(dataset, models)
    base = json.loads((models / "index.json").read_text())["bases"][0]["name"]
    stray = add_weight(
        models,
        AddRequest(
            make_state_file(tmp_path / "s9.pth", SMALL, seed=9),
            base,
            "state",
            "v1.42",
            train_json(tmp_path / "t9.json", "ab" * 32),
            dataset_repo=DATASET_REPO,
        ),
    )
    problems = [p for p in validate(models, linked=dataset) if p.code.startswith("link.")]
    assert [(p.code, p.file) for p in problems] == [("link.data-not-in-dataset", stray.path)]
    before = snapshot(dataset)
    assert (
        "link.data-not-in-dataset" in run("dataset", "link", "--models", models, "-C", dataset, "--json", code=3).stdout
    )
    assert snapshot(dataset) == before


def test_a_version_file_edited_after_its_weights_were_trained_is_caught(dataset, models):
    link_models(dataset, models)
    trained = dataset / "v2.1" / "dataset" / "train" / "segments-shuffled.jsonl"
    lines = trained.read_bytes().splitlines(keepends=True)
    trained.write_bytes(
        b"".join([lines[1], lines[0], *lines[2:]])
    )  # the same rows, other bytes: still not what the weights saw
    write_sums(dataset)
    problems = [p for p in validate(models, linked=dataset) if p.code.startswith("link.")]
    assert [(p.code, p.file) for p in problems] == [
        ("link.data-changed", f"{dataset}/v2.1/dataset/train/segments-shuffled.jsonl")
    ]
    assert "version.trained-sha-mismatch" in codes(validate(dataset))


def test_the_dataset_side_finds_a_weight_that_is_gone_or_unlisted(dataset, models):
    link_models(dataset, models)
    index = json.loads((models / "index.json").read_text())
    miss = next(e for e in index["entries"] if e["method"] == "miss")
    index["entries"].remove(miss)
    (models / "index.json").write_text(json.dumps(index))
    assert [
        (p.code, p.message.split(",")[0]) for p in validate(dataset, linked=models) if p.code.startswith("link.")
    ] == [("link.weight-gone", f"lists {miss['path']} as trained on v2.1")]
    index["entries"].append(miss)
    (models / "index.json").write_text(json.dumps(index))
    assert validate(dataset, linked=models) == []


def test_validate_refuses_a_linked_folder_of_the_wrong_kind(dataset, models):
    assert "is not a dataset registry" in run("validate", models, "--linked", models, code=3).output
    assert "is a dataset registry" in run("validate", dataset, "--linked", dataset, code=3).output


# -- the Hub ------------------------------------------------------------------------------------------------------


def test_publish_pull_verify_a_dataset_repo_and_link_through_the_hub(hub_server, dataset, models, tmp_path):
    published = json.loads(run("publish", "--repo-id", DATASET_REPO, "-C", dataset, "--json").stdout)
    assert published["ok"] and published["commit"]["oid"] == hub_server.head(DATASET_REPO, repo_type="dataset")
    assert hub_server.files(DATASET_REPO, repo_type="dataset") == {
        rel: data for rel, data in snapshot(dataset).items() if rel != ".gitignore"
    }  # .gitignore stays local
    assert json.loads(
        run("verify-remote", "--repo-id", DATASET_REPO, "--repo-type", "dataset", "-C", dataset, "--json").stdout
    )["ok"]
    pulled = tmp_path / "pulled"
    run("pull", "--repo-id", DATASET_REPO, "--repo-type", "dataset", pulled)
    assert (
        snapshot(pulled) == {rel: data for rel, data in snapshot(dataset).items() if rel != ".gitignore"}
        and validate(pulled) == []
    )
    # the model registry cites the dataset at the published revision; the dataset links the model repo at its commit
    revision = hub_server.head(DATASET_REPO, repo_type="dataset")
    run("describe", "--method", "state", "--dataset-repo", DATASET_REPO, "--dataset-revision", revision, "-C", models)
    run("describe", "--method", "miss", "--dataset-repo", DATASET_REPO, "--dataset-revision", revision, "-C", models)
    assert validate(models, linked_hub=True) == []
    gate_all(models)
    run("publish", "--repo-id", MODEL_REPO, "-C", models, "--allow-cpu-gate")
    source = json.loads(run("dataset", "link", "--repo-id", MODEL_REPO, "-C", dataset, "--json").stdout)["source"]
    assert source["revision"] == hub_server.head(MODEL_REPO) and len(source["weights"]) == 2
    assert validate(dataset, linked_hub=True) == []
    run("publish", "-C", dataset)  # the card now lists the weights: one more commit
    assert hub_server.files(DATASET_REPO, repo_type="dataset") == {
        rel: data for rel, data in snapshot(dataset).items() if rel != ".gitignore"
    }  # .gitignore stays local


def test_a_local_registry_and_its_published_copy_are_one_source_and_can_be_unlinked(hub_server, dataset, models):
    link_models(dataset, models)  # not published yet: no repo id
    shown = (dataset / "README.md").read_text().count("State v141b-s1224 |")
    gate_all(models)
    run("publish", "--repo-id", MODEL_REPO, "-C", models, "--allow-cpu-gate")
    run("dataset", "link", "--repo-id", MODEL_REPO, "-C", dataset)
    index = json.loads((dataset / "index.json").read_text())
    assert [s["repo_id"] for s in index["models"]] == [MODEL_REPO]  # replaced, not listed twice
    assert (dataset / "README.md").read_text().count("State v141b-s1224 |") == shown > 0
    link_models(dataset, models)  # the local copy again (it now records the repo id): still one
    assert len(json.loads((dataset / "index.json").read_text())["models"]) == 1
    before = snapshot(dataset)
    assert (
        "is not linked to this dataset"
        in run("dataset", "link", "--unlink", "--repo-id", "No-22/other", "-C", dataset, code=3).output
    )
    assert snapshot(dataset) == before
    unlinked = json.loads(run("dataset", "link", "--unlink", "--models", models, "-C", dataset, "--json").stdout)[
        "unlinked"
    ]
    assert [s["repo_id"] for s in unlinked] == [MODEL_REPO]
    assert (
        json.loads((dataset / "index.json").read_text())["models"] == []
        and "State v141b-s1224 |" not in (dataset / "README.md").read_text()
    )
    assert validate(dataset) == []


def test_a_dataset_repo_edited_on_the_hub_is_caught_from_the_model_side(hub_server, dataset, models):
    run("publish", "--repo-id", DATASET_REPO, "-C", dataset)
    trained = dataset / "v1.41" / "dataset" / "train" / "segments-1-41.jsonl"
    trained.write_bytes(trained.read_bytes() + b"\n")
    write_sums(dataset)
    run("publish", "-C", dataset, code=3)  # validate refuses: the trained file no longer has its sha256

    commit = HfApi().upload_file(
        path_or_fileobj=trained.read_bytes(),
        path_in_repo="v1.41/dataset/train/segments-1-41.jsonl",
        repo_id=DATASET_REPO,
        repo_type="dataset",
    )
    run("describe", "--method", "state", "--dataset-repo", DATASET_REPO, "--dataset-revision", commit.oid, "-C", models)
    problems = [p for p in validate(models, linked_hub=True) if p.code.startswith("link.")]
    assert [p.code for p in problems] == ["link.data-changed"] and problems[0].file.startswith(
        f"{DATASET_REPO}@{commit.oid[:12]}/v1.41/"
    )


def test_the_pre_commit_hooks_and_the_actions_commands_work_in_a_dataset_repo_unchanged(dataset):
    project = Path(__file__).resolve().parent.parent
    hooks = yaml.safe_load((project / ".pre-commit-hooks.yaml").read_text())
    action = (project / "action.yml").read_text()
    commands = [hook["entry"].split()[1:] for hook in hooks] + [
        ["validate", "-C", ".", "--json"],
        ["card", "--check", "-C", "."],
    ]
    assert 'registry validate -C "$REGISTRY" --json' in action and 'registry card --check -C "$REGISTRY"' in action

    def hook(args: list[str]) -> int:
        return subprocess.run(
            [sys.executable, "-m", "registry", *args],
            cwd=dataset,
            env={**user_environment(), "PYTHONPATH": str(project)},
            capture_output=True,
        ).returncode

    assert [hook(args) for args in commands] == [0, 0, 0, 0]
    (dataset / "README.md").write_text((dataset / "README.md").read_text() + "edited by hand\n")
    assert [hook(args) for args in commands] == [1, 1, 1, 1]


def test_commands_of_the_other_kind_say_which_registry_they_need(dataset, models):
    before = snapshot(dataset)
    assert "this is a dataset registry" in run("set", "title", "x", "-C", dataset, code=3).output
    assert (
        "a dataset's published files are not rewritten"
        in run("validate", dataset, "--allow-rewrite", "because", code=3).output
    )
    assert snapshot(dataset) == before
    assert "this is a model registry" in run("dataset", "set", "title", "x", "-C", models, code=3).output


def test_a_version_folder_missing_a_required_file_or_with_a_wrong_manifest_is_refused(dataset, sources, tmp_path):
    source = copy_source(sources["v1.41"], tmp_path)
    (source.folder / "final-stats.json").unlink()
    manifest = source.folder / "dataset" / "validation" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "rows": 5}))
    before = snapshot(dataset)
    problems = json.loads(run(*add_args(source, dataset, **{"--version": "v1.42"}), "--json", code=3).stdout)[
        "problems"
    ]
    found = {(p["code"], p["file"]) for p in problems}
    assert ("version.missing-file", f"{source.folder}/final-stats.json") in found
    assert ("version.count-mismatch", f"{source.folder}/dataset/validation/manifest.json") in found
    assert (
        "version.manifest-mismatch",
        f"{source.folder}/dataset/validation/manifest.json",
    ) in found  # the release manifest saw the old bytes
    assert snapshot(dataset) == before


def test_a_weight_citing_one_versions_data_under_another_versions_name_is_caught(dataset, models, sources, tmp_path):
    base = json.loads((models / "index.json").read_text())["bases"][0]["name"]
    wrong = add_weight(
        models,
        AddRequest(
            make_state_file(tmp_path / "s8.pth", SMALL, seed=8),
            base,
            "state",
            "v1.42",
            train_json(tmp_path / "t8.json", sources["v2.1"].trained_sha256),
        ),
    )
    problems = [(p.code, p.file) for p in validate(models, linked=dataset) if p.code.startswith("link.")]
    assert problems == [("link.version-mismatch", wrong.path)]


def test_an_unchanged_version_is_not_read_again_but_any_change_is(dataset, monkeypatch):
    assert validate(dataset) == []
    calls = []
    real = validating.version_problems
    monkeypatch.setattr(
        validating, "version_problems", lambda version, *args: calls.append(version.version) or real(version, *args)
    )
    assert validate(dataset) == [] and calls == []  # the pre-commit hook's second run: no row read
    rows = dataset / "v2.1" / "dataset" / "validation" / "rows.jsonl"
    edit_line(rows, 1, lambda row: {**row, "loss_spans": [[0, len(row["text"]) + 5]]})
    write_sums(dataset)
    assert "rows.bad-row" in codes(validate(dataset)) and calls == ["v2.1"]
    assert "rows.bad-row" in codes(validate(dataset)) and calls == ["v2.1", "v2.1"]  # a failure is not remembered


def test_a_weight_named_by_dataset_repo_and_revision_is_said_to_be_unmatchable_by_hash(dataset, models, tmp_path):
    link_models(dataset, models)
    base = json.loads((models / "index.json").read_text())["bases"][0]["name"]
    train = tmp_path / "train.json"  # seed 000's words: the data is a dataset repo at a revision, no file hash
    train.write_text(
        json.dumps(
            {
                "trainer": "RWKV-LM",
                "command": "python train.py",
                "data": {"repo": DATASET_REPO, "revision": "5d3040d21f51b3ce90b9396b058e552c47f43cd5"},
            }
        )
    )
    weight = add_weight(
        models, AddRequest(make_state_file(tmp_path / "s8.pth", SMALL, seed=8), base, "state", "v1.42", train)
    )
    assert (weight.data.sha256, weight.data.dataset_revision) == (None, "5d3040d21f51b3ce90b9396b058e552c47f43cd5")
    assert validate(models) == []
    problems = [p for p in validate(models, linked=dataset) if p.code.startswith("link.")]
    assert [(p.code, p.file) for p in problems] == [("link.no-data-sha256", weight.path)]
    assert "no file sha256, so it cannot be matched to a version" in problems[0].message


def test_a_dataset_repos_first_publish_can_be_gated_and_its_card_says_so(hub_server, dataset):
    published = json.loads(
        run("publish", "--repo-id", DATASET_REPO, "-C", dataset, "--gated", "manual", "--json").stdout
    )
    assert published["ok"] and published["access"] == "gated-manual"
    info = HfApi().dataset_info(DATASET_REPO)
    assert info.gated == "manual" and info.private is False
    card = (dataset / "README.md").read_text(encoding="utf-8")
    assert (
        "本仓库需要申请访问" in card
        and hub_server.files(DATASET_REPO, repo_type="dataset")["README.md"] == (dataset / "README.md").read_bytes()
    )
    assert json.loads((dataset / "index.json").read_text())["dataset"]["access"] == "gated-manual"
    refused = run("publish", "-C", dataset, "--private", code=3)
    assert (
        f"https://huggingface.co/datasets/{DATASET_REPO}/settings" in refused.output
        and "registry dataset set access private" in refused.output
    )


def test_a_checked_record_that_arrived_with_the_folder_skips_no_row_check(dataset, monkeypatch):
    """Issue 38: anyone can compute a version's check key, so .registry/dataset-checked.json from a
    pull request or a clone must not make a bad row pass; only this user's sealed record counts."""

    assert validate(dataset) == []
    record = dataset / PRIVATE_DIR / DATASET_CHECKED_NAME
    rows = dataset / "v2.1" / "dataset" / "validation" / "rows.jsonl"
    edit_line(rows, 1, lambda row: {**row, "loss_spans": [[0, len(row["text"]) + 5]]})
    write_sums(dataset)
    keys: dict[str, str] = {}
    real = validating.check_key
    monkeypatch.setattr(
        validating, "check_key", lambda version, files: keys.setdefault(version.version, real(version, files))
    )
    assert "rows.bad-row" in codes(validate(dataset))
    record.write_text(json.dumps(keys))  # the forged record: the keys of the files as they are now
    assert "rows.bad-row" in codes(validate(dataset))


def test_add_refuses_a_version_whose_trained_file_is_another_versions(dataset, sources, tmp_path):
    """Issue 38: one trained file is one version's; before, add took it and validate then failed."""
    before = snapshot(dataset)
    source = copy_source(sources["v1.41"], tmp_path)
    result = run(*add_args(source, dataset, **{"--version": "v1.42"}), "--json", code=3)
    problems = json.loads(result.stdout)["problems"]
    assert [(p["code"], p["file"]) for p in problems] == [
        ("dataset.duplicate-data", f"{source.folder}/{source.trained_path}")
    ]
    assert "v1.41" in problems[0]["message"] and snapshot(dataset) == before


def test_a_row_with_a_key_twice_is_refused_by_add_and_validate(dataset, sources, tmp_path):
    """Issue 38: {"text": "x", "text": "<the real text>", ...} reads as the real row to json.loads, but a
    reviewer (or another reader) may see "x": rows go through the duplicate-key reader like any JSON."""
    source = copy_source(sources["v2.1"], tmp_path)
    rows = source.folder / "dataset" / "validation" / "rows.jsonl"
    lines = rows.read_bytes().split(b"\n")
    lines[1] = b'{"text": "x", ' + lines[1].lstrip()[1:]
    rows.write_bytes(b"\n".join(lines))
    before = snapshot(dataset)
    output = run(*add_args(source, dataset, **{"--version": "v2.2"}), code=3).output
    assert f"error: {rows}:2: " in output and 'the key "text" appears twice' in output
    assert snapshot(dataset) == before
    shutil.copyfile(rows, dataset / "v2.1" / "dataset" / "validation" / "rows.jsonl")
    write_sums(dataset)
    assert any(
        p.file == "v2.1/dataset/validation/rows.jsonl:2" and "appears twice" in p.message for p in validate(dataset)
    )


def test_a_file_with_more_problems_than_are_listed_says_the_rest_on_its_last_line():
    """Issue 38 item 5: one line per problem listed, no count line of its own."""

    report = FileReport("v2.1/dataset/train/rows.jsonl")
    for line in range(1, MAX_FINDINGS + 6):
        report.add("rows.bad-row", line, "the row's loss span runs past its text", "render the row again")
    found = report.findings()
    assert [p.file for p in found] == [f"v2.1/dataset/train/rows.jsonl:{n}" for n in range(1, MAX_FINDINGS + 1)]
    assert found[-1].message.endswith(
        "(and 5 more problem(s) in this file after it: fix the ones listed, then validate again)"
    )
    assert all("more" not in p.message for p in found[:-1])
