"""The content checks seed 002's author ran by hand (issue #46), and the link's three pairs.

Each violation is built at test time into a seed-002-shaped version folder (all three row forms
and the manifests agree with the changed rows, so only the content check can see it), then
refused by ``registry dataset add`` in one line with the registry unchanged; a registered version
whose stated facts no longer hold is found by ``validate``.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rwkv.rwkv_tokenizer import TRIE_TOKENIZER

import registry.dataset.synthetic as synthetic
from registry.artifacts.synthetic import make_adapter_file, make_base_checkpoint, make_state_file
from registry.cli import main
from registry.core.hashing import hash_file
from registry.core.hashing.digest import hmac_sha256_hex, sha256_hex
from registry.dataset import checked, content
from registry.dataset.content import TokenCache, TokenStats, world_tokenizer
from registry.dataset.models import DatasetIndex
from registry.dataset.synthetic import SEED_002, BuiltVersion, build_version
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.dataset_add import add_version
from registry.ops.dataset_init import init_dataset
from registry.ops.dataset_link import link_models
from registry.ops.describe import Description, Target, describe
from registry.ops.init import init_registry
from registry.ops.sums import write_sums
from registry.ops.validate import validate

from .conftest import SMALL, snapshot
from .test_dataset import DATASET_REPO, add_args, request
from .test_ops_artifacts import train_json

pytest_plugins = ["tests.hubserver"]

V141, V21 = SEED_002
STATED = {  # the facts seed 002 states, as `dataset add` options
    "v1.41": {
        "--profile": "g1k",
        "--context": 8128,
        "--family-key": "family",
        "--flag-key": "seeded_from_test",
        "--flagged-rows": V141.flagged,
    },
    "v2.1": {"--profile": "g1k-think", "--context": 8128, "--split-rule": V21.split_rule},
}


def stated(built: BuiltVersion) -> dict:
    """The ops request's fields for STATED."""
    options = STATED[built.spec.version]
    return {
        "profile": options["--profile"],
        "context": options["--context"],
        "family_key": options.get("--family-key"),
        "split_rule": options.get("--split-rule"),
        "flag_key": options.get("--flag-key"),
        "flagged_rows": options.get("--flagged-rows"),
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, BuiltVersion]:
    tmp = tmp_path_factory.mktemp("content-sources")
    return {spec.version: build_version(tmp / spec.version, spec) for spec in SEED_002}


@pytest.fixture(scope="module")
def stated_template(built, tmp_path_factory) -> Path:
    root = init_dataset(tmp_path_factory.mktemp("stated") / "distill").root
    for version in built.values():
        add_version(root, request(version, **stated(version)))
    return root


@pytest.fixture
def registry_copy(stated_template, tmp_path) -> Path:
    return Path(shutil.copytree(stated_template, tmp_path / "distill"))


def changed(tmp_path: Path, monkeypatch, spec, change) -> BuiltVersion:
    """``spec``'s folder built with ``change(split, number, row)`` applied to every row: all forms,
    manifests and the release manifest agree with the changed rows."""
    original = synthetic.row
    monkeypatch.setattr(
        synthetic, "row", lambda spec, split, number: change(split, number, original(spec, split, number))
    )
    try:
        return build_version(tmp_path / f"changed-{spec.version}", spec)
    finally:
        monkeypatch.setattr(synthetic, "row", original)


def refused(root: Path, version: BuiltVersion, code: str, **options) -> dict:
    """`dataset add` of ``version`` as v9.9 is refused, one line a problem, naming ``code``; the registry unchanged."""
    before = snapshot(root)
    args = add_args(version, root, **{**STATED[version.spec.version], **options, "--version": "v9.9"})
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 3, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert lines and all(line.count("; fix: ") == 1 for line in lines), result.output
    document = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    found = [p for p in document["problems"] if p["code"] == code]
    assert found, document["problems"]
    assert snapshot(root) == before
    return found[0]


# -- the facts recorded --------------------------------------------------------------------------------------------


def test_the_stated_facts_are_recorded_checked_clean_and_the_flagged_rows_are_on_the_card(registry_copy, built):
    assert validate(registry_copy) == []
    versions = {
        v.version: v for v in DatasetIndex.model_validate_json((registry_copy / "index.json").read_text()).versions
    }
    assert (versions["v1.41"].stop_text, versions["v1.41"].context, versions["v1.41"].flagged_rows) == (
        "\n\nUser:",
        8128,
        V141.flagged,
    )
    assert (versions["v2.1"].family_key, versions["v2.1"].split_rule) == ("family", "sha256(family) mod 32 == 0")
    card = (registry_copy / "README.md").read_text()
    assert (
        f"- {V141.flagged} 行的 meta.seeded_from_test 为 true（注册表逐行统计）。 / {V141.flagged} row(s) "
        "have meta.seeded_from_test true" in card
    )
    manifest = json.loads((built["v2.1"].folder / "dataset" / "train" / "manifest.json").read_text())
    assert manifest["max_tokens"] > manifest["token_quantiles"]["p50"] > 0


# -- each violation, refused by `dataset add` in one line -----------------------------------------------------------


def test_a_row_without_the_stop_text_is_refused(registry_copy, tmp_path, monkeypatch):
    cut = changed(
        tmp_path,
        monkeypatch,
        V21,
        lambda split, n, row: {**row, "text": row["text"].removesuffix("User:")} if (split, n) == ("train", 4) else row,
    )
    problem = refused(registry_copy, cut, "content.no-stop")
    assert (
        problem["file"] == f"{cut.folder}/dataset/train/rows.jsonl:5"
        and "does not end with the stop text '\\n\\nUser:'" in problem["message"]
    )


def test_a_row_over_the_context_is_refused(registry_copy, built):
    manifest = json.loads((built["v1.41"].folder / "dataset" / "train" / "manifest.json").read_text())
    problem = refused(
        registry_copy, built["v1.41"], "content.over-context", **{"--context": manifest["max_tokens"] - 1}
    )
    assert (
        f"holds {manifest['max_tokens']} tokens, over the version's context of {manifest['max_tokens'] - 1}"
        in problem["message"]
    )


def test_a_segment_boundary_inside_a_token_is_refused(registry_copy, tmp_path, monkeypatch):
    def split_newlines(split, n, row):  # the first span ends between the two newlines of "\n\n", one token
        if (split, n) != ("validation", 1):
            return row
        (start, end), *rest = row["loss_spans"]
        assert row["text"][end - 2 : end] == "\n\n"
        return {**row, "loss_spans": [[start, end - 1], *rest]}

    problem = refused(
        registry_copy, changed(tmp_path, monkeypatch, V141, split_newlines), "content.segment-splits-token"
    )
    assert problem["file"].endswith("dataset/validation/rows.jsonl:2") and "falls inside a token" in problem["message"]


def test_a_family_in_both_splits_is_refused(registry_copy, tmp_path, monkeypatch):
    shared = synthetic.family(V141, "train", 0)
    cut = changed(
        tmp_path,
        monkeypatch,
        V141,
        lambda split, n, row: (
            {**row, "meta": {**row["meta"], "family": shared}} if (split, n) == ("validation", 0) else row
        ),
    )
    problem = refused(registry_copy, cut, "content.family-in-both-splits")
    assert (
        f"1 family has rows in both splits, e.g. meta.family {shared!r} (train line 1, validation line 1)"
        in problem["message"]
    )


def test_a_wrong_split_rule_is_refused(registry_copy, built):
    problem = refused(
        registry_copy, built["v2.1"], "content.split-rule", **{"--split-rule": "sha256(family) mod 32 == 1"}
    )
    assert "by the split rule sha256(family) mod 32 == 1 the row belongs to" in problem["message"]


def test_a_flagged_count_that_disagrees_is_refused(registry_copy, built):
    problem = refused(registry_copy, built["v1.41"], "content.flag-count", **{"--flagged-rows": V141.flagged + 1})
    assert (
        problem["message"]
        == f"{V141.flagged} row(s) have meta.seeded_from_test true but the version states {V141.flagged + 1}"
    )


def test_a_manifest_whose_token_quantile_is_not_the_rows_is_refused(registry_copy, tmp_path, built):
    folder = Path(shutil.copytree(built["v2.1"].folder, tmp_path / "v2.1"))
    manifest = folder / "dataset" / "validation" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["token_quantiles"]["p90"] += 1
    manifest.write_text(json.dumps(data))
    problem = refused(
        registry_copy,
        BuiltVersion(folder, V21, built["v2.1"].trained_path, built["v2.1"].trained_sha256),
        "content.manifest-tokens",
    )
    assert (
        f"says token_quantiles.p90 {data['token_quantiles']['p90']} but the rows tokenize "
        f"to {data['token_quantiles']['p90'] - 1}" in problem["message"]
    )


def test_a_profile_that_contradicts_the_thinking_mode_is_refused(registry_copy, built):
    assert (
        "profile g1k-think is thinking=full, not off"
        in CliRunner()
        .invoke(
            main,
            add_args(
                built["v1.41"], registry_copy, **{**STATED["v1.41"], "--profile": "g1k-think", "--version": "v9.9"}
            ),
        )
        .output
    )


# -- validate: a stated fact changed after the version was added ---------------------------------------------------


def restate(root: Path, version: str, **facts) -> None:
    path = root / "index.json"
    data = json.loads(path.read_text())
    next(v for v in data["versions"] if v["version"] == version).update(facts)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2))
    write_sums(root)


def test_validate_finds_a_fact_the_rows_do_not_hold(registry_copy):
    restate(registry_copy, "v1.41", context=100)
    problems = validate(registry_copy)
    over = [p for p in problems if p.code == "content.over-context"]
    assert over and {p.code for p in problems} == {
        "content.over-context"
    }  # the rows beyond those listed ride on the last line (#38 item 5)
    assert any(p.message.endswith("more row(s) over the context in this file after it)") for p in over)


# -- the token cache: a speed-up that cannot change a verdict --------------------------------------------------------


def count_calls(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = content.WorldTokenizer.count
    monkeypatch.setattr(
        content.WorldTokenizer, "count", lambda self, text, pieces: calls.append(1) or real(self, text, pieces)
    )
    return calls


def test_unchanged_rows_files_are_not_tokenized_again(registry_copy, monkeypatch):
    calls = count_calls(monkeypatch)
    (registry_copy / ".registry" / "dataset-checked.json").unlink(missing_ok=True)
    assert validate(registry_copy) == [] and calls == []  # add tokenized them; the cache has them
    (registry_copy / ".registry" / "dataset-tokens.json").unlink(missing_ok=True)
    (registry_copy / ".registry" / "dataset-checked.json").unlink(missing_ok=True)
    assert validate(registry_copy) == [] and len(calls) == sum(s.train_rows + s.validation_rows for s in SEED_002)


def test_a_forged_cache_entry_never_makes_a_check_pass(registry_copy):
    restate(registry_copy, "v1.41", context=100)
    index = DatasetIndex.model_validate_json((registry_copy / "index.json").read_text())
    v141 = index.version("v1.41")
    assert v141 is not None
    sums = dict(line.split("  ")[::-1] for line in (registry_copy / "SHA256SUMS").read_text().splitlines())
    forged = TokenStats(histogram={50: V141.train_rows}).to_json()
    entries = {}
    for key in (b"\0" * 32, bytes(range(32))):  # another installation's key, a guessed one
        facts = TokenCache.facts(sums["v1.41/dataset/train/rows.jsonl"], v141.vocabulary, 100)
        canonical = json.dumps(facts, sort_keys=True, separators=(",", ":")).encode()
        entries[sha256_hex(canonical)] = {
            "stats": forged,
            "mac": hmac_sha256_hex(
                key, canonical + b"\n" + json.dumps(forged, sort_keys=True, separators=(",", ":")).encode()
            ),
        }
    (registry_copy / ".registry" / "dataset-tokens.json").write_text(json.dumps(entries))
    # the clean-check record as anyone could compute it from public bytes (before #46: a sha256 of these)
    state = {
        "rules": checked.RULES_VERSION,
        "version": v141.model_dump(mode="json"),
        "files": {k.removeprefix("v1.41/"): v for k, v in sorted(sums.items()) if k.startswith("v1.41/")},
    }
    (registry_copy / ".registry" / "dataset-checked.json").write_text(
        json.dumps({"v1.41": sha256_hex(json.dumps(state, sort_keys=True, ensure_ascii=False).encode())})
    )
    assert any(
        p.code == "content.over-context" and p.file.startswith("v1.41/dataset/train/rows.jsonl:")
        for p in validate(registry_copy)
    )


def test_without_the_rwkv_package_the_token_checks_say_so_and_do_not_pass(registry_copy, monkeypatch):
    world_tokenizer.cache_clear()
    monkeypatch.setitem(sys.modules, "rwkv", None)  # `import rwkv` raises ImportError, as on a light install
    try:
        (registry_copy / ".registry" / "dataset-tokens.json").unlink(missing_ok=True)
        (registry_copy / ".registry" / "dataset-checked.json").unlink(missing_ok=True)
        problems = [p for p in validate(registry_copy) if p.code == "content.no-tokenizer"]
        assert [p.file for p in problems] == ["v1.41", "v2.1"]
        assert "they were not run" in problems[0].message and "pip install 'rwkv-registry[torch]'" in problems[0].fix
    finally:
        world_tokenizer.cache_clear()


# -- the segment check is what tokenizing segment by segment says ---------------------------------------------------


def test_the_boundary_check_agrees_with_tokenizing_each_segment(built):
    tokenizer = world_tokenizer("rwkv_vocab_v20230424.txt")
    assert not isinstance(tokenizer, content.Problem)
    trie = TRIE_TOKENIZER(str(Path(sys.modules["rwkv.rwkv_tokenizer"].__file__).parent / "rwkv_vocab_v20230424.txt"))
    rng = random.Random(46)
    texts = [synthetic.row(spec, "train", n)["text"] for spec in SEED_002 for n in range(6)]
    disagreements = split_seen = 0
    for text in texts * 8:
        cuts = sorted(rng.sample(range(1, len(text)), 3))
        pieces = [(b - a, False) for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        tokens, bad = tokenizer.count(text, pieces)
        whole = trie.encode(text)
        one_by_one = [t for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True) for t in trie.encode(text[a:b])]
        split_seen += bad is not None
        disagreements += (bad is None) != (one_by_one == whole) or tokens != len(whole)
    assert disagreements == 0 and split_seen > 0


# -- the link: vocabulary, thinking mode, stop text, both ways --------------------------------------------------------


@pytest.fixture
def linked(registry_copy, built, tmp_path) -> tuple[Path, Path, str]:
    """A model registry (seed 001's shape) whose State (g1k) was trained on v1.41 and MiSS (g1k-think) on v2.1."""
    root = init_registry(tmp_path / "weights").root

    base = make_base_checkpoint(tmp_path / "rwkv7-tiny-g1k-20260930.pth", SMALL)
    add_base(root, BaseRequest(path=base, filename=base.name, vocab="rwkv_vocab_v20230424.txt"))
    name = base.name[:-4]
    state = add_weight(
        root,
        AddRequest(
            make_state_file(tmp_path / "s.pth", SMALL, seed=3),
            name,
            "state",
            "v1.41",
            train_json(tmp_path / "ts.json", built["v1.41"].trained_sha256),
            dataset_repo=DATASET_REPO,
        ),
    )
    (tmp_path / "r16").mkdir()
    adapter = make_adapter_file(tmp_path / "r16" / "adapter-final.pth", SMALL, hash_file(base), rank=4, seed=4)
    miss = add_weight(
        root,
        AddRequest(
            adapter,
            name,
            "miss",
            "v2.1",
            train_json(tmp_path / "tm.json", built["v2.1"].trained_sha256),
            run="r16",
            dataset_repo=DATASET_REPO,
        ),
    )
    describe(root, Target(path=state.path), Description(profile="g1k", stop_texts=("\n\nUser:",)))
    describe(root, Target(path=miss.path), Description(profile="g1k-think"))
    link_models(registry_copy, root)
    assert [p for p in validate(root, linked=registry_copy) if p.code.startswith("link.")] == [] and validate(
        registry_copy, linked=root
    ) == []
    return registry_copy, root, miss.path


def test_a_thinking_mode_mismatch_is_caught_both_ways_and_refused_by_link(linked):
    dataset, models, miss = linked
    describe(models, Target(path=miss), Description(profile="g1k"))  # MiSS 必须用 g1k-think
    for problems in (validate(models, linked=dataset), validate(dataset, linked=models)):
        assert [p.code for p in problems if p.code.startswith("link.")] == ["link.thinking-mismatch"]
    before = snapshot(dataset)
    result = CliRunner().invoke(main, ["dataset", "link", "-C", str(dataset), "--models", str(models)])
    assert (
        result.exit_code != 0
        and "is served with profile g1k (thinking=off), but data v2.1 was rendered with thinking=full" in result.output
    )
    assert snapshot(dataset) == before


def test_a_vocabulary_mismatch_is_caught_both_ways(linked):
    dataset, models, _ = linked
    restate(dataset, "v2.1", vocabulary="rwkv_vocab_v20990101.txt")
    problems = [p for p in validate(models, linked=dataset) if p.code.startswith("link.")]
    assert [p.code for p in problems] == ["link.vocabulary-mismatch"]
    assert (
        "uses vocabulary rwkv_vocab_v20230424.txt, but data v2.1 was checked against rwkv_vocab_v20990101.txt"
        in problems[0].message
    )
    dataset_side = {p.code for p in validate(dataset, linked=models)}
    assert {"link.vocabulary-mismatch", "content.unknown-vocabulary"} <= dataset_side


def test_a_stop_text_the_rows_do_not_end_with_is_caught_both_ways(linked):
    dataset, models, _ = linked
    state = json.loads((models / "index.json").read_text())["entries"][0]["path"]
    describe(models, Target(path=state), Description(stop_texts=("\n\nQ:",)))
    for problems in (validate(models, linked=dataset), validate(dataset, linked=models)):
        assert [p.code for p in problems if p.code.startswith("link.")] == ["link.stop-mismatch"]


def test_the_pairs_are_checked_against_a_dataset_on_the_hub(hub_server, linked):
    dataset, models, miss = linked
    assert CliRunner().invoke(main, ["publish", "--repo-id", DATASET_REPO, "-C", str(dataset)]).exit_code == 0
    revision = hub_server.head(DATASET_REPO, repo_type="dataset")
    for method in ("state", "miss"):
        describe(models, Target(method=method), Description(dataset_repo=DATASET_REPO, dataset_revision=revision))
    assert [p for p in validate(models, linked_hub=True) if p.code.startswith("link.")] == []
    describe(models, Target(path=miss), Description(profile="g1k"))
    index = json.loads((models / "index.json").read_text())
    index["bases"][0]["vocab"] = "rwkv_vocab_v20990101.txt"
    (models / "index.json").write_text(json.dumps(index, ensure_ascii=False, indent=2))
    write_sums(models)
    found = sorted(p.code for p in validate(models, linked_hub=True) if p.code.startswith("link."))
    assert found == ["link.thinking-mismatch", "link.vocabulary-mismatch", "link.vocabulary-mismatch"]
