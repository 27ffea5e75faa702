"""The seeds' own repos adopted as their authors wrote them (issue 37).

Every fixture is made the way the seed cards' authors made theirs: ``mkdir``/``cp`` and heredocs in
a shell, train.json in the card's own words ("训练器及版本、超参、等效命令行、数据 sha256";
"三组共用超参与各自学习率、等效命令行、起止时间"), SHA256SUMS by coreutils' ``sha256sum``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import torch
from huggingface_hub import HfApi, ModelCard, hf_hub_download
from safetensors.torch import save_file

from registry.artifacts.synthetic import TinySpec, make_base_checkpoint, make_state_file
from registry.core.layout import export_path, gguf_path
from registry.core.models import Index
from registry.index.rules import entry_problems
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.init import init_registry
from registry.ops.validate import validate

from .conftest import SMALL, sha256_of, snapshot
from .test_adopt import (
    BASE,
    DATA_MISS,
    DATA_STATE,
    MISS,
    README_001,
    RUNS,
    STATE,
    adopt_json,
    codes,
    hand_index,
    parts,
    run,
    sh,
)
from .test_publish import gate_all

__all__ = ["parts"]  # the module fixture, shared with test_adopt
pytest_plugins = ["tests.hubserver"]  # the hub_server fixture

DISTILL = "No-22/rwkv-agent-distill"


def state_train_json(data_sha: str = DATA_STATE) -> str:
    """Seed 001's state/v1.41/train.json: 训练器及版本、超参、等效命令行、数据 sha256."""
    return f"""{{
  "trainer": "rwkv_state_tune",
  "trainer_version": "v1.8.1",
  "trainer_note": "rwkv_lightning_cuda 自带，带 segments 掩码（提交 47df608）",
  "base": "BlinkDL/rwkv7-g1/{BASE}.pth",
  "data": {{"repo": "{DISTILL}", "version": "v1.41", "file": "v1.41/dataset/train/segments-1-41.jsonl", "sha256": "{data_sha}", "rows": 3662}},
  "hyperparameters": {{"ctx_len": 8192, "micro_bsz": 8, "epoch_count": 3, "lr_init": 0.01, "lr_final": 0.00167}},
  "command": "python -m rwkv_state_tune --load_model {BASE}.pth --data_file segments-1-41.jsonl --ctx_len 8192 --micro_bsz 8 --lr_init 0.01 --lr_final 0.00167",
  "step": 1224,
  "total_steps": 1374,
  "started": "2026-10-13T02:10:00+08:00",
  "finished": "2026-10-13T09:41:00+08:00"
}}
"""  # noqa: E501 seed 001's train.json as written: one line per key


def miss_train_json(data_sha: str = DATA_MISS, extra: str = "") -> str:
    """Seed 001's miss/v2.1/train.json: 三组共用超参与各自学习率、等效命令行、起止时间."""
    runs = ",\n".join(
        f'    "{run}": {{"lr_init": {lr}, "lr_final": {lr / 10}, "command": "python -m rwkv_miss_tune '
        f'--lr_init {lr} --lr_final {lr / 10} --out {run}", "started": "2026-10-16T0{i}:00:00+08:00", '
        f'"finished": "2026-10-16T0{i + 3}:00:00+08:00"}}'
        for i, (run, lr) in enumerate(zip(RUNS, (2e-5, 1e-5, 3e-5), strict=True))
    )
    return f"""{{
  "trainer": "rwkv_miss_tune",
  "trainer_version": "v1.8.1",
  "base": "{BASE}.pth",
  "data": {{"repo": "{DISTILL}", "version": "v2.1", "file": "v2.1/dataset/train/segments-shuffled.jsonl", "sha256": "{data_sha}", "rows": 5512}},
  "shared_hyperparameters": {{"r": 16, "alpha": 16, "ctx_len": 8192, "micro_bsz": 8, "epoch_count": 2}},
  "runs": {{
{runs}
  }},{extra}
  "gpus": "1x A800 80GB",
  "started": "2026-10-16T00:00:00+08:00",
  "finished": "2026-10-16T06:00:00+08:00"
}}
"""  # noqa: E501 seed 001's train.json as written: one line per key


def heredoc(path: str, text: str, folder: Path) -> None:
    """``cat > path <<'EOF'``, as the author typed it."""
    sh(f"cat > {path} <<'EOF'\n{text}EOF", folder)


def sums(folder: Path) -> None:
    sh("find * -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS", folder)


def make_seed_001_words(
    parts: Path, folder: Path, state_train: str | None = None, miss_train: str | None = None, index: dict | None = None
) -> Path:
    """Seed 001's repo with its train.json files in the card's words (not the tool's schema)."""
    folder.mkdir(parents=True)
    (folder / ".git").mkdir()
    sh(f"mkdir -p {BASE}/state/v1.41 {BASE}/miss/v2.1 && cp {parts}/v141b-s1224.pth {BASE}/state/v1.41/", folder)
    for r in RUNS:
        sh(f"mkdir -p {BASE}/miss/v2.1/{r} && cp {parts}/{r}.pth {BASE}/miss/v2.1/{r}/adapter-final.pth", folder)
    heredoc(f"{BASE}/state/v1.41/train.json", state_train if state_train is not None else state_train_json(), folder)
    heredoc(f"{BASE}/miss/v2.1/train.json", miss_train if miss_train is not None else miss_train_json(), folder)
    heredoc("index.json", json.dumps(index or hand_index(parts), indent=2, ensure_ascii=False) + "\n", folder)
    heredoc("README.md", README_001, folder)
    sums(folder)
    return folder


def refused(folder: Path, parts: Path) -> str:
    """adopt's output for a folder it must refuse, checked to leave the folder byte-identical."""
    before = snapshot(folder)
    result = run("adopt", folder, "--base-file", parts / f"{BASE}.pth", code=3)
    assert snapshot(folder) == before and not (folder / ".registry").exists()
    return result.output


# -- item 1: a person's train.json is their document -------------------------------------------------------------


def test_train_json_in_the_cards_words_is_adopted_kept_and_shown(parts, tmp_path):
    folder = make_seed_001_words(parts, tmp_path / "agent-weights")
    originals = snapshot(folder)
    adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    for rel in (f"{BASE}/state/v1.41/train.json", f"{BASE}/miss/v2.1/train.json"):
        assert (folder / rel).read_bytes() == originals[rel], rel  # byte for byte
    index = json.loads((folder / "index.json").read_text())
    data = {e["path"]: e["data"] for e in index["entries"]}
    assert data[STATE] == {"version": "v1.41", "sha256": DATA_STATE, "dataset_repo": DISTILL, "dataset_revision": None}
    assert {data[m]["sha256"] for m in MISS} == {DATA_MISS} and {data[m]["dataset_repo"] for m in MISS} == {DISTILL}
    assert codes(folder) == set()
    assert run("card", "--check", "-C", folder).exit_code == 0
    card = (folder / "README.md").read_text()
    # What the registry reads, and what it does not map, both shown: the trainer and its version,
    # the shared and per-run hyperparameters, the runs' times, the data's file and rows, the other fields.
    assert "`rwkv_miss_tune` v1.8.1" in card and "`rwkv_state_tune` v1.8.1" in card
    assert (
        "`alpha=16`" in card
        and "`lr_init=2e-05`" in card
        and "2026-10-16T00:00:00+08:00 → 2026-10-16T03:00:00+08:00" in card
    )
    assert "`v2.1/dataset/train/segments-shuffled.jsonl`" in card and "5512" in card
    assert "`gpus`: `1x A800 80GB`" in card and "`step`: `1224`" in card and "`total_steps`: `1374`" in card
    assert "python -m rwkv_miss_tune --lr_init 3e-05" in card


def test_add_takes_the_same_shapes_and_keeps_the_file_byte_for_byte(parts, tmp_path):
    root = init_registry(tmp_path / "reg").root
    add_base(root, BaseRequest(path=parts / f"{BASE}.pth", filename=f"{BASE}.pth"))
    heredoc("train.json", state_train_json(), tmp_path)
    run(
        "add",
        parts / "v141b-s1224.pth",
        "-C",
        root,
        "--base",
        BASE,
        "--method",
        "state",
        "--data-version",
        "v1.41",
        "--train-json",
        tmp_path / "train.json",
        code=0,
    )
    assert (root / BASE / "state/v1.41/train.json").read_bytes() == (tmp_path / "train.json").read_bytes()
    entry = json.loads((root / "index.json").read_text())["entries"][0]
    assert entry["data"]["sha256"] == DATA_STATE and entry["data"]["dataset_repo"] == DISTILL
    assert codes(root) == set()
    result = run(
        "add",
        parts / "v141b-s1224.pth",
        "-C",
        root,
        "--base",
        BASE,
        "--method",
        "state",
        "--data-version",
        "v1.42",
        "--train-json",
        tmp_path / "train.json",
        code=3,
    )
    assert result.output.startswith(
        f"error: {tmp_path / 'train.json'}: names data version v1.41 but sits in the folder v1.42/"
    )


def test_a_train_json_without_data_identity_is_refused_once_naming_field_and_file(parts, tmp_path):
    no_data = miss_train_json().replace(f'"sha256": "{DATA_MISS}", ', "")
    folder = make_seed_001_words(parts, tmp_path / "agent-weights", miss_train=no_data)
    out = refused(folder, parts)
    assert out == (
        f"error: {BASE}/miss/v2.1/train.json: names no training data: no data.sha256 (or data_sha256), nor a "
        "dataset repo with its revision; "
        f'fix: add "data": {{"sha256": "<sha256sum of the file the trainer read>"}} '
        f'to {BASE}/miss/v2.1/train.json, or "data": {{"repo": "<dataset repo id>", "revision": "<its '
        f'commit>"}}\n'
    )
    report = json.loads(run("adopt", folder, "--base-file", parts / f"{BASE}.pth", "--json", code=3).stdout)
    assert [p["code"] for p in report["problems"]] == ["train.no-data"]  # once, not once per weight (3 MiSS here)


def test_contradictory_facts_in_a_train_json_are_refused_naming_both_fields(parts, tmp_path):
    both = miss_train_json(extra=f'\n  "data_sha256": "{"e" * 64}",')
    folder = make_seed_001_words(parts, tmp_path / "agent-weights", miss_train=both)
    out = refused(folder, parts)
    assert (
        out.startswith(f"error: {BASE}/miss/v2.1/train.json: ")
        and "data.sha256" in out
        and "data_sha256" in out
        and out.count("\n") == 1
    )


def test_a_train_json_naming_another_base_is_refused(parts, tmp_path):
    other = state_train_json().replace(
        f"BlinkDL/rwkv7-g1/{BASE}.pth", "BlinkDL/rwkv7-g1/rwkv7-g1k-7.2b-20261031-ctx25600.pth"
    )
    folder = make_seed_001_words(parts, tmp_path / "by-name", state_train=other)
    out = refused(folder, parts)
    assert out == (
        f"error: {BASE}/state/v1.41/train.json: base names base rwkv7-g1k-7.2b-20261031-ctx25600.pth but "
        f"this folder's base is {BASE}.pth; "
        f"fix: move the weights to the folder rwkv7-g1k-7.2b-20261031-ctx25600/, or correct base\n"
    )
    by_sha = state_train_json().replace(
        f'"BlinkDL/rwkv7-g1/{BASE}.pth"', '{"repo": "BlinkDL/rwkv7-g1", "sha256": "' + "0853d4ce" * 8 + '"}'
    )
    folder = make_seed_001_words(parts, tmp_path / "by-sha", state_train=by_sha)
    out = refused(folder, parts)
    assert out.startswith(
        f"error: {BASE}/state/v1.41/train.json: base.sha256 names base sha256 0853d4ce0853… but this "
        f"folder's base {BASE} is "
    )
    right = state_train_json().replace(f'"BlinkDL/rwkv7-g1/{BASE}.pth"', '"' + sha256_of(parts / f"{BASE}.pth") + '"')
    folder = make_seed_001_words(parts, tmp_path / "right-sha", state_train=right)
    adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    assert codes(folder) == set()


def test_validate_checks_the_base_a_train_json_names(parts, tmp_path):
    folder = make_seed_001_words(parts, tmp_path / "agent-weights")
    adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    train = folder / BASE / "state/v1.41/train.json"
    train.write_text(state_train_json().replace(f"{BASE}.pth", "rwkv7-g1k-other.pth"))
    run("sums", "-C", folder, code=0)
    assert "train.base-mismatch" in codes(folder)


# -- item 7: --dry-run predicts the real run; conflicting claims are refused unless a flag says which wins ---------


def both_runs(folder: Path, parts: Path, *args) -> str:
    """The dry run and the real run refuse alike, one output, and leave the folder as it was."""
    before = snapshot(folder)
    dry = run("adopt", folder, "--base-file", parts / f"{BASE}.pth", "--dry-run", *args, code=3)
    real = run("adopt", folder, "--base-file", parts / f"{BASE}.pth", *args, code=3)
    assert dry.output == real.output
    assert snapshot(folder) == before and not (folder / ".registry").exists()
    return real.output


def test_two_recommended_files_are_refused_unless_recommended_says_which(parts, tmp_path):
    index = hand_index(parts)
    index["entries"][2]["recommended"] = True  # MISS[1] as well as MISS[0]
    folder = make_seed_001_words(parts, tmp_path / "agent-weights", index=index)
    out = both_runs(folder, parts)
    assert (
        out.startswith(f"error: index.json: marks 2 miss files of one base recommended ({MISS[1]}, {MISS[0]})")
        and out.count("\n") == 1
    )
    assert f"pass --recommended {MISS[1]} (or another)" in out
    report = adopt_json(folder, "--base-file", parts / f"{BASE}.pth", "--recommended", MISS[1])
    assert {e["path"] for e in report["entries"] if e["recommended"]} == {STATE, MISS[1]}
    assert codes(folder) == set()


def test_a_listed_file_that_is_absent_is_refused_unless_the_files_win(parts, tmp_path):
    folder = make_seed_001_words(parts, tmp_path / "agent-weights")
    sh(f"rm -r {BASE}/miss/v2.1/{RUNS[2]}", folder)
    sums(folder)
    out = both_runs(folder, parts)
    assert (
        out == f"error: index.json: $.entries[3] lists {MISS[2]}, which is not in the folder; fix: restore the file "
        "(download it again), remove the item from index.json, or pass --trust-files to adopt without it\n"
    )
    report = adopt_json(folder, "--base-file", parts / f"{BASE}.pth", "--trust-files")
    assert len(report["entries"]) == 3 and any(MISS[2] in line for line in report["overridden"])
    assert codes(folder) == set()


def _state_safetensors(folder: Path, source: Path) -> Path:
    """A .safetensors made by hand beside the State .pth, from ``source``'s tensors."""

    target = folder / (STATE.removesuffix(".pth") + ".safetensors")
    save_file(torch.load(source, weights_only=True), str(target), metadata={"format": "pt"})
    sums(folder)
    return target


def test_a_safetensors_beside_a_state_with_other_tensors_is_refused_unless_not_a_twin(parts, tmp_path):
    other = make_state_file(tmp_path / "other-state.pth", SMALL, seed=99)
    folder = make_seed_001_words(parts, tmp_path / "agent-weights")
    _state_safetensors(folder, other)
    twin = STATE.removesuffix(".pth") + ".safetensors"
    out = both_runs(folder, parts)
    assert (
        out.startswith(f"error: {twin}: beside v141b-s1224.pth with the same name but tensor ")
        and "holds other values" in out
        and f"--not-a-twin {twin}" in out
    )
    report = adopt_json(folder, "--base-file", parts / f"{BASE}.pth", "--not-a-twin", twin)
    assert twin in [e["path"] for e in report["entries"]]
    index = json.loads((folder / "index.json").read_text())
    assert next(e for e in index["entries"] if e["path"] == twin)["derived_from"] is None
    assert codes(folder) == set()


def test_a_safetensors_with_the_same_tensors_is_recorded_as_the_states_twin(parts, tmp_path):
    folder = make_seed_001_words(parts, tmp_path / "agent-weights")
    _state_safetensors(folder, parts / "v141b-s1224.pth")
    twin = STATE.removesuffix(".pth") + ".safetensors"
    adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    index = json.loads((folder / "index.json").read_text())
    assert next(e for e in index["entries"] if e["path"] == twin)["derived_from"] == STATE
    assert codes(folder) == set()


def test_a_gguf_made_by_hand_is_refused_by_the_dry_run_too(parts, tmp_path):
    folder = make_seed_001_words(parts, tmp_path / "agent-weights")
    sh(f"mkdir -p {BASE}/gguf && printf 'GGUF' > {BASE}/gguf/model-Q8_0.gguf", folder)
    sums(folder)
    out = both_runs(folder, parts)
    assert out.startswith(f"error: {BASE}/gguf/model-Q8_0.gguf: a GGUF file made by hand")


# -- item 5: next steps run exactly as printed -------------------------------------------------------------------


def test_score_takes_a_value_with_its_unit(parts, tmp_path):
    folder = make_seed_001_words(parts, tmp_path / "agent-weights")
    adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    common = ["-C", folder, "--date", "2026-10-13", "--backend", "App harness", "--runs", "3"]
    run("score", STATE, "--benchmark", "bfcl-product", "--value", "41.0/60", *common, code=0)
    run("score", STATE, "--benchmark", "workbank", "--value", "25.0%", *common, code=0)
    scores = {
        s["benchmark"]: (s["value"], s["unit"])
        for e in json.loads((folder / "index.json").read_text())["entries"]
        if e["path"] == STATE
        for s in e["scores"]
    }
    assert scores["bfcl-product"] == (41.0, "/60") and scores["workbank"] == (25.0, "%")
    assert "41.0/60" in (folder / "README.md").read_text() or "41/60" in (folder / "README.md").read_text()
    before = snapshot(folder)
    out = run("score", STATE, "--benchmark", "bash", "--value", "9.0/26", "--unit", "%", *common, code=3).output
    assert (
        out == "error: --value: '9.0/26' carries the unit /26 but --unit says %; fix: give the unit once: in "
        "--value or with --unit\n"
    )
    assert "not a number" in run("score", STATE, "--benchmark", "bash", "--value", "nine", *common, code=3).output
    assert snapshot(folder) == before


def test_next_steps_use_the_paths_given_and_the_authors_repo_id(parts, tmp_path, monkeypatch):
    index = hand_index(parts)
    index["repo"] = "No-22/rwkv-agent-weights"
    index["entries"][0]["scores"].append(
        {"benchmark": "bfcl-product", "value": "41.0/60", "date": "2026-10-13", "backend": "App harness", "runs": 3}
    )
    folder = make_seed_001_words(parts, tmp_path / "agent-weights", index=index)
    monkeypatch.chdir(tmp_path)
    sh(f"cp {parts}/{BASE}.pth .", tmp_path)
    base = Path(f"{BASE}.pth")  # relative, as the user typed it
    report = adopt_json(Path("agent-weights"), "--base-file", base)
    assert report["next_steps"] == [
        f"registry smoke -C agent-weights --base-file {shlex.quote(str(base))}",
        "registry publish -C agent-weights",
    ]
    assert not any(mark in step for step in report["next_steps"] for mark in ("<", "NAMESPACE", "SPDX-ID"))
    saved = json.loads((folder / "index.json").read_text())
    assert saved["registry"]["repo_id"] == "No-22/rwkv-agent-weights"
    bfcl = [s for e in saved["entries"] if e["path"] == STATE for s in e["scores"] if s["benchmark"] == "bfcl-product"]
    assert [(s["value"], s["unit"]) for s in bfcl] == [(41.0, "/60")]
    # the result without a backend is named with what it lacks, not turned into a command with a blank
    assert any("lacks backend" in line for line in report["unmapped"])
    assert any("license" in line for line in report["advice"])


# -- item 3: the author's front matter survives ------------------------------------------------------------------

README_000_HUB = """---
license: apache-2.0
language:
- zh
base_model:
- BlinkDL/rwkv7-g1
pipeline_tag: text-generation
library_name: rwkv
datasets:
- mikuhhn1239/novel-agent-sft-dataset
tags:
- rwkv
- novel
- chinese
---

# RWKV Novel Agent G1h (tiny)

This is an experimental Chinese novel-agent supervised fine-tune of RWKV-7. Use it for research
and evaluation rather than production.

## Prompt format

Use the fine-tuning prompt format below. Keep the single spaces after role labels.

```
System: 你是一个中文小说归因辅助助手。只能从候选角色中选择，并只输出 JSON。

User: 候选角色：甲、乙
上下文：……

Assistant:
```

Generation should stop on token 0 (EOD) or the text sequence `\\n\\nUser:`.
"""


def card_front_matter(folder: Path) -> dict:
    return ModelCard((folder / "README.md").read_text()).data.to_dict()


def make_seed_000_hub(parts: Path, folder: Path) -> Path:
    """Seed 000's README with front matter as the Hub's metadata editor writes it."""
    folder.mkdir(parents=True)
    sh(f"mkdir -p {BASE}/full/v1 && cp {parts}/rwkv-final.pth {BASE}/full/v1/", folder)
    heredoc(
        f"{BASE}/full/v1/train.json", json.dumps({"trainer": "RWKV-LM", "data": {"sha256": "ab" * 32}}) + "\n", folder
    )
    heredoc("README.md", README_000_HUB, folder)
    return folder


def test_every_front_matter_key_the_author_wrote_stays_in_the_live_metadata(parts, tmp_path):
    folder = make_seed_000_hub(parts, tmp_path / "novel-agent")
    report = adopt_json(folder, "--base-file", parts / f"{BASE}.pth", "--source", "BlinkDL/rwkv7-g1")
    meta = card_front_matter(folder)
    assert (
        meta["license"] == "apache-2.0" and meta["pipeline_tag"] == "text-generation" and meta["library_name"] == "rwkv"
    )
    assert meta["datasets"] == ["mikuhhn1239/novel-agent-sft-dataset"] and meta["base_model"] == ["BlinkDL/rwkv7-g1"]
    assert (
        meta["tags"][:3] == ["rwkv", "novel", "chinese"] and "rwkv-7" in meta["tags"]
    )  # the author's first, nothing removed
    assert meta["language"][0] == "zh" and meta["base_model_relation"] == "finetune"
    assert (
        "tags: rwkv-7" in report["front_matter"]["added"]
        and "base_model_relation: finetune" in report["front_matter"]["added"]
    )
    assert not any(line.startswith(("license", "pipeline_tag", "datasets")) for line in report["front_matter"]["added"])
    # The English card quoting a Chinese prompt stays English.
    index = json.loads((folder / "index.json").read_text())
    assert index["registry"]["languages"] == ["en"]
    assert codes(folder) == set() and run("card", "--check", "-C", folder).exit_code == 0
    # Every later render keeps them; a key a registry command sets is the registry's from then on.
    run("set", "license", "mit", "-C", folder, code=0)
    run("card", "-C", folder, code=0)
    meta = card_front_matter(folder)
    assert (
        meta["license"] == "mit"
        and meta["pipeline_tag"] == "text-generation"
        and meta["datasets"] == ["mikuhhn1239/novel-agent-sft-dataset"]
    )
    assert codes(folder) == set()


def test_a_chinese_card_stays_chinese(parts, tmp_path):
    folder = make_seed_001_words(parts, tmp_path / "agent-weights")
    adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    assert json.loads((folder / "index.json").read_text())["registry"]["languages"] == ["zh"]


def test_front_matter_the_hub_cannot_read_is_refused_and_nothing_changes(parts, tmp_path):
    folder = make_seed_000_hub(parts, tmp_path / "novel-agent")
    (folder / "README.md").write_text(README_000_HUB.replace("license: apache-2.0", "license: [apache-2.0"))
    out = refused(folder, parts)
    assert out.startswith("error: README.md: its front matter is not YAML the Hub reads") and out.count("\n") == 1


# -- item 4: nothing the author wrote becomes git-ignored ---------------------------------------------------------


def seed_001_index_in_full(parts: Path) -> dict:
    """Seed 001's index.json with everything its card states: the repo, the dataset repo, the base's
    own score, a run that was never uploaded, adapter ids and profiles, steps, rows, the update date."""
    index = hand_index(parts)
    index.update({"repo": "No-22/rwkv-agent-weights", "dataset_repo": DISTILL, "updated": "2026-10-18"})
    index["bases"][0]["scores"] = [
        {"benchmark": "exam", "value": 21.4, "date": "2026-10-16", "backend": "App harness", "runs": 2}
    ]
    index["entries"][0].update({"profile": "g1k", "sampling": "g1k-agent", "step": 1224, "total_steps": 1374})
    for item, adapter_id in zip(index["entries"][1:], ("v21-lr2e-5-e2", "v21-lr1e-5-e2", "v21-lr3e-5-e2"), strict=True):
        item.update({"adapter_id": adapter_id, "profile": "g1k-think", "sampling": "g1k-agent"})
    index["entries"].append(
        {
            "name": "MiSS v2.0 r16 lr3e-5",
            "method": "miss",
            "uploaded": False,
            "scores": [
                {
                    "benchmark": "exam",
                    "value": "46.0%",
                    "count": 261.0,
                    "date": "2026-10-17",
                    "backend": "App harness",
                    "runs": 2,
                }
            ],
        }
    )
    return index


def test_unmapped_facts_are_published_in_index_json_and_shown_on_the_card(parts, tmp_path):
    folder = make_seed_001_words(parts, tmp_path / "agent-weights", index=seed_001_index_in_full(parts))
    report = adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    index = json.loads((folder / "index.json").read_text())
    base = index["bases"][0]
    assert [(s["benchmark"], s["value"]) for s in base["scores"]] == [("exam", 21.4)]
    assert [(r["name"], r["location"], [s["value"] for s in r["scores"]]) for r in base["references"]] == [
        ("MiSS v2.0 r16 lr3e-5", None, [46.0])
    ]
    serving = {e["path"]: e["serving"] for e in index["entries"]}
    assert serving[MISS[0]] == {"profile": "g1k-think", "sampling": "g1k-agent", "adapter_id": "v21-lr2e-5-e2"}
    assert serving[STATE]["profile"] == "g1k"
    kept = index["kept_facts"]
    assert (
        kept["$.entries[0].step"] == 1224
        and kept["$.entries[0].total_steps"] == 1374
        and kept["$.updated"] == "2026-10-18"
    )
    assert (
        kept["$.entries[0].data.rows"] == 3662
        and kept["$.dataset_repo"] == DISTILL
        and kept["$.evaluations"] == "docs/evaluations/"
    )
    assert index["registry"]["repo_id"] == "No-22/rwkv-agent-weights"
    assert set(kept) <= {line.split(": ", 1)[0] for line in report["unmapped"]}  # each one reported too
    card = (folder / "README.md").read_text()
    assert "21.4" in card and "MiSS v2.0 r16 lr3e-5" in card and "46.0" in card
    assert (
        "--adapter-id v21-lr2e-5-e2" in card and "v21-r16-lr2e-5-e2" not in card
    )  # the author's id, not an invented one
    assert "`$.entries[0].total_steps`: `1374`" in card and "`$.updated`: `2026-10-18`" in card
    assert codes(folder) == set() and run("card", "--check", "-C", folder).exit_code == 0


# -- item 8: pull of a hand-made repo that keeps its text files in Git LFS ----------------------------------------


def test_pull_adopts_a_repo_whose_readme_and_index_are_lfs_files(parts, tmp_path, hub_server):
    folder = make_seed_001_words(parts, tmp_path / "made-by-hand")
    heredoc(
        ".gitattributes",
        "*.pth filter=lfs diff=lfs merge=lfs -text\n*.md filter=lfs diff=lfs merge=lfs -text\n*.json "
        "filter=lfs diff=lfs merge=lfs -text\n",
        folder,
    )
    sums(folder)
    api = HfApi()
    api.create_repo("no-22/lfs-text")
    api.upload_file(
        path_or_fileobj=str(folder / ".gitattributes"), path_in_repo=".gitattributes", repo_id="no-22/lfs-text"
    )  # the Hub reads it before the upload
    api.upload_folder(folder_path=str(folder), repo_id="no-22/lfs-text", ignore_patterns=[".git/*"])
    tree = {f.path: f for f in api.list_repo_tree("no-22/lfs-text", recursive=True) if hasattr(f, "lfs")}
    assert tree["README.md"].lfs is not None and tree["index.json"].lfs is not None  # stored in LFS on the Hub

    target = tmp_path / "pulled"
    pulled = json.loads(
        run(
            "pull", "--repo-id", "no-22/lfs-text", target, "--base-file", parts / f"{BASE}.pth", "--json", code=0
        ).stdout
    )
    assert len(pulled["adopted"]["entries"]) == 4
    assert (target / ".registry/adopted/README.md").read_bytes() == (folder / "README.md").read_bytes()
    assert (target / ".registry/adopted/index.json").read_bytes() == (folder / "index.json").read_bytes()
    assert codes(target) == set()


# -- first time, in place, nothing lost: adopt -> validate -> card --check -> publish -> pull ---------------------


def test_seed_001_in_its_authors_words_round_trips_through_the_hub(parts, tmp_path, hub_server):
    folder = make_seed_001_words(parts, tmp_path / "agent-weights", index=seed_001_index_in_full(parts))
    heredoc(
        "README.md",
        "---\nlicense: other\ntags:\n- rwkv\n- agent\npipeline_tag: text-generation\ndatasets:\n- "
        "No-22/rwkv-agent-distill\n---\n" + README_001,
        folder,
    )
    sums(folder)
    originals = snapshot(folder)
    report = adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    assert report["next_steps"][-1] == f"registry publish -C {folder}"
    assert codes(folder) == set() and run("card", "--check", "-C", folder).exit_code == 0
    for rel, data in originals.items():  # every weight, train.json and doc byte-identical
        if rel not in ("index.json", "README.md", "SHA256SUMS"):
            assert snapshot(folder)[rel] == data, rel
    gate_all(folder)
    run("publish", "-C", folder, "--allow-cpu-gate", code=0)  # the author's repo id, from index.json
    pulled = tmp_path / "pulled"
    run("pull", "--repo-id", "No-22/rwkv-agent-weights", pulled, code=0)
    assert snapshot(pulled) == {
        rel: data for rel, data in snapshot(folder).items() if not rel.startswith(".git/") and rel != ".gitignore"
    }
    meta = card_front_matter(pulled)
    assert (
        meta["license"] == "other"
        and meta["pipeline_tag"] == "text-generation"
        and meta["datasets"] == [DISTILL]
        and meta["tags"][:2] == ["rwkv", "agent"]
    )
    assert json.loads((pulled / "index.json").read_text())["kept_facts"]["$.entries[0].step"] == 1224


def test_the_dry_runs_plan_is_the_real_runs(parts, tmp_path):
    folder = make_seed_001_words(parts, tmp_path / "agent-weights", index=seed_001_index_in_full(parts))
    dry = adopt_json(folder, "--base-file", parts / f"{BASE}.pth", "--dry-run")
    assert not (folder / ".registry").exists()
    real = adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    assert (dry.pop("dry_run"), real.pop("dry_run")) == (True, False)
    assert dry == real


# -- item 2: weights stay where the author put them (seed 000: rwkv-final.pth at the root) --------------------------

NOVEL_DATA = "mikuhhn1239/novel-agent-sft-dataset"
NOVEL_REVISION = "5d3040d21f51b3ce90b9396b058e552c47f43cd5"
WORLD_BASE = "rwkv7-tiny-world-20260930"


def seed_000_train_json(base: str = BASE) -> str:
    """Seed 000's training facts in its card's words: the starting checkpoint, the stages, and the data
    "derived from <dataset repo> at revision <commit>" (no file sha256)."""
    return f"""{{
  "trainer": "RWKV-LM",
  "base": "BlinkDL/rwkv7-g1/{base}.pth",
  "data": {{"repo": "{NOVEL_DATA}", "revision": "{NOVEL_REVISION}", "conversations": 131920}},
  "hyperparameters": {{"ctx_len": 10240, "lr": 5e-7, "warmup_steps": 10, "weight_decay": 0.01, "grad_clip": 0.5}},
  "command": "python train.py --load_model {base}.pth --ctx_len 10240 --lr_init 5e-7 --lr_final 5e-7 --warmup_steps 10",
  "gpus": "6x A800 80GB, BF16, DeepSpeed ZeRO-2"
}}
"""


@pytest.fixture(scope="module")
def world_parts(tmp_path_factory) -> Path:
    """A base on the world vocabulary (the gate tokenizes real prompts) and its full fine-tune."""

    d = tmp_path_factory.mktemp("world")
    base = make_base_checkpoint(d / f"{WORLD_BASE}.pth", TinySpec(n_layer=2, n_embd=128, vocab_size=65536))
    tensors = torch.load(base, weights_only=True)
    tensors["emb.weight"] = tensors["emb.weight"] * 0.5  # fine-tuned
    torch.save(tensors, d / "rwkv-final.pth")
    return d


def make_seed_000_root(parts: Path, folder: Path, base: str = BASE) -> Path:
    """Seed 000's repo as its author made it: the raw checkpoint at the root under the name people
    download, a hand-written train.json beside it, the README with the Hub's front matter, sha256sum."""
    folder.mkdir(parents=True)
    (folder / ".git").mkdir()
    sh(f"cp {parts}/rwkv-final.pth .", folder)
    heredoc("train.json", seed_000_train_json(base), folder)
    heredoc("README.md", README_000_HUB, folder)
    sh("sha256sum rwkv-final.pth train.json README.md > SHA256SUMS", folder)
    return folder


def test_seed_000_root_weight_round_trips_in_place_through_the_hub(world_parts, tmp_path, hub_server):
    parts = world_parts
    folder = make_seed_000_root(parts, tmp_path / "novel-agent", WORLD_BASE)
    originals = snapshot(folder)
    dry = adopt_json(folder, "--base-file", parts / f"{WORLD_BASE}.pth", "--dry-run")
    assert not (folder / ".registry").exists() and snapshot(folder) == originals
    report = adopt_json(folder, "--base-file", parts / f"{WORLD_BASE}.pth")
    assert (dry.pop("dry_run"), report.pop("dry_run")) == (True, False) and dry == report  # the dry run predicted it
    entry = json.loads((folder / "index.json").read_text())["entries"][0]
    assert (entry["path"], entry["method"], entry["data"]) == (
        "rwkv-final.pth",
        "full",
        {"version": "v1", "sha256": None, "dataset_repo": NOVEL_DATA, "dataset_revision": NOVEL_REVISION},
    )
    for rel in ("rwkv-final.pth", "train.json"):  # the weight keeps its name and place; train.json its bytes
        assert snapshot(folder)[rel] == originals[rel], rel
    assert not (folder / BASE).exists()
    assert codes(folder) == set() and run("card", "--check", "-C", folder).exit_code == 0
    card = (folder / "README.md").read_text()
    assert "`/rwkv-final.pth`" in card and f"{NOVEL_DATA}@{NOVEL_REVISION[:12]}" in card and "`/train.json`" in card
    assert card_front_matter(folder)["base_model"] == ["BlinkDL/rwkv7-g1"]
    assert f"registry smoke -C {folder} --base-file {parts / f'{WORLD_BASE}.pth'}" in report["next_steps"]
    run("smoke", "rwkv-final.pth", "-C", folder, "--device", "cpu", "--base-file", parts / f"{WORLD_BASE}.pth", code=0)
    assert json.loads((folder / "index.json").read_text())["entries"][0]["gate"] is not None
    run("publish", "-C", folder, "--repo-id", "xiaol/rwkv-novel-agent-tiny", "--allow-cpu-gate", code=0)

    downloaded = hf_hub_download(
        "xiaol/rwkv-novel-agent-tiny", filename="rwkv-final.pth", cache_dir=tmp_path / "cache"
    )  # as people download it
    assert Path(downloaded).read_bytes() == originals["rwkv-final.pth"]
    pulled = tmp_path / "pulled"
    run("pull", "--repo-id", "xiaol/rwkv-novel-agent-tiny", pulled, code=0)
    assert snapshot(pulled) == {
        rel: data for rel, data in snapshot(folder).items() if not rel.startswith(".git/") and rel != ".gitignore"
    }
    assert (pulled / "rwkv-final.pth").read_bytes() == originals["rwkv-final.pth"] and codes(pulled) == set()


def test_an_undeclared_second_root_weight_is_refused(parts, tmp_path):
    folder = make_seed_000_root(parts, tmp_path / "novel-agent")
    adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    sh(f"cp {parts}/v141b-s1224.pth rwkv-extra.pth && cp train.json notes.json", folder)
    found = {(p.code, p.file) for p in validate(folder)}
    assert ("layout.stray-file", "rwkv-extra.pth") in found and ("index.unlisted-weight", "rwkv-extra.pth") in found
    assert ("layout.stray-file", "notes.json") in found  # every other root file is checked as before
    other = make_seed_000_root(parts, tmp_path / "two")
    sh(
        f"cp {parts}/v141b-s1224.pth rwkv-extra.pth && sha256sum rwkv-final.pth train.json README.md "
        "rwkv-extra.pth > SHA256SUMS",
        other,
    )
    before = snapshot(other)
    for args in ((), ("--dry-run",)):  # adopt, and its dry run alike
        result = run("adopt", other, "--base-file", parts / f"{BASE}.pth", *args, code=3)
        assert (
            result.output.startswith("error: rwkv-extra.pth: one of 2 weights at the root")
            and result.output.count("\n") == 1
        ), result.output
    assert snapshot(other) == before and not (other / ".registry").exists()


def test_a_root_entry_stays_full_and_its_exports_go_to_its_data_version_folder(parts, tmp_path):
    folder = make_seed_000_root(parts, tmp_path / "novel-agent")
    adopt_json(folder, "--base-file", parts / f"{BASE}.pth")
    assert export_path(BASE, "rwkv-final.pth", "full", "v1") == f"{BASE}/full/v1/hf"
    assert gguf_path(BASE, "rwkv-final.pth", "q8_0", "v1") == f"{BASE}/full/v1/gguf/rwkv-final-Q8_0.gguf"

    index = json.loads((folder / "index.json").read_text())
    other = {
        **index["entries"][0],
        "path": "rwkv-other.pth",
        "sha256": "cd" * 32,
        "data": {"version": "v2", "sha256": "ef" * 32},
    }
    two = Index.model_validate({**index, "entries": [*index["entries"], other]})
    assert [p.code for p in entry_problems(two)] == ["index.root-entries"]  # they would share the root's one train.json
    index["entries"][0]["method"] = "state"
    (folder / "index.json").write_text(json.dumps(index, indent=2))
    assert "index.bad-path" in codes(folder)


def test_a_root_weight_without_data_identity_or_train_json_is_refused(parts, tmp_path):
    folder = make_seed_000_root(parts, tmp_path / "no-revision")
    heredoc("train.json", seed_000_train_json().replace(f', "revision": "{NOVEL_REVISION}"', ""), folder)
    sh("sha256sum rwkv-final.pth train.json README.md > SHA256SUMS", folder)
    assert "error: train.json: names no training data" in refused(folder, parts)
    bare = tmp_path / "raw"
    bare.mkdir()
    sh(f"cp {parts}/rwkv-final.pth . && echo '# raw' > README.md", bare)
    assert refused(bare, parts).startswith(
        "error: train.json: rwkv-final.pth sits at the root with no train.json beside it"
    )


def test_a_root_entrys_exports_go_to_its_data_version_folder_and_validate(world_parts, tmp_path):
    folder = make_seed_000_root(world_parts, tmp_path / "novel-agent", WORLD_BASE)
    adopt_json(folder, "--base-file", world_parts / f"{WORLD_BASE}.pth")
    hf = json.loads(run("export-hf", "rwkv-final.pth", "-C", folder, "--json", code=0).stdout)
    assert hf["path"] == f"{WORLD_BASE}/full/v1/hf" and (folder / WORLD_BASE / "full/v1/hf/config.json").is_file()
    gguf = json.loads(run("export-gguf", "rwkv-final.pth", "--type", "q8_0", "-C", folder, "--json", code=0).stdout)
    assert f"{WORLD_BASE}/full/v1/gguf/rwkv-final-Q8_0.gguf" in json.dumps(gguf)
    assert (folder / WORLD_BASE / "full/v1/gguf/rwkv-final-Q8_0.gguf").is_file() and (
        folder / "rwkv-final.pth"
    ).is_file()
    assert codes(folder) == set() and run("card", "--check", "-C", folder).exit_code == 0
