"""export-gguf: GGUF files llama.cpp loads and that pass the gate against our fp32 reference,
recorded with lineage, checked by validate, required to carry receipts by publish; a planted
wrong mapping fails the gate; a truncated or lying GGUF is refused by validate.

llama.cpp runs through llama-cpp-python on CPU.  The tensors written for f16, bf16 and q8_0 were
also compared byte for byte with llama.cpp's own convert_hf_to_gguf.py on the export-hf folder
(docs/formats.md gives the command); that script is not in the installed packages, so not here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from registry.artifacts.miss import merge_delta, read_miss_json
from registry.artifacts.synthetic import (
    TinySpec,
    checkpoint_shapes,
    make_adapter_file,
    make_base_checkpoint,
    make_base_state_dict,
    make_state_file,
    save_checkpoint,
    share_storage,
)
from registry.core.errors import RegistryError
from registry.core.layout import gguf_path
from registry.core.names import SUMS_NAME
from registry.core.repo import Repo
from registry.core.sums import parse_sums
from registry.gate.receipt import receipt_path
from registry.gguf import gate, llama, mapping
from registry.gguf.check import expected_shapes
from registry.gguf.reader import GGML_TYPES, read_header
from registry.hub.gates import GateTrust, gate_findings
from registry.hub.local import local_sums
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.card import write_card
from registry.ops.demo import NOVEL_PROMPT
from registry.ops.export_gguf import GgufRequest, export_gguf
from registry.ops.sums import write_sums
from registry.ops.validate import validate

from .conftest import sha256_of, snapshot
from .ollama import parse_modelfile, render_template
from .test_ops_artifacts import train_json

gguf = pytest.importorskip("gguf", reason="the gguf extra (pip install -e '.[torch,gguf,test]') is not installed")
pytest.importorskip("llama_cpp", reason="the gguf extra (pip install -e '.[torch,gguf,test]') is not installed")

# The gate tokenizes real prompts: the world vocabulary.  llama.cpp's rwkv7 takes head size 64
# (the wkv7 op's N), any width that is a multiple of it and any layer count; fla's shape checks,
# which export-gguf shares, want two layers or more.
WORLD = TinySpec(n_layer=2, n_embd=128, vocab_size=65536)
BASE = "rwkv7-gguf-20260101"
DIRECT = ("f16", "bf16", "q8_0")


@pytest.fixture(scope="module")
def world_base(tmp_path_factory) -> Path:
    return make_base_checkpoint(tmp_path_factory.mktemp("gguf") / f"{BASE}.pth", WORLD, shared=True)


@pytest.fixture
def sources(empty_registry, world_base, tmp_path):
    """A registry with the base, a full fine-tune and a MiSS adapter on it."""
    root = empty_registry
    add_base(root, BaseRequest(path=world_base, filename=world_base.name, vocab="rwkv_vocab_v20230424.txt"))
    full = save_checkpoint(tmp_path / "rwkv-final.pth", share_storage(make_base_state_dict(replace(WORLD, seed=5))))
    full_entry = add_weight(root, AddRequest(full, BASE, "full", "v1.0", train_json(tmp_path / "f.json")))
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", WORLD, sha256_of(world_base), rank=16, scale=2.0)
    miss_entry = add_weight(root, AddRequest(adapter, BASE, "miss", "v2.1", train_json(tmp_path / "m.json"), run="r16"))
    return root, full_entry, miss_entry


def _tensor(path: Path, name: str) -> np.ndarray:
    reader = gguf.GGUFReader(path)
    return np.asarray(next(t for t in reader.tensors if t.name == name).data)


def test_base_full_and_merged_miss_become_f16_bf16_q8_0_ggufs_that_pass_the_gate(sources, world_base):
    root, full, miss = sources
    made = [
        *export_gguf(root, GgufRequest(base=BASE, base_file=world_base, types=DIRECT)),
        *export_gguf(root, GgufRequest(entry=full.path, types=DIRECT)),
        *export_gguf(root, GgufRequest(entry=miss.path, base_file=world_base, types=DIRECT)),
    ]
    assert [g.path for g in made] == [gguf_path(BASE, src, t) for src in (None, full.path, miss.path) for t in DIRECT]
    assert (
        made[0].path == f"{BASE}/gguf/{BASE}-F16.gguf"
        and made[-1].path == f"{BASE}/miss/v2.1/r16/gguf/adapter-final-merged-Q8_0.gguf"
    )
    sums = parse_sums((root / SUMS_NAME).read_bytes())
    repo = Repo.open(root)
    for g in made:
        assert g.sha256 == sha256_of(root / g.path) == sums[g.path] and g.size == (root / g.path).stat().st_size
        assert (
            g.gate is not None
            and g.gate.passed
            and g.nmse is not None
            and g.nmse <= gate.bounds(g.type, WORLD.n_layer)[0]
        )
        assert g.top1_agreement is not None and g.top1_agreement >= gate.bounds(g.type, WORLD.n_layer)[1]
        receipt = json.loads(receipt_path(repo.gates_dir, g.sha256).read_text())  # index.json names no private path
        assert receipt["file_sha256"] == g.sha256 and receipt["passed"] and receipt["files"][g.path] == g.sha256
        assert {c["name"] for c in receipt["checks"]} == {"gguf-logits", "gguf-tokenizer", "finite-logits"}
        assert set(g.tools) == {"rwkv-registry", "gguf", "llama-cpp-python"} and g.tools["gguf"] == "0.19.0"
    assert [(g.source, g.source_sha256, g.merged) for g in made[::3]] == [
        (BASE, sha256_of(world_base), False),
        (full.path, full.sha256, False),
        (miss.path, miss.sha256, True),
    ]
    assert repo.load_index().ggufs == sorted(made, key=lambda g: g.path)
    assert validate(root) == []
    assert (
        list(
            gate_findings(repo, repo.load_index(), local_sums(repo), [g.path for g in made], GateTrust(allow_cpu=True))
        )
        == []
    )
    card = (root / "README.md").read_text()
    assert (
        "### GGUF (llama.cpp, Ollama)" in card
        and all(f"`{g.path}`" in card for g in made)
        and "llama-cli -m" in card
        and "ollama create" in card
    )
    assert "- gguf" in card.split("---")[1]  # the Hub's tag for repositories with GGUF files


def test_the_merged_miss_gguf_holds_the_bit_exact_merge(sources, world_base):
    root, _, miss = sources
    (record,) = export_gguf(root, GgufRequest(entry=miss.path, base_file=world_base, types=("bf16",)))
    base = torch.load(world_base, weights_only=True)
    adapter = torch.load(root / miss.path, weights_only=True)
    scale = read_miss_json(root / miss.path).scale
    name = "blocks.1.att.key.weight"
    merged = merge_delta(base[name], adapter[name], scale)
    written = _tensor(root / record.path, "blk.1.time_mix_key.weight").view(np.uint16)
    assert np.array_equal(written, merged.view(torch.int16).numpy().view(np.uint16))  # bf16 → f32 → bf16: the same bits
    assert not torch.equal(merged, base[name])


def test_a_k_quant_is_made_by_llama_cpp_quantizer_and_gated(sources, world_base):
    root, _, _ = sources
    (record,) = export_gguf(root, GgufRequest(base=BASE, base_file=world_base, types=("q4_k_m",)))
    reader = gguf.GGUFReader(root / record.path)
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert reader.get_field("general.file_type").contents() == mapping.QUANTIZER_TYPES["q4_k_m"]
    # rows of 128 values are too short for k-quant blocks (256): llama.cpp's quantizer falls back per tensor
    assert (
        types["blk.0.channel_mix_key.weight"] in ("Q4_K", "Q5_K", "Q6_K", "Q5_0", "Q8_0")
        and types["blk.0.time_mix_w1.weight"] == "F32"
    )
    assert record.gate is not None and record.gate.passed and validate(root) == []
    receipt = json.loads(receipt_path(Repo.open(root).gates_dir, record.sha256).read_text())
    assert [c.name for c in record.gate.checks] == [
        c["name"] for c in receipt["checks"]
    ]  # index.json records the run's facts
    lossless = next(
        c for c in receipt["checks"] if c["name"] == "gguf-lossless-logits"
    )  # the bf16 file it was quantized from
    assert lossless["passed"] and lossless["thresholds"]["nmse_max"] == gate.BOUNDS["bf16"][0]
    staging = root / ".registry" / "staging"
    assert not staging.exists() or list(staging.iterdir()) == []  # the lossless file is gone


def test_a_planted_wrong_mapping_fails_a_k_quant_through_its_lossless_file(sources, world_base, monkeypatch):
    root, _, _ = sources
    before = snapshot(root)
    _plant(monkeypatch, "swapped")
    with pytest.raises(RegistryError) as failed:
        export_gguf(root, GgufRequest(base=BASE, base_file=world_base, types=("q4_k_m",)))
    assert failed.value.code == "gguf.gate-failed" and "gguf-lossless-logits" in failed.value.message, (
        failed.value.message
    )
    assert snapshot(root) == before and list((root / ".registry" / "staging").iterdir()) == []


def test_a_miss_adapter_without_its_base_file_is_refused(sources):
    root, _, miss = sources
    before = snapshot(root)
    with pytest.raises(RegistryError) as refused:
        export_gguf(root, GgufRequest(entry=miss.path))
    assert (
        refused.value.code == "args.missing-file"
        and f"--base-file {BASE}.pth" in refused.value.fix
        and snapshot(root) == before
    )


def test_a_state_is_refused_with_the_reason(empty_registry, world_base, tmp_path):
    add_base(empty_registry, BaseRequest(path=world_base, filename=world_base.name, vocab="rwkv_vocab_v20230424.txt"))
    state = add_weight(
        empty_registry,
        AddRequest(make_state_file(tmp_path / "s.pth", WORLD), BASE, "state", "v1.41", train_json(tmp_path / "s.json")),
    )
    before = snapshot(empty_registry)
    with pytest.raises(RegistryError) as refused:
        export_gguf(empty_registry, GgufRequest(entry=state.path))
    assert (
        refused.value.code == "gguf.state" and "not a model" in refused.value.message and refused.value.exit_code == 3
    )
    assert snapshot(empty_registry) == before


def _plant(monkeypatch, how: str) -> None:
    real_rules = mapping.rules

    def planted(n_layer: int) -> list[mapping.Rule]:
        out = real_rules(n_layer)
        at = {r.target: i for i, r in enumerate(out)}
        if how == "swapped":  # two same-shaped tensors trade places
            k, r = at["blk.1.time_mix_key.weight"], at["blk.1.time_mix_receptance.weight"]
            out[k], out[r] = replace(out[k], sources=out[r].sources), replace(out[r], sources=out[k].sources)
        elif how == "transposed":  # a square matrix transposed that must not be
            i = at["blk.1.time_mix_output.weight"]
            out[i] = replace(out[i], transform="transpose")
        elif how == "untransposed":  # a low-rank matrix left as x070 stores it: llama.cpp refuses the shape
            i = at["blk.1.time_mix_a1.weight"]
            out[i] = replace(out[i], transform="rename")
        return out

    if how == "norm_eps":
        monkeypatch.setattr(mapping, "NORM_EPS", 0.1)
    else:
        monkeypatch.setattr(mapping, "rules", planted)


@pytest.mark.parametrize("how", ["swapped", "transposed", "untransposed", "norm_eps"])
def test_a_planted_wrong_mapping_fails_the_gate_and_changes_nothing(sources, world_base, monkeypatch, how):
    root, _, _ = sources
    before = snapshot(root)
    _plant(monkeypatch, how)
    with pytest.raises(RegistryError) as failed:
        export_gguf(root, GgufRequest(base=BASE, base_file=world_base, types=("f16",)))
    assert failed.value.code == "gguf.gate-failed" and failed.value.exit_code == 1, failed.value.message
    assert ("gguf-load" if how == "untransposed" else "gguf-logits: NMSE") in failed.value.message
    assert snapshot(root) == before and list((root / ".registry" / "staging").iterdir()) == []


@pytest.mark.parametrize(("kind", "code"), [("f16", "gguf.gate-failed"), ("q4_k_m", "gguf.quantize-failed")])
def test_llama_cpp_dying_of_a_signal_is_a_refusal_naming_the_file(
    sources, world_base, monkeypatch, tmp_path, kind, code
):
    """llama.cpp runs in a child process: a crash of the native library (SIGSEGV) while it gates a
    file or quantizes one refuses that file in one line and leaves the registry as it was."""
    root, _, _ = sources
    before = snapshot(root)
    crashing = tmp_path / "python-that-segfaults"
    crashing.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crashing.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(crashing))  # the interpreter registry.gguf.llama starts
    with pytest.raises(RegistryError) as failed:
        export_gguf(root, GgufRequest(base=BASE, base_file=world_base, types=(kind,)))
    assert failed.value.code == code, failed.value.message
    assert "llama.cpp died of SIGSEGV" in failed.value.message and ".gguf" in str(failed.value.problems[0].file)
    assert snapshot(root) == before and list((root / ".registry" / "staging").iterdir()) == []


def _registered_without_gate(root: Path, base_file: Path) -> str:
    (record,) = export_gguf(root, GgufRequest(base=BASE, base_file=base_file, types=("f16",), gate=False))
    return record.path


def _accept(root: Path, rel: str) -> None:
    """Record the file's new bytes in index.json and SHA256SUMS, as a hand edit would: only the
    header checks can then tell."""
    index = json.loads((root / "index.json").read_text())
    for g in index["ggufs"]:
        if g["path"] == rel:
            g["sha256"], g["size"] = sha256_of(root / rel), (root / rel).stat().st_size
    (root / "index.json").write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n")
    sums = parse_sums((root / SUMS_NAME).read_bytes())
    sums[rel], sums["index.json"] = sha256_of(root / rel), sha256_of(root / "index.json")
    (root / SUMS_NAME).write_text("".join(f"{sha}  {path}\n" for path, sha in sorted(sums.items())))


def test_validate_refuses_a_truncated_gguf(sources, world_base):
    root, _, _ = sources
    rel = _registered_without_gate(root, world_base)
    data = (root / rel).read_bytes()
    (root / rel).write_bytes(data[: len(data) - 4096])
    _accept(root, rel)
    messages = [p.message for p in validate(root) if p.code == "gguf.invalid"]
    assert any("truncated" in m for m in messages), messages


@pytest.mark.parametrize(
    ("lie", "said"),
    [
        ({"rwkv7.feed_forward_length": 1024}, "feed_forward_length 1024 but the base records 512"),
        ({"rwkv7.attention.layer_norm_epsilon": 1e-6}, "layer_norm_epsilon"),
        ({"rwkv_registry.source_sha256": "0" * 64}, "rwkv_registry.source_sha256"),
    ],
)
def test_validate_refuses_a_gguf_whose_metadata_lies(sources, world_base, monkeypatch, lie, said):
    root, _, _ = sources
    real_metadata, real_lineage = mapping.metadata, mapping.lineage_metadata
    monkeypatch.setattr(
        mapping,
        "metadata",
        lambda config, file_type: {
            **real_metadata(config, file_type),
            **{k: v for k, v in lie.items() if k.startswith("rwkv7.")},
        },
    )
    monkeypatch.setattr(
        mapping,
        "lineage_metadata",
        lambda *args: {**real_lineage(*args), **{k: v for k, v in lie.items() if k.startswith("rwkv_registry.")}},
    )
    _registered_without_gate(root, world_base)
    monkeypatch.undo()
    messages = [p.message for p in validate(root) if p.code == "gguf.invalid"]
    assert any(said in m for m in messages), messages


def test_publish_refuses_a_gguf_without_a_passing_receipt_and_validate_a_changed_source(sources, world_base):
    root, full, _ = sources
    rel = _registered_without_gate(root, world_base)
    repo = Repo.open(root)
    (finding,) = gate_findings(repo, repo.load_index(), local_sums(repo), [rel], GateTrust(allow_cpu=True))
    assert finding.code == "gate.missing" and finding.file == rel and "export-gguf --base" in finding.fix
    (record,) = export_gguf(root, GgufRequest(entry=full.path, types=("q8_0",)))
    index = json.loads((root / "index.json").read_text())
    index["entries"] = [e for e in index["entries"] if e["path"] != full.path]  # the source is gone
    (root / "index.json").write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n")
    problems = [p for p in validate(root) if p.file == record.path]
    assert any("neither an entry nor its base" in p.message for p in problems), problems


@pytest.mark.parametrize(
    "spec", [WORLD, TinySpec(n_layer=3, n_embd=256, vocab_size=512, with_layer0_v=False)], ids=["world", "no-layer0-v"]
)
def test_the_mapping_makes_exactly_the_tensors_validate_expects_for_its_metadata(spec):
    shapes = checkpoint_shapes(spec)
    plan = mapping.gguf_plan(shapes)
    meta = {key.rsplit(".", 1)[-1]: value for key, value in mapping.metadata(plan.config, 1).items()}
    made = {rule.target: mapping.target_shape(rule, shapes) for rule in plan.rules}
    assert made == expected_shapes(meta, spec.vocab_size)
    used = {s for rule in plan.rules for s in rule.sources}
    assert set(shapes) - used == (
        {"blocks.0.att.v0", "blocks.0.att.v1", "blocks.0.att.v2"} if spec.with_layer0_v else set()
    )


def test_the_gate_bounds_scale_with_the_source_depth_not_its_width():
    """NMSE grows with depth (each layer adds its rounding; docs/gpu-gate.md run 11): a 32-layer
    source gets 8× the 4-layer NMSE bound, the same top-1 floor; up to 4 layers the bounds stand."""
    for layers, width in ((2, 128), (4, 256), (32, 64)):  # the depth the gate is given: the GGUF plan's
        shapes = {
            name: tuple(t.shape)
            for name, t in make_base_state_dict(TinySpec(n_layer=layers, n_embd=width, vocab_size=256)).items()
        }
        assert mapping.gguf_plan(shapes, "x.pth").config["num_hidden_layers"] == layers
    for kind, (max_nmse, min_top1) in gate.BOUNDS.items():
        assert gate.bounds(kind, 2) == gate.bounds(kind, 4) == (max_nmse, min_top1)
        assert gate.bounds(kind, 32) == pytest.approx((8 * max_nmse, min_top1))


# -- the plain-Python header reader: what the light install validates with ------------------------------------------


def test_the_plain_reader_agrees_with_the_gguf_package_on_real_exports(sources, world_base):
    root, _, _ = sources
    made = export_gguf(root, GgufRequest(base=BASE, base_file=world_base, types=("f16", "q8_0", "q4_k_m"), gate=False))
    kinds = set()
    for record in made:
        ours, theirs = read_header(root / record.path), gguf.GGUFReader(root / record.path)
        assert ours.data_offset == theirs.data_offset and ours.alignment == theirs.alignment
        assert set(ours.fields) == {
            key for key in theirs.fields if not key.startswith("GGUF.")
        }  # gguf lists the header's counts as fields
        assert (ours.version, len(ours.tensors)) == (
            theirs.get_field("GGUF.version").contents(),
            theirs.get_field("GGUF.tensor_count").contents(),
        )
        for key, value in ours.fields.items():
            want = theirs.get_field(key).contents()
            assert value == want or (isinstance(value, float) and abs(value - want) < 1e-12), key
        assert [(t.name, t.shape, t.type_name, t.offset, t.n_bytes) for t in ours.tensors] == [
            (
                t.name,
                tuple(int(d) for d in reversed(t.shape.tolist())),
                t.tensor_type.name,
                t.data_offset,
                int(t.n_bytes),
            )
            for t in theirs.tensors
        ]
        kinds |= {t.type_name for t in ours.tensors}
    assert {"F32", "F16", "Q8_0", "Q4_K"} <= kinds  # the k-quant mixes its types: each was read
    for kind, (name, block, size) in GGML_TYPES.items():  # our table is ggml's
        assert gguf.GGMLQuantizationType(kind).name == name and gguf.GGML_QUANT_SIZES[
            gguf.GGMLQuantizationType(kind)
        ] == (block, size)


def test_validate_finds_a_header_past_its_own_end_without_the_gguf_package(sources, world_base, monkeypatch):
    root, _, _ = sources
    rel = _registered_without_gate(root, world_base)
    monkeypatch.setitem(sys.modules, "gguf", None)  # as in the light install: importing gguf fails
    assert [p for p in validate(root) if p.code.startswith("gguf")] == []
    data = bytearray((root / rel).read_bytes())
    data[16:24] = (1 << 40).to_bytes(8, "little")  # a metadata count no file this size holds
    (root / rel).write_bytes(bytes(data))
    _accept(root, rel)
    (problem,) = [p for p in validate(root) if p.code == "gguf.invalid"]
    assert (
        problem.file == rel
        and "is truncated: its header claims" in problem.message
        and "export-gguf --force" in problem.fix
    )


# -- the Ollama Modelfile beside each GGUF --------------------------------------------------------------------------


def test_export_writes_an_ollama_modelfile_that_renders_the_rwkv_chat_format(sources, world_base):
    root, _, miss = sources
    (record,) = export_gguf(root, GgufRequest(entry=miss.path, base_file=world_base, types=("f16",), gate=False))
    rel = record.path.removesuffix(".gguf") + ".Modelfile"
    assert rel in parse_sums((root / SUMS_NAME).read_bytes()) and validate(root) == []
    commands = parse_modelfile((root / rel).read_text())
    assert [name for name, _ in commands] == [
        "from",
        "template",
        "parameter stop",
        "parameter temperature",
        "parameter top_p",
    ]
    values = dict(commands)
    assert (root / rel).parent / values["from"] == (root / record.path).parent / f"./{Path(record.path).name}" and (
        root / rel
    ).parent.joinpath(values["from"]).is_file()
    assert values["parameter stop"] == "\n\nUser:" and (values["parameter temperature"], values["parameter top_p"]) == (
        "0",
        "0",
    )
    template = values["template"]
    conversation = [
        {"role": "system", "content": "你是本地工具 Agent。"},
        {"role": "user", "content": "现在几点？"},
        {"role": "assistant", "content": "<think>用工具。</think> 十点。"},
        {"role": "user", "content": "Thanks.\nBye"},
    ]
    assert (
        render_template(template, conversation)
        == "System: 你是本地工具 Agent。\n\nUser: 现在几点？\n\nAssistant: <think>用工具。</think> "
        "十点。\n\nUser: Thanks.\nBye\n\nAssistant:"
    )
    # seed 000's prompt format, the demo's: a system turn and a user turn render to exactly it
    system, user = NOVEL_PROMPT.removesuffix("\n\nAssistant:").split("\n\n", 1)
    assert (
        render_template(
            template,
            [
                {"role": "system", "content": system.removeprefix("System: ")},
                {"role": "user", "content": user.removeprefix("User: ")},
            ],
        )
        == NOVEL_PROMPT
    )


def test_a_missing_or_edited_modelfile_is_found_and_registry_card_writes_it_again(sources, world_base):
    root, _, _ = sources
    rel = _registered_without_gate(root, world_base).removesuffix(".gguf") + ".Modelfile"
    good = (root / rel).read_bytes()
    for damage in (lambda p: p.unlink(), lambda p: p.write_bytes(good.replace(b"temperature 0", b"temperature 1"))):
        damage(root / rel)
        found = [(p.code, p.file, p.fix) for p in validate(root) if p.code == "gguf.modelfile"]
        assert found == [("gguf.modelfile", rel, "run `registry card` (it writes the Modelfile again)")]
        write_card(root)
        assert (root / rel).read_bytes() == good and validate(root) == []


def test_the_cards_llama_cpp_python_snippet_runs_as_pasted_against_the_exported_gguf(sources, world_base):
    root, _, _ = sources
    rel = _registered_without_gate(root, world_base)
    card = (root / "README.md").read_text(encoding="utf-8")
    (snippet,) = [s for s in re.findall(r"```python\n(.*?)```", card, re.S) if "llama_cpp" in s]
    assert rel in snippet and '"\\n\\nUser:"' in snippet
    shell = next(s for s in re.findall(r"```bash\n(.*?)```", card, re.S) if "ollama create" in s)
    assert f"ollama create {Path(rel).stem.lower()} -f {rel.removesuffix('.gguf')}.Modelfile" in shell
    ran = subprocess.run([sys.executable, "-c", snippet], cwd=root, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr


def test_export_adds_the_gguf_lfs_rule_to_a_registry_made_before_it(sources, world_base):
    root, _, _ = sources
    old = "*.pth filter=lfs diff=lfs merge=lfs -text\n*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    (root / ".gitattributes").write_text(old)
    write_sums(root)
    rel = _registered_without_gate(root, world_base)
    assert (root / ".gitattributes").read_text() == old + "*.gguf filter=lfs diff=lfs merge=lfs -text\n"
    assert validate(root) == []
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    said = subprocess.run(
        ["git", "check-attr", "filter", "--", rel], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert said == f"{rel}: filter: lfs\n"


def test_a_stray_file_in_a_gguf_folder_is_told_to_move_out_not_to_export_again(sources, world_base):
    root, _, _ = sources
    rel = _registered_without_gate(root, world_base)
    stray = rel.rsplit("/", 1)[0] + "/other-Q8_0.gguf"
    (root / stray).write_bytes(b"GGUF")
    write_sums(root)
    (problem,) = [p for p in validate(root) if p.code == "gguf.unlisted-file"]
    assert (
        problem.file == stray
        and problem.fix.startswith("move it out of the gguf folder")
        and "export-gguf --force" not in problem.fix
    )
    (root / stray).unlink()
    write_sums(root)
    assert validate(root) == []


def test_llama_cpp_takes_the_cores_it_may_use_or_fewer_where_omp_num_threads_asks(monkeypatch):
    cores = min(8, len(os.sched_getaffinity(0)))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert llama.threads() == cores
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert llama.threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "64")
    assert llama.threads() == cores
    for ignored in ("0", "two", ""):
        monkeypatch.setenv("OMP_NUM_THREADS", ignored)
        assert llama.threads() == cores, ignored
