"""Issue 43: a Transformers-format checkpoint repo (seed 004) as first-class registry content.

The repos are built at test time: an RWKV-7 one from a random x070 checkpoint mapped to fla's names
as export-hf maps it (registry.hf.mapping, registry.hf.tensors), re-sharded by hand into three
shards with a hand-written weight index, a manifest from sha256, an evaluation.json with definitions
and counts, a generation_config.json with sampling defaults and a README naming the repo training
started from; and a small llama-shaped one, which the RWKV-7 gate does not apply to.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from huggingface_hub import HfApi
from safetensors.torch import save_file

from registry.artifacts.dtypes import bit_equal
from registry.artifacts.synthetic import TinySpec, make_base_checkpoint, make_base_state_dict
from registry.cli.app import main
from registry.core.errors import Exit, RegistryError
from registry.core.models import PROFILES
from registry.core.repo import Repo
from registry.gate.checkpoint import plan_checkpoint
from registry.gate.memory import GIB
from registry.gate.prompts import profile_prompt
from registry.gate.runtime import load_tensors
from registry.hf.files import config_json, render
from registry.hf.mapping import DROPPED_SOURCES, fla_plan
from registry.hf.tensors import fla_to_x070, to_fla
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.adopt import AdoptOptions, adopt
from registry.ops.smoke import smoke
from registry.ops.validate import validate

from .conftest import snapshot
from .test_ops_artifacts import train_json
from .test_sign import write_key

INIT_REPO = "Xirui1208/readall-readtwice-step36-20260920"
WORLD = TinySpec(n_layer=2, n_embd=128, vocab_size=65536, seed=7)  # the gate's prompts need the world vocabulary
SHARDS = 3
EVALUATION = {
    "format": "readall-eval/1",
    "metrics": {
        "hqa_224k_em": {
            "definition": "exact match after HQA normalization",
            "initialization": 57.81,
            "value": 57.81,
            "count": 128,
        },
        "longbench_subem": {
            "definition": "custom bidirectional SubEM, not an official LongBench metric",
            "initialization": 42.40,
            "value": 42.70,
            "count": 1000,
        },
    },
    "errors": 0,
}
README = f"""---
base_model: {INIT_REPO}
license: apache-2.0
---
# ReadAll / ReadTwice RL step5 (initialized from step36)

This is the exact merged BF16 actor checkpoint at global step 5. It continues training from
{INIT_REPO}. See checkpoint_manifest.json for SHA-256 hashes.
"""


def _write_shards(folder: Path, tensors: dict[str, torch.Tensor], count: int) -> None:
    """``tensors`` cut by hand into ``count`` shards, with a hand-written weight index."""
    names = list(tensors)
    per = -(-len(names) // count)
    weight_map, total = {}, 0
    for i in range(count):
        shard = f"model-{i + 1:05d}-of-{count:05d}.safetensors"
        part = {n: tensors[n].contiguous() for n in names[i * per : (i + 1) * per]}
        save_file(part, folder / shard, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, shard))
        total += sum(t.numel() * t.element_size() for t in part.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def _manifest(folder: Path) -> None:
    """checkpoint_manifest.json: every file's sha256 and size, as the author made it with sha256sum."""
    files = [
        {"path": p.name, "sha256": hashlib.sha256(p.read_bytes()).hexdigest(), "size": p.stat().st_size}
        for p in sorted(folder.iterdir())
        if p.is_file()
    ]
    (folder / "checkpoint_manifest.json").write_text(
        json.dumps({"algorithm": "sha256", "files": files}, indent=2) + "\n"
    )


def _common_files(folder: Path) -> None:
    (folder / "generation_config.json").write_text(
        json.dumps(
            {"bos_token_id": 0, "eos_token_id": 0, "do_sample": True, "temperature": 0.6, "top_p": 0.95}, indent=2
        )
        + "\n"
    )
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 32768}, indent=2) + "\n")
    (folder / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "WordPiece"}}) + "\n")
    (folder / "evaluation.json").write_text(json.dumps(EVALUATION, indent=2) + "\n")
    (folder / "README.md").write_text(README)


def make_seed_004(folder: Path, spec: TinySpec = WORLD) -> Path:
    """A seed-004-shaped RWKV-7 repo: fla-named shards of a random checkpoint, at the root."""
    folder.mkdir(parents=True)
    x070 = make_base_state_dict(spec)
    plan = fla_plan({name: tuple(t.shape) for name, t in x070.items()})
    _write_shards(folder, to_fla(plan, x070), SHARDS)
    (folder / "config.json").write_bytes(render(config_json(plan.config, "BF16")))
    _common_files(folder)
    _manifest(folder)
    return folder


def make_llama(folder: Path) -> Path:
    """A tiny random llama-shaped checkpoint in two shards: another architecture."""
    folder.mkdir(parents=True)
    gen = torch.Generator().manual_seed(3)
    hidden, vocab = 64, 256
    tensors = {"model.embed_tokens.weight": torch.randn(vocab, hidden, generator=gen)}
    for i in range(2):
        for leaf, shape in (
            ("self_attn.q_proj.weight", (hidden, hidden)),
            ("self_attn.k_proj.weight", (hidden, hidden)),
            ("self_attn.v_proj.weight", (hidden, hidden)),
            ("self_attn.o_proj.weight", (hidden, hidden)),
            ("mlp.gate_proj.weight", (128, hidden)),
            ("mlp.up_proj.weight", (128, hidden)),
            ("mlp.down_proj.weight", (hidden, 128)),
            ("input_layernorm.weight", (hidden,)),
            ("post_attention_layernorm.weight", (hidden,)),
        ):
            tensors[f"model.layers.{i}.{leaf}"] = torch.randn(*shape, generator=gen).to(torch.bfloat16)
    tensors["model.norm.weight"] = torch.ones(hidden, dtype=torch.bfloat16)
    tensors["lm_head.weight"] = torch.randn(vocab, hidden, generator=gen).to(torch.bfloat16)
    _write_shards(folder, tensors, 2)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_hidden_layers": 2,
        "vocab_size": vocab,
        "torch_dtype": "bfloat16",
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    _common_files(folder)
    _manifest(folder)
    return folder


@pytest.fixture(scope="module")
def seed_004_template(tmp_path_factory) -> Path:
    return make_seed_004(tmp_path_factory.mktemp("seed004") / "readall-step5")


@pytest.fixture
def seed_004(seed_004_template, tmp_path) -> Path:
    return Path(shutil.copytree(seed_004_template, tmp_path / "readall-step5"))


@pytest.fixture(scope="module")
def gated_template(seed_004_template, tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """The seed-004 repo adopted, then gated on the CPU (once for the module); and its files before the gate."""

    folder = Path(shutil.copytree(seed_004_template, tmp_path_factory.mktemp("gated") / "readall-step5"))
    adopt_cli(folder)
    before = snapshot(folder)
    smoke(folder, [], None, "cpu")
    return folder, before


@pytest.fixture
def gated(gated_template, tmp_path) -> Path:
    return Path(shutil.copytree(gated_template[0], tmp_path / "readall-step5", symlinks=True))


def adopt_cli(folder: Path, *args: str, code: int = 0):
    result = CliRunner().invoke(main, ["adopt", str(folder), *args])
    assert result.exit_code == code, result.output
    return result


def manifest_lines(folder: Path) -> dict[str, str]:
    return {f["path"]: f["sha256"] for f in json.loads((folder / "checkpoint_manifest.json").read_text())["files"]}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- adopt, validate, card --check -------------------------------------------------------------------------------


def test_a_seed_004_repo_is_adopted_in_place_and_validates(seed_004):
    before = snapshot(seed_004)
    planned = json.loads(adopt_cli(seed_004, "--dry-run", "--json").stdout)
    assert "checkpoint_manifest.json" in planned["writes"] and snapshot(seed_004) == before
    report = json.loads(adopt_cli(seed_004, "--json").stdout)

    # every file of the author's stays byte for byte, but the README (the card keeps it whole)
    # and the files the registry renders beside it; the manifest follows what was rewritten
    after = snapshot(seed_004)
    kept = {p for p in before if p not in ("README.md", "checkpoint_manifest.json")}
    assert after["evaluation.json"] == before["evaluation.json"]  # the author's, never rewritten
    assert {p: after[p] for p in kept} == {p: before[p] for p in kept}
    assert README.split("---\n", 2)[2] in after["README.md"].decode()  # kept whole as the hand-written section
    lines = manifest_lines(seed_004)
    assert set(lines) == set(manifest_lines_of(before))
    assert all(lines[p] == sha(seed_004 / p) for p in lines)  # in step with the files, README.md included
    assert report["manifest_updated"] == ["README.md"]
    assert {p: lines[p] for p in kept & set(lines)} == {p: manifest_lines_of(before)[p] for p in kept & set(lines)}

    index = Repo(seed_004).load_index()
    assert index.entries == [] and len(index.checkpoints) == 1
    checkpoint = index.checkpoints[0]
    assert checkpoint.path == "model.safetensors.index.json" and checkpoint.model_type == "rwkv7"
    assert checkpoint.initialized_from == INIT_REPO and checkpoint.library_name == "transformers"
    assert [s.path for s in checkpoint.shards] == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    assert checkpoint.manifest == "checkpoint_manifest.json" and checkpoint.evaluation == "evaluation.json"
    assert report["checkpoints"][0]["gate"] == "applies" and report["next_steps"] == [f"registry smoke -C {seed_004}"]

    sums = (seed_004 / "SHA256SUMS").read_text()
    for name in [*lines, "checkpoint_manifest.json", "model.safetensors.index.json"]:
        assert f"  {name}\n" in sums
    assert "*.safetensors filter=lfs" in (seed_004 / ".gitattributes").read_text()
    card = (seed_004 / "README.md").read_text()
    assert "library_name: transformers" in card and INIT_REPO in card
    assert "hqa_224k_em" in card and "exact match after HQA normalization" in card  # the author's evaluation, shown
    assert validate(seed_004) == []
    assert CliRunner().invoke(main, ["card", "--check", "-C", str(seed_004)]).exit_code == 0


def manifest_lines_of(files: dict[str, bytes]) -> dict[str, str]:
    return {f["path"]: f["sha256"] for f in json.loads(files["checkpoint_manifest.json"])["files"]}


# -- bad input: refused in one line, the folder byte-identical ---------------------------------------------------


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _flip_data_byte(folder: Path) -> None:
    shard = folder / "model-00002-of-00003.safetensors"
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0xFF  # a weight's byte: the header still parses
    shard.write_bytes(bytes(data))


def _wrong_shard(folder: Path) -> None:
    def move(index):
        name = next(n for n, s in index["weight_map"].items() if s.startswith("model-00001"))
        index["weight_map"][name] = "model-00002-of-00003.safetensors"

    _edit_json(folder / "model.safetensors.index.json", move)
    _manifest(folder)


def _unlisted_tensor(folder: Path) -> None:
    _edit_json(folder / "model.safetensors.index.json", lambda index: index["weight_map"].pop("lm_head.weight"))
    _manifest(folder)


def _config_shapes(folder: Path) -> None:
    _edit_json(folder / "config.json", lambda config: config.update(intermediate_size=config["intermediate_size"] * 2))
    _manifest(folder)


def _absent_listed(folder: Path) -> None:
    _edit_json(
        folder / "checkpoint_manifest.json",
        lambda m: m["files"].append({"path": "special_tokens_map.json", "sha256": "0" * 64, "size": 2}),
    )


@pytest.mark.parametrize(
    "spoil, file, code, words",
    [
        (
            _flip_data_byte,
            "checkpoint_manifest.json",
            "checkpoint.manifest-mismatch",
            "says model-00002-of-00003.safetensors has sha256",
        ),
        (
            _wrong_shard,
            "model.safetensors.index.json",
            "checkpoint.wrong-shard",
            "to model-00002-of-00003.safetensors, but model-00001-of-00003.safetensors holds it",
        ),
        (
            _unlisted_tensor,
            "model-00003-of-00003.safetensors",
            "checkpoint.unlisted-tensor",
            "holds lm_head.weight, which model.safetensors.index.json's weight_map does not list",
        ),
        (_config_shapes, "config.json", "checkpoint.config-shapes", "but the shard holds"),
        (
            _absent_listed,
            "checkpoint_manifest.json",
            "checkpoint.manifest-missing",
            "lists special_tokens_map.json, which is not in the folder",
        ),
    ],
    ids=[
        "shard-differs-from-manifest",
        "tensor-sent-to-wrong-shard",
        "tensor-the-index-lacks",
        "config-shapes",
        "manifest-lists-absent-file",
    ],
)
def test_a_bad_checkpoint_is_refused_in_one_line_leaving_the_folder_as_it_was(seed_004, spoil, file, code, words):
    spoil(seed_004)
    before = snapshot(seed_004)
    result = CliRunner().invoke(main, ["adopt", str(seed_004)])
    assert result.exit_code == 3, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {file}: ") and "; fix: " in lines[0], result.stderr
    assert words in lines[0]
    assert snapshot(seed_004) == before and not (seed_004 / ".registry").exists()
    with pytest.raises(RegistryError) as refused:
        adopt(seed_004, AdoptOptions())
    assert [p.code for p in refused.value.problems] == [code]


def test_a_shard_changed_with_only_sha256sums_rewritten_is_found_naming_the_manifest(seed_004):
    adopt_cli(seed_004)
    _flip_data_byte(seed_004)
    CliRunner().invoke(main, ["sums", "-C", str(seed_004)])  # SHA256SUMS made to agree with the changed shard
    found = {(p.code, p.file) for p in validate(seed_004)}
    assert ("checkpoint.manifest-mismatch", "checkpoint_manifest.json") in found
    assert ("index.sha-mismatch", "model-00002-of-00003.safetensors") in found


def test_a_command_that_rewrites_the_card_updates_its_manifest_line_in_the_same_commit_and_says_so(seed_004):
    adopt_cli(seed_004)
    old = manifest_lines(seed_004)
    result = CliRunner().invoke(main, ["set", "title", "ReadAll step5", "-C", str(seed_004), "--json"])
    assert result.exit_code == 0, result.output
    new = manifest_lines(seed_004)
    assert new["README.md"] == sha(seed_004 / "README.md") != old["README.md"]
    assert {k: v for k, v in new.items() if k != "README.md"} == {k: v for k, v in old.items() if k != "README.md"}
    warnings = json.loads(result.stdout)["warnings"]
    assert any(
        w["code"] == "checkpoint.manifest-updated" and "README.md was rewritten" in w["message"] for w in warnings
    )
    assert validate(seed_004) == []


def test_a_score_on_a_root_checkpoint_goes_to_the_index_the_authors_file_untouched_and_the_card_shows_both(seed_004):
    adopt_cli(seed_004)
    authors = (seed_004 / "evaluation.json").read_bytes()
    args = ["--benchmark", "mmlu_redux", "--value", "61.25%", "--count", "1837", "--date", "2026-12-01"]
    for path in ("model.safetensors.index.json", str(seed_004)):  # by its weight index, and by its folder on disk
        result = CliRunner().invoke(
            main, ["score", path, *args, "--backend", "vllm 0.11", "-C", str(seed_004), "--json"]
        )
        assert result.exit_code == 0, result.output
    assert (seed_004 / "evaluation.json").read_bytes() == authors  # the author's file, byte for byte
    checkpoint = Repo(seed_004).load_index().checkpoints[0]
    assert [(s.benchmark, s.value, s.count) for s in checkpoint.scores] == [("mmlu_redux", 61.25, 1837)]
    assert json.loads(result.stdout)["scores"][0]["benchmark"] == "mmlu_redux"
    assert manifest_lines(seed_004)["evaluation.json"] == sha(seed_004 / "evaluation.json")
    card = (seed_004 / "README.md").read_text()
    assert "exact match after HQA normalization" in card  # the author's evaluation ...
    ours = card[card.index("### Scores") :]
    assert "mmlu_redux" in ours and "vllm 0.11" in ours and "`/model.safetensors.index.json`" in ours  # ... and ours
    assert "is the author's and does not hold them" in ours
    assert validate(seed_004) == []
    assert CliRunner().invoke(main, ["card", "--check", "-C", str(seed_004)]).exit_code == 0

    listed = CliRunner().invoke(main, ["list", "-C", str(seed_004), "--json"])
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.stdout)["checkpoints"]
    assert row["path"] == "model.safetensors.index.json" and [s["benchmark"] for s in row["scores"]] == ["mmlu_redux"]
    table = CliRunner().invoke(main, ["list", "-C", str(seed_004)]).output
    assert "checkpoints" in table and "RWKV7ForCausalLM" in table and "not run" in table


def test_describe_takes_a_checkpoint_for_its_author_evaluation_and_refuses_an_entrys_field_in_one_line(seed_004):
    adopt_cli(seed_004)
    before = snapshot(seed_004)
    refused = CliRunner().invoke(
        main, ["describe", "model.safetensors.index.json", "--notes", "x", "-C", str(seed_004)]
    )
    assert refused.exit_code != 0 and snapshot(seed_004) == before
    (line,) = refused.output.strip().splitlines()
    assert line.startswith("error: model.safetensors.index.json: --notes describe a registry entry")
    done = CliRunner().invoke(main, ["describe", str(seed_004), "--author-evaluation", "-C", str(seed_004), "--json"])
    assert done.exit_code == 0, done.output
    assert Repo(seed_004).load_index().checkpoints[0].evaluation == "evaluation.json"
    assert (seed_004 / "evaluation.json").read_bytes() == before["evaluation.json"]


# -- the gate (CPU path here; the GPU runs where CUDA is) -------------------------------------------------------


def test_an_rwkv7_checkpoint_is_gated_through_the_kernel_and_the_official_runtime_in_memory(gated_template):
    folder, before = gated_template
    receipt = json.loads(next((folder / ".registry" / "gates").glob("*.json")).read_text())
    assert receipt["passed"], [c for c in receipt["checks"] if not c["passed"]]
    assert receipt["entry"] == "model.safetensors.index.json" and receipt["environment"]["device"] == "cpu"
    assert set(receipt["files"]) == {
        "model.safetensors.index.json",
        *(f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)),
    }
    names = {c["name"] for c in receipt["checks"]}
    assert names == {"kernel-parity", "finite-weights", "model-parity", "finite-logits", "greedy-decoding"}
    # its smoke sample, in a full fine-tune's default format (g1k, token 0 and g1k's stop text)
    sample = receipt["sample"]
    assert (sample["format"], sample["format_from"]) == ("g1k", "default")
    assert sample["prompt_sha256"] == hashlib.sha256(profile_prompt("g1k").encode()).hexdigest()
    assert (sample["stop_tokens"], sample["stop_texts"]) == ([0], [PROFILES["g1k"].stop_text])
    assert 0 <= sample["tokens"] <= sample["max_new_tokens"] and receipt["timings"]["entries_sharing_setup"] == 1
    after = snapshot(folder)
    # no copy of the weights on disk: only index.json (the gate's summary), the card and SHA256SUMS changed
    assert set(after) == set(before)
    assert {p for p in after if after[p] != before[p]} <= {
        "index.json",
        "README.md",
        "SHA256SUMS",
        "evaluation.json",
        "checkpoint_manifest.json",
    }
    checkpoint = Repo(folder).load_index().checkpoints[0]
    assert checkpoint.gate is not None and checkpoint.gate.passed and checkpoint.gate.device == "cpu"
    assert checkpoint.gate.sample is not None and checkpoint.gate.sample.model_dump(mode="json") == sample
    card = (folder / "README.md").read_text()
    assert "passed (cpu" in card
    shown = card[card.index("## Transformers checkpoints") :]
    shown = shown[shown.index("### Smoke sample (not a benchmark)") :]
    row = next(line for line in shown.splitlines() if line.startswith("| `/model.safetensors.index.json`"))
    assert "g1k (default for the method)" in row and f"{sample['tokens']} / {sample['max_new_tokens']}" in row
    assert validate(folder) == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU gate needs CUDA")
def test_an_rwkv7_checkpoint_passes_the_gate_on_the_gpu(gated):

    # A process of its own, as users run it: the gated fixture's CPU gate imported the official
    # runtime without CUDA in this one (a CUDA gate then refuses, `gate.rwkv-imported`).
    command = [sys.executable, "-m", "registry", "smoke", "model.safetensors.index.json", "-C", str(gated)]
    done = subprocess.run([*command, "--device", "cuda", "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    (receipt,) = json.loads(done.stdout)
    assert receipt["passed"] and receipt["environment"]["device"] == "cuda", receipt["checks"]
    index = Repo(gated).load_index()
    plan = plan_checkpoint(("this card", torch.cuda.mem_get_info()[1]), index.checkpoints[0], index)
    assert plan is not None and 0 < receipt["timings"]["gpu_peak_bytes"] <= plan.need  # one copy, as planned


def test_a_checkpoint_the_card_cannot_hold_once_is_refused_before_anything_loads(gated):
    """The GPU plan of a checkpoint: its shards' bytes held once plus a working set; a card with less
    is refused in one line naming the checkpoint, before smoke opens a file (nothing planned on CPU)."""
    index = Repo(gated).load_index()
    checkpoint = index.checkpoints[0]
    weights = sum(shard.size for shard in checkpoint.shards)
    assert plan_checkpoint(None, checkpoint, index) is None
    plan = plan_checkpoint(("a roomy card", 2 * weights + GIB), checkpoint, index)
    assert plan is not None and plan.weights == weights and weights < plan.need <= plan.ceiling
    with pytest.raises(RegistryError) as refused:
        plan_checkpoint(("a small card (1.0 GiB)", plan.need - 1), checkpoint, index)
    problem = refused.value.problem
    assert problem.code == "gate.gpu-memory" and problem.file == checkpoint.path
    assert "a small card (1.0 GiB)" in problem.message and refused.value.exit_code == Exit.MACHINE


def test_the_gate_reads_the_shards_back_as_the_runtimes_x070_tensors_bit_for_bit(seed_004):
    """What the gate runs is the checkpoint: its fla-named shards mapped back in memory are the
    x070 checkpoint they were made from, every tensor bit-equal (layer 0's unused v0/v1/v2 aside)."""

    source = make_base_state_dict(WORLD)
    mapped = fla_to_x070(load_tensors(seed_004 / "model.safetensors.index.json"), "model.safetensors.index.json")
    assert set(mapped) == set(source) - set(DROPPED_SOURCES)
    assert all(bit_equal(mapped[name], source[name]) and mapped[name].shape == source[name].shape for name in mapped)


# -- publish, pull, verify-remote, history, immutability --------------------------------------------------------

pytest_plugins = ["tests.hubserver"]  # the hub_server fixture
REPO = "xirui/readall-step5"


def cli(*args, code: int = 0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result


def test_publish_sends_the_shards_through_xet_and_pull_brings_the_repo_back_byte_identical(hub_server, gated, tmp_path):
    # the gate ran on CPU: publish wants --allow-cpu-gate, as for every weight
    refused = cli("publish", "--repo-id", REPO, "-C", gated, code=3)
    assert "gate.cpu-only" in refused.output or "ran on CPU" in refused.output
    cli("publish", "--repo-id", REPO, "-C", gated, "--allow-cpu-gate")
    assert hub_server.xet_uploaded_files == 3  # the three shards as LFS/Xet files; the JSON files inline
    local = {p: d for p, d in snapshot(gated).items() if p != ".gitignore"}
    assert hub_server.files(REPO) == local

    pulled = tmp_path / "pulled"
    cli("pull", "--repo-id", REPO, pulled)
    assert {p: d for p, d in snapshot(pulled).items() if p != ".gitignore"} == local
    assert validate(pulled) == []
    report = json.loads(cli("verify-remote", "--repo-id", REPO, "-C", gated, "--json").stdout)
    assert report["ok"] and report["files"] == len(local)
    history = cli("history", "--repo-id", REPO).output
    assert "model.safetensors.index.json" in history

    # a published shard is immutable: changed, with SHA256SUMS and the manifest made to agree, publish refuses it
    _flip_data_byte(gated)
    changed = sha(gated / "model-00002-of-00003.safetensors")
    _edit_json(
        gated / "checkpoint_manifest.json",
        lambda m: [f.update(sha256=changed) for f in m["files"] if f["path"] == "model-00002-of-00003.safetensors"],
    )
    cli("sums", "-C", gated)
    blocked = cli("publish", "--repo-id", REPO, "-C", gated, "--allow-cpu-gate", code=3)
    assert "model-00002-of-00003.safetensors" in blocked.output
    assert hub_server.files(REPO) == local


def test_another_architecture_is_managed_with_a_note_that_the_gate_does_not_apply(hub_server, tmp_path):

    folder = make_llama(tmp_path / "tiny-llama")
    before = snapshot(folder)
    report = json.loads(adopt_cli(folder, "--json").stdout)
    assert report["checkpoints"][0]["gate"] == "does not apply (not RWKV-7)"
    assert report["next_steps"] == []  # no smoke to run
    after = snapshot(folder)
    assert {p: after[p] for p in before if p not in ("README.md", "checkpoint_manifest.json", "evaluation.json")} == {
        p: before[p] for p in before if p not in ("README.md", "checkpoint_manifest.json", "evaluation.json")
    }
    checkpoint = Repo(folder).load_index().checkpoints[0]
    assert (checkpoint.model_type, checkpoint.architecture, checkpoint.gate) == ("llama", "LlamaForCausalLM", None)
    assert validate(folder) == []

    # the config is kept as written, but the index and the shards are still checked
    _edit_json(folder / "config.json", lambda config: config.update(hidden_size=4096))
    cli("sums", "-C", folder)
    assert not any(p.code == "checkpoint.config-shapes" for p in validate(folder))
    _unlisted_tensor(folder)
    assert any(p.code == "checkpoint.unlisted-tensor" for p in validate(folder))
    shutil.rmtree(folder)

    folder = make_llama(tmp_path / "tiny-llama")
    adopt_cli(folder)
    card = (folder / "README.md").read_text()
    assert "does not apply: not RWKV-7 (model_type llama), not gated" in card and "passed (" not in card
    # smoke names it: refused, one line; smoke of everything: nothing gated, a warning, no verdict recorded
    named = cli("smoke", "model.safetensors.index.json", "-C", folder, "--device", "cpu", code=3)
    assert "the RWKV-7 gate does not apply" in named.stderr and len(named.stderr.strip().splitlines()) == 1
    assert smoke(folder, [], None, "cpu") == []
    assert Repo(folder).load_index().checkpoints[0].gate is None
    # publish sends it without a receipt, saying the gate does not apply (never a pass)
    published = cli("publish", "--repo-id", "someone/tiny-llama", "-C", folder, "--json")
    document = json.loads(published.stdout)
    assert any(w["code"] == "gate.not-applicable" for w in document["warnings"])
    assert (
        hub_server.files("someone/tiny-llama")["model-00001-of-00002.safetensors"]
        == (folder / "model-00001-of-00002.safetensors").read_bytes()
    )


def test_a_signed_checkpoint_repo_is_published_and_pulled_with_its_signature_checked(hub_server, gated, tmp_path):

    private, public = write_key(tmp_path, "signer")
    cli("set", "repo-id", REPO, "-C", gated)  # the card rewritten: its manifest line follows
    cli("sign", "--key", private, "-C", gated)
    assert cli("validate", "-C", gated, "--public-key", public).exit_code == 0
    cli("publish", "--repo-id", REPO, "-C", gated, "--allow-cpu-gate", "--require-signature", "--public-key", public)
    pulled = tmp_path / "pulled"
    cli("pull", "--repo-id", REPO, pulled, "--require-signature", "--public-key", public)
    assert (pulled / "model.sig").read_bytes() == (gated / "model.sig").read_bytes()
    # a shard changed after signing: the signature no longer covers the files
    _flip_data_byte(pulled)
    cli("sums", "-C", pulled)
    findings = json.loads(cli("validate", "-C", pulled, "--public-key", public, "--json", code=1).stdout)["problems"]
    found = {(p["code"], p["file"]) for p in findings}
    assert ("checkpoint.manifest-mismatch", "checkpoint_manifest.json") in found
    assert ("sign.mismatch", "model-00002-of-00003.safetensors") in found and (
        "immutable.rewritten",
        "model-00002-of-00003.safetensors",
    ) in found


# -- registry add: a checkpoint folder under the layout ----------------------------------------------------------


@pytest.fixture
def world_registry(empty_registry, tmp_path) -> Path:

    base = make_base_checkpoint(tmp_path / "rwkv7-tiny-w-20260101.pth", TinySpec(**{**WORLD.__dict__, "seed": 1}))
    add_base(empty_registry, BaseRequest(path=base, filename=base.name, vocab="rwkv_vocab_v20230424.txt"))
    return empty_registry


def _checkpoint_folder(template: Path, tmp_path: Path) -> Path:
    folder = Path(shutil.copytree(template, tmp_path / "step5"))
    (folder / "README.md").unlink()  # the registry's card is the README at its root
    lines = json.loads((folder / "checkpoint_manifest.json").read_text())
    lines["files"] = [f for f in lines["files"] if f["path"] != "README.md"]
    (folder / "checkpoint_manifest.json").write_text(json.dumps(lines, indent=2) + "\n")
    return folder


def test_registry_add_puts_a_checkpoint_folder_under_the_layout_byte_for_byte(
    world_registry, seed_004_template, tmp_path
):

    folder = _checkpoint_folder(seed_004_template, tmp_path)
    args = ["add", folder, "-C", world_registry, "--base", "rwkv7-tiny-w-20260101", "--method", "full"]
    args += ["--data-version", "v1", "--train-json", train_json(tmp_path / "t.json"), "--json"]
    added = json.loads(cli(*args).stdout)
    target = world_registry / "rwkv7-tiny-w-20260101/full/v1"
    assert added["path"] == "rwkv7-tiny-w-20260101/full/v1/model.safetensors.index.json"
    assert {p: d for p, d in snapshot(target).items() if p != "train.json"} == snapshot(folder)
    checkpoint = Repo(world_registry).load_index().checkpoints[0]
    assert (
        checkpoint.base_sha256 == Repo(world_registry).load_index().bases[0].sha256 and checkpoint.data.version == "v1"
    )
    assert checkpoint.manifest == "rwkv7-tiny-w-20260101/full/v1/checkpoint_manifest.json"
    assert validate(world_registry) == []

    # a manifest line that no longer holds is found, naming the manifest in the folder
    _flip_data_byte(target)
    cli("sums", "-C", world_registry)
    assert ("checkpoint.manifest-mismatch", f"{target.relative_to(world_registry)}/checkpoint_manifest.json") in {
        (p.code, p.file) for p in validate(world_registry)
    }


def test_registry_add_refuses_a_bad_checkpoint_folder_leaving_the_registry_as_it_was(
    world_registry, seed_004_template, tmp_path
):

    folder = _checkpoint_folder(seed_004_template, tmp_path)
    _config_shapes(folder)
    before = snapshot(world_registry)
    args = ["add", folder, "-C", world_registry, "--base", "rwkv7-tiny-w-20260101", "--method", "full"]
    result = cli(*args, "--data-version", "v1", "--train-json", train_json(tmp_path / "t.json"), code=3)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {folder / 'config.json'}: ") and "; fix: " in lines[0]
    assert snapshot(world_registry) == before


# -- adopt: a hand-made repo holding a checkpoint folder under the layout ------------------------------------------


def _hand_made_layout(template: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A repo made by hand: the checkpoint folder at <base>/full/v1/ with its train.json; the base
    .pth beside the repo (given with --base-file, read, not copied)."""
    base = make_base_checkpoint(tmp_path / "rwkv7-tiny-w-20260101.pth", TinySpec(**{**WORLD.__dict__, "seed": 1}))
    repo = tmp_path / "hand-made"
    version = repo / "rwkv7-tiny-w-20260101/full/v1"
    version.parent.mkdir(parents=True)
    shutil.copytree(_checkpoint_folder(template, tmp_path), version)
    train_json(version / "train.json")
    return repo, base


def test_a_hand_made_repo_with_a_checkpoint_under_the_layout_is_adopted_in_place_byte_for_byte(
    seed_004_template, tmp_path
):
    repo, base = _hand_made_layout(seed_004_template, tmp_path)
    before = snapshot(repo)
    report = json.loads(adopt_cli(repo, "--base-file", str(base), "--json").stdout)
    after = snapshot(repo)
    assert {p: after[p] for p in before} == before  # every file of the author's, byte for byte
    index = Repo(repo).load_index()
    (checkpoint,) = index.checkpoints
    folder = "rwkv7-tiny-w-20260101/full/v1"
    assert checkpoint.path == f"{folder}/model.safetensors.index.json" and index.entries == []
    assert checkpoint.base_sha256 == index.bases[0].sha256 == sha(base) and checkpoint.data.version == "v1"
    assert checkpoint.manifest == f"{folder}/checkpoint_manifest.json"
    assert checkpoint.evaluation == f"{folder}/evaluation.json"
    assert [s.path for s in checkpoint.shards] == [f"{folder}/model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    assert report["checkpoints"][0]["gate"] == "applies"
    assert validate(repo) == []
    assert CliRunner().invoke(main, ["card", "--check", "-C", str(repo)]).exit_code == 0

    # a score on it (by its folder) joins its base's score tables, the author's evaluation.json untouched
    args = ["--benchmark", "exam", "--value", "52.5", "--date", "2026-12-01", "--backend", "rwkv 0.8.30"]
    scored = CliRunner().invoke(main, ["score", str(repo / folder), *args, "-C", str(repo)])
    assert scored.exit_code == 0, scored.output
    assert (repo / folder / "evaluation.json").read_bytes() == before[f"{folder}/evaluation.json"]
    card = (repo / "README.md").read_text()
    row = next(line for line in card.splitlines() if line.startswith("| `full/v1/model.safetensors.index.json`"))
    assert "| Transformers | exam | 52.5% |" in row
    assert validate(repo) == []


def test_a_hand_made_checkpoint_under_the_layout_that_disagrees_is_refused_leaving_the_folder_as_it_was(
    seed_004_template, tmp_path
):
    repo, base = _hand_made_layout(seed_004_template, tmp_path)
    folder = repo / "rwkv7-tiny-w-20260101/full/v1"
    _flip_data_byte(folder)
    misplaced = repo / "rwkv7-tiny-w-20260101/miss/v1"
    shutil.copytree(_checkpoint_folder(seed_004_template, tmp_path / "again"), misplaced)
    before = snapshot(repo)
    lines = adopt_cli(repo, "--base-file", str(base), code=3).stderr.strip().splitlines()
    assert snapshot(repo) == before
    assert len(lines) == 2 and lines[0].startswith(
        f"error: {folder.relative_to(repo)}/checkpoint_manifest.json: says model-00002-of-00003.safetensors has sha256"
    )
    assert lines[1].startswith(
        "error: rwkv7-tiny-w-20260101/miss/v1: a Transformers checkpoint folder outside the layout"
    )


def test_pull_of_the_hand_made_seed_004_repo_adopts_it_on_the_way(hub_server, seed_004_template, tmp_path):

    api = HfApi()
    api.create_repo("xirui/readall-by-hand")
    api.upload_folder(folder_path=str(seed_004_template), repo_id="xirui/readall-by-hand")
    pulled = tmp_path / "pulled"
    cli("pull", "--repo-id", "xirui/readall-by-hand", pulled)
    index = Repo(pulled).load_index()
    assert index.registry.repo_id == "xirui/readall-by-hand" and index.checkpoints[0].initialized_from == INIT_REPO
    for shard in index.checkpoints[0].shards:
        assert (pulled / shard.path).read_bytes() == (seed_004_template / shard.path).read_bytes()
    assert validate(pulled) == []
