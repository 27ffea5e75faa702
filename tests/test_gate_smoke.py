"""registry smoke on CPU: receipts, the index summary, and every refusal the gate owes."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from hashlib import sha256
from pathlib import Path

import pytest
import rwkv
import torch
from click.testing import CliRunner
from jsonschema import Draft202012Validator
from rwkv.rwkv_tokenizer import TRIE_TOKENIZER
from safetensors.torch import load_file, save_file

from registry.artifacts.signature import TrustedKey
from registry.artifacts.synthetic import (
    TinySpec,
    make_adapter_file,
    make_base_checkpoint,
    make_state_file,
    save_checkpoint,
)
from registry.card import render_card
from registry.card.markdown import escaped, md_cell
from registry.cli import main
from registry.core.errors import RegistryError
from registry.core.hashing import StatCache
from registry.core.models import Index
from registry.core.names import INDEX_NAME, VOCAB_NAME
from registry.core.pinned import pinned
from registry.core.repo import render_index
from registry.core.resources import schema_dir
from registry.gate import prompts
from registry.gate.loading import ToHash, load_hashed
from registry.gate.prepare import equal_tensors
from registry.gate.receipt import Receipt, gate_summary
from registry.gate.runtime import Rwkv7, load_tensors, merged_weights
from registry.gate.seal import sealed_here, signature_problem
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.convert import convert_entry
from registry.ops.describe import Description, Target, describe
from registry.ops.init import init_registry
from registry.ops.smoke import smoke
from registry.ops.sums import write_sums
from registry.ops.validate import validate

from .conftest import sha256_of, snapshot, user_environment
from .test_ops_artifacts import train_json

# vocab 65536: the gate feeds the seeds' prompts through the real rwkv tokenizer
GATE_SPEC = TinySpec(n_layer=2, n_embd=64, vocab_size=65536, seed=11)
# seed 000's "Prompt format", as its card states it
SEED000_PROMPT = (
    "System: 你是一个中文小说归因辅助助手。只能从候选角色中选择，并只输出 JSON。\n\nUser: "
    "候选角色：甲、乙\n上下文：……\n\nAssistant:"
)
# the sample's prompt in seed 001's profiles: g1k, and g1k-think (the RWKV-7 G1 think prompt)
G1K_PROMPT = "User: 用一句话介绍你自己。\n\nAssistant:"
G1K_THINK_PROMPT = "User: 用一句话介绍你自己。\n\nAssistant: <think"


@pytest.fixture(scope="module")
def gated_registry(tmp_path_factory):
    """A registry with one State, one MiSS and one full entry, gated once on CPU."""
    tmp = tmp_path_factory.mktemp("gate")

    root = init_registry(tmp / "reg").root
    base = make_base_checkpoint(tmp / "rwkv7-gate-20260101.pth", GATE_SPEC)
    add_base(root, BaseRequest(path=base, filename=base.name))
    name = base.name[:-4]
    state = add_weight(
        root, AddRequest(make_state_file(tmp / "s.pth", GATE_SPEC), name, "state", "v1.41", train_json(tmp / "t.json"))
    )
    adapter = make_adapter_file(tmp / "adapter-final.pth", GATE_SPEC, sha256_of(base), rank=8, scale=2.0)
    miss = add_weight(root, AddRequest(adapter, name, "miss", "v2.1", train_json(tmp / "m.json"), run="r8"))
    tuned = {k: v + 0.01 for k, v in torch.load(base, weights_only=True).items()}
    full = add_weight(
        root,
        AddRequest(save_checkpoint(tmp / "rwkv-final.pth", tuned), name, "full", "v1.0", train_json(tmp / "f.json")),
    )
    # each in its own format: the State's profile is recorded (seed 001: g1k), the MiSS adapter's
    # is not (its method's default, g1k-think), the full fine-tune's card states its prompt (seed 000)
    describe(root, Target(path=state.path), Description(profile="g1k"))
    describe(
        root,
        Target(path=full.path),
        Description(prompt_format=SEED000_PROMPT, stop_tokens=(0,), stop_texts=("\n\nUser:",), keep_stop_text=False),
    )
    receipts = smoke(root, [], base, "cpu")
    return root, base, {"state": state, "miss": miss, "full": full}, receipts


def test_every_method_passes_on_cpu_with_receipts(gated_registry):
    root, _, entries, receipts = gated_registry
    assert [r.passed for r in receipts] == [True, True, True], [c for r in receipts for c in r.failed_checks()]
    schema = json.loads((schema_dir() / "receipt.schema.json").read_text())
    index = Index.model_validate_json((root / INDEX_NAME).read_text())
    for receipt in receipts:
        entry = index.entry_by_path(receipt.entry)
        path = root / ".registry" / "gates" / f"{entry.sha256}.json"
        Draft202012Validator(schema).validate(json.loads(path.read_text()))
        assert receipt.environment.device == "cpu" and receipt.file_sha256 == entry.sha256
        assert entry.gate.passed and entry.gate.device == "cpu" and entry.gate.file_sha256 == entry.sha256
        # index.json records the run's facts (a clone has no .registry/), never the receipt's path
        assert (
            entry.gate.versions["torch"] == receipt.environment.torch
            and entry.gate.versions["rwkv"] == receipt.environment.rwkv
        )
        assert [(c.name, c.passed, c.figures) for c in entry.gate.checks] == [
            (c.name, c.passed, c.figures) for c in receipt.checks
        ]
        assert ".registry" not in (root / INDEX_NAME).read_text()
        assert sealed_here(Receipt.model_validate_json(path.read_bytes()))  # the file on disk, as publish reads it
        names = {c.name for c in receipt.checks}
        assert {"kernel-parity", "finite-weights", "model-parity", "finite-logits", "greedy-decoding"} <= names
        parity = next(c for c in receipt.checks if c.name == "model-parity")
        assert parity.figures["ours_vs_official_max_scaled_err"] < 1e-3
        assert receipt.timings.prefill_tokens_per_s > 0 and receipt.timings.decode_tokens_per_s > 0
    assert validate(root) == []


def test_the_adapter_changes_the_model(gated_registry):
    """The MiSS gate compares merged weights: an adapter that did nothing would be a toy check."""
    root, base, entries, receipts = gated_registry
    miss = next(r for r in receipts if r.method == "miss")
    parity = next(c for c in miss.checks if c.name == "model-parity")
    assert parity.passed

    base_t = load_tensors(base)
    merged = {**base_t, **dict(merged_weights(base_t, load_tensors(root / entries["miss"].path), 2.0))}
    ids = [1, 2, 3]
    assert float((Rwkv7(base_t).forward(ids)[0] - Rwkv7(merged).forward(ids)[0]).abs().max()) > 1e-3


def test_wrong_base_file_is_refused_before_loading(gated_registry, tmp_path):
    root, _, entries, _ = gated_registry
    other = make_base_checkpoint(tmp_path / "other.pth", TinySpec(n_layer=2, n_embd=64, vocab_size=65536, seed=99))
    before = snapshot(root)
    with pytest.raises(RegistryError) as err:
        smoke(root, [entries["state"].path], other, "cpu")
    assert err.value.code == "gate.base-mismatch" and sha256_of(other) in err.value.message
    assert snapshot(root) == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_without_cuda_is_refused(gated_registry):
    root, base, entries, _ = gated_registry
    result = CliRunner().invoke(
        main, ["smoke", entries["state"].path, "-C", str(root), "--base-file", str(base), "--device", "cuda"]
    )
    assert result.exit_code == 3 and "CUDA is not available" in result.output and "--device cpu" in result.output


def _replace_entry_file(root: Path, path: str, tensors: dict) -> None:
    """Swap an entry's bytes and keep index/SUMS consistent (a hand-edited registry)."""
    save_checkpoint(root / path, tensors)
    index = Index.model_validate_json((root / INDEX_NAME).read_text())
    entry = index.entry_by_path(path)
    entry.sha256, entry.size = sha256_of(root / path), (root / path).stat().st_size
    (root / INDEX_NAME).write_bytes(render_index(index))
    write_sums(root)


def test_nan_in_weights_fails_and_the_receipt_says_where(tmp_path, small_registry_factory):
    root, base, entry = small_registry_factory(tmp_path)
    poisoned = torch.load(root / entry.path, weights_only=True)
    poisoned["blocks.1.att.time_state"][0, 0, 0] = float("nan")
    _replace_entry_file(root, entry.path, poisoned)
    [receipt] = smoke(root, [entry.path], base, "cpu")
    assert not receipt.passed
    finite = next(c for c in receipt.checks if c.name == "finite-weights")
    assert not finite.passed and "blocks.1.att.time_state" in finite.detail
    assert not Index.model_validate_json((root / INDEX_NAME).read_text()).entry_by_path(entry.path).gate.passed


def test_state_that_does_not_fit_is_refused_without_a_receipt(tmp_path, small_registry_factory):
    root, base, entry = small_registry_factory(tmp_path)
    _replace_entry_file(root, entry.path, {f"blocks.{i}.att.time_state": torch.zeros(1, 64, 64) for i in range(3)})
    with pytest.raises(RegistryError) as err:
        smoke(root, [entry.path], base, "cpu")
    assert err.value.code == "state.wrong-base"  # add's own refusal: the gate applies add's rules first
    assert not (root / ".registry" / "gates").exists() or not list((root / ".registry" / "gates").iterdir())


def state_registry(tmp: Path, spec: TinySpec = GATE_SPEC, name: str = "rwkv7-gate-20260101"):
    """A registry with one base and one State entry on it: (root, base file, entry)."""

    root = init_registry(tmp / "reg").root
    base = make_base_checkpoint(tmp / f"{name}.pth", spec)
    add_base(root, BaseRequest(path=base, filename=base.name))
    entry = add_weight(
        root, AddRequest(make_state_file(tmp / "s.pth", spec), name, "state", "v1.41", train_json(tmp / "t.json"))
    )
    return root, base, entry


@pytest.fixture
def small_registry_factory():
    return state_registry


def test_a_model_without_the_world_vocabulary_is_refused_in_one_line(tmp_path):
    root = init_registry(tmp_path / "reg").root
    small = TinySpec(n_layer=2, n_embd=128, vocab_size=512)
    base = make_base_checkpoint(tmp_path / "rwkv7-smallvocab-20260101.pth", small)
    add_base(root, BaseRequest(path=base, filename=base.name))
    train = tmp_path / "t.json"
    train.write_text(
        json.dumps(
            {"trainer": {"name": "t", "version": "1"}, "hyperparameters": {}, "command": "t", "data_sha256": "ab" * 32}
        )
    )
    entry = add_weight(
        root,
        AddRequest(make_state_file(tmp_path / "s.pth", small), "rwkv7-smallvocab-20260101", "state", "v1.41", train),
    )
    with pytest.raises(RegistryError) as refused:
        smoke(root, [entry.path], base, "cpu")
    assert refused.value.code == "gate.vocab" and refused.value.file == entry.path


def _parity(receipt) -> dict:
    return next(c for c in receipt.checks if c.name == "model-parity").figures


def test_entries_gated_together_get_the_figures_they_get_alone(gated_registry):
    """One process, the base loaded once, a MiSS merged and undone: each entry sees exactly its own model."""
    root, base, entries, together = gated_registry
    by_path = {r.entry: r for r in together}
    for method in ("miss", "state", "full"):
        [alone] = smoke(root, [entries[method].path], base if method != "full" else None, "cpu")
        assert _parity(alone) == _parity(by_path[entries[method].path]), method
    # the MiSS first, then the State on the same loaded base: the State must not see the merge
    miss_first = smoke(root, [entries["miss"].path, entries["state"].path], base, "cpu")
    assert [_parity(r) for r in miss_first] == [_parity(by_path[entries[m].path]) for m in ("miss", "state")]


def test_a_full_entry_needs_no_base_file_but_state_and_miss_do(gated_registry):
    root, _, entries, _ = gated_registry
    [receipt] = smoke(root, [entries["full"].path], None, "cpu")
    assert receipt.passed and receipt.timings.entries_sharing_setup == 1
    with pytest.raises(RegistryError) as refused:
        smoke(root, [entries["full"].path, entries["miss"].path], None, "cpu")
    assert refused.value.code == "gate.no-base" and entries["miss"].path in refused.value.message


def test_progress_names_each_entry_and_each_step(gated_registry):
    root, base, entries, _ = gated_registry
    lines: list[str] = []
    smoke(root, [entries["state"].path, entries["miss"].path], base, "cpu", say=lines.append)
    text = "\n".join(lines)
    for needle in (
        "loading the base",
        "base sha256",
        "kernel parity",
        "official rwkv runtime",
        f"{entries['state'].path}: our runtime",
        f"{entries['miss'].path}: PASSED",
        f"{entries['miss'].path}: sample in g1k-think: 32 tokens, stop text not seen (reported, not a check)",
    ):
        assert needle in text, text


def _rerecord(root: Path, rel: str) -> None:
    """Record a swapped entry file's sha256 and size in index.json and SHA256SUMS, so the gate,
    not the checksum, meets the swap."""
    index = Index.model_validate_json((root / INDEX_NAME).read_text())
    index.entry_by_path(rel).sha256 = sha256_of(root / rel)
    index.entry_by_path(rel).size = (root / rel).stat().st_size
    (root / INDEX_NAME).write_bytes(render_index(index))
    write_sums(root)


def test_a_misfit_in_the_middle_fails_alone_and_the_others_are_recorded(tmp_path):
    root, base, state = state_registry(tmp_path)
    name = base.name[:-4]
    adapter = make_adapter_file(tmp_path / "adapter-final.pth", GATE_SPEC, sha256_of(base), rank=8)
    miss = add_weight(root, AddRequest(adapter, name, "miss", "v2.1", train_json(tmp_path / "m.json"), run="r8"))
    # the registered adapter is swapped (index and sums kept consistent) for one trained on another base
    make_adapter_file(root / miss.path, GATE_SPEC, "ab" * 32, rank=8)
    _rerecord(root, miss.path)
    with pytest.raises(RegistryError) as failed:
        smoke(root, [miss.path, state.path], base, "cpu")
    assert failed.value.exit_code == 1 and failed.value.file == miss.path
    assert [r["entry"] for r in failed.value.payload["receipts"]] == [state.path]
    recorded = Index.model_validate_json((root / INDEX_NAME).read_text())
    assert recorded.entry_by_path(state.path).gate.passed and recorded.entry_by_path(miss.path).gate is None


def test_the_base_is_hashed_once_then_known_until_it_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root, base, state = state_registry(tmp_path)
    past = base.stat().st_mtime - 60  # older than the racy window
    os.utime(base, (past, past))

    def hashing_said() -> str:
        lines: list[str] = []
        smoke(root, [state.path], base, "cpu", say=lines.append)
        return next(line for line in lines if "base sha256" in line)

    assert "hashed while loading" in hashing_said()
    assert "known from the stat cache" in hashing_said()
    os.utime(base, (past + 1, past + 1))  # any change of the stat fingerprint: hashed again
    assert "hashed while loading" in hashing_said()


def test_a_file_that_changes_while_it_loads_is_refused(tmp_path):
    path = tmp_path / "base.pth"
    path.write_bytes(b"x" * 4096)
    with pytest.raises(RegistryError) as changed, pinned(path) as pin:
        load_hashed([ToHash(pin, StatCache(None), str(path))], lambda: path.open("ab").write(b"more"))
    assert changed.value.code == "fs.changed" and changed.value.file == str(path)


def test_the_gate_tokenizer_is_the_packages_from_its_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    trie = TRIE_TOKENIZER(str(Path(rwkv.__file__).parent / VOCAB_NAME))
    prompts.tokenizer.cache_clear()
    built = prompts.tokenizer()  # from the package, then cached
    prompts.tokenizer.cache_clear()
    cached = prompts.tokenizer()  # from the cache file
    assert (tmp_path / "rwkv-registry" / "world-tokenizer.json").is_file()
    for name, text in prompts.PROMPTS.items():
        assert cached.prompt_ids[name] == built.prompt_ids[name] == trie.encode(text)
    rng = random.Random(5)
    ids = [[rng.randrange(1, 65530) for _ in range(rng.randrange(1, 12))] for _ in range(500)] + [
        trie.encode("User: 你好 🙂\n\nAssistant: ok")
    ]
    assert [cached.decode(tokens) for tokens in ids] == [trie.decode(tokens) for tokens in ids]
    assert sum(trie.decode(tokens) != "\ufffd" for tokens in ids) > 100  # most decode: the comparison is not all U+FFFD
    # a sample's prompt (the card's own, any text) is encoded as the package encodes it
    alphabet = "ab Zz09 \n\t:<>{}用一句话介绍你自己。🙂é\x00\x7f"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 40))) for _ in range(300)]
    for text in [*texts, *prompts.PROMPTS.values(), prompts.profile_prompt("g1k-think")]:
        assert cached.encode(text) == trie.encode(text), text
    (tmp_path / "rwkv-registry" / "world-tokenizer.json").write_text("{broken")
    prompts.tokenizer.cache_clear()
    assert prompts.tokenizer().prompt_ids == built.prompt_ids  # a broken cache is rebuilt
    prompts.tokenizer.cache_clear()


def _figures(receipt) -> list:
    """Every check's figures and verdict: what a reused run must carry over unchanged."""
    return [(c.name, c.passed, c.figures) for c in receipt.checks]


def test_a_twin_carries_its_sources_results_only_after_its_tensors_compare_equal(tmp_path):
    """A safetensors twin (State and full) gets the figures of the .pth it was converted from,
    which equal what gating it alone computes; an entry with other tensors runs on its own."""

    root, base, state = state_registry(tmp_path)
    name = base.name[:-4]
    other = add_weight(
        root,
        AddRequest(
            make_state_file(tmp_path / "s2.pth", GATE_SPEC, seed=9),
            name,
            "state",
            "v1.42",
            train_json(tmp_path / "t2.json"),
        ),
    )
    tuned = {k: v + 0.01 for k, v in torch.load(base, weights_only=True).items()}
    full = add_weight(
        root,
        AddRequest(
            save_checkpoint(tmp_path / "rwkv-final.pth", tuned), name, "full", "v1.0", train_json(tmp_path / "f.json")
        ),
    )
    state_twin = convert_entry(root, state.path, 1 << 30)
    full_twin = convert_entry(root, full.path, 1 << 20)
    lines: list[str] = []
    together = {r.entry: r for r in smoke(root, [], base, "cpu", say=lines.append)}
    text = "\n".join(lines)
    for twin, source in ((state_twin, state), (full_twin, full)):
        assert f"{twin.path}: tensors equal to {source.path}'s (compared), its results apply" in text
        assert _figures(together[twin.path]) == _figures(together[source.path])
        [alone] = smoke(root, [twin.path], base if twin.method != "full" else None, "cpu")
        assert _figures(alone) == _figures(together[twin.path]), twin.path
        assert together[twin.path].file_sha256 == twin.sha256 and together[twin.path].passed
    assert f"{other.path}: our runtime" in text and _figures(together[other.path]) != _figures(together[state.path])


def _tuned_full(root, base, tmp_path):
    """A full fine-tune of ``base`` (every tensor moved by 0.01), added to ``root``."""
    tuned = {k: v + 0.01 for k, v in torch.load(base, weights_only=True).items()}
    weight = save_checkpoint(tmp_path / "rwkv-final.pth", tuned)
    return add_weight(root, AddRequest(weight, base.name[:-4], "full", "v1.0", train_json(tmp_path / "f.json")))


def test_a_full_twin_whose_tensors_differ_from_its_source_fails_alone(tmp_path):
    """A twin swapped for other tensors (index and sums kept consistent) is not given its source's run."""

    root, base, _ = state_registry(tmp_path)
    full = _tuned_full(root, base, tmp_path)
    twin = convert_entry(root, full.path, 1 << 30)
    swapped = load_file(root / twin.path)
    name = next(iter(swapped))
    swapped[name] = swapped[name] + 1
    save_file(swapped, root / twin.path, metadata={"format": "pt"})
    _rerecord(root, twin.path)
    with pytest.raises(RegistryError) as failed:
        smoke(root, [full.path, twin.path], None, "cpu")
    assert failed.value.exit_code == 1 and failed.value.code == "gate.twin-differs" and failed.value.file == twin.path
    assert f"registry convert {full.path} --force" in failed.value.fix
    assert [r["entry"] for r in failed.value.payload["receipts"]] == [full.path]
    recorded = Index.model_validate_json((root / INDEX_NAME).read_text())
    assert recorded.entry_by_path(full.path).gate.passed and recorded.entry_by_path(twin.path).gate is None


def test_twins_are_compared_by_their_bits_not_their_values():
    nan = {"w": torch.tensor([1.0, float("nan")], dtype=torch.bfloat16)}
    assert equal_tensors(nan, {"w": nan["w"].clone()})  # torch.equal calls NaN unequal to itself
    assert not equal_tensors({"w": torch.tensor([0.0])}, {"w": torch.tensor([-0.0])})  # and -0.0 equal to 0.0
    assert not equal_tensors({"w": torch.zeros(2, 3)}, {"w": torch.zeros(3, 2)})
    assert equal_tensors(
        {"w": torch.arange(6.0).reshape(2, 3).t()}, {"w": torch.arange(6.0).reshape(2, 3).t().contiguous()}
    )


def test_smoke_keeps_the_runtimes_banner_and_loading_lines_off_stderr(tmp_path):
    """The official runtime prints a banner at import and 'Loading …' per model: neither reaches
    the user's streams (REGISTRY_DEBUG=1 shows them)."""

    root, base, entry = state_registry(tmp_path)
    args = [
        sys.executable,
        "-m",
        "registry",
        "smoke",
        entry.path,
        "-C",
        str(root),
        "--base-file",
        str(base),
        "--device",
        "cpu",
        "--json",
    ]
    done = subprocess.run(args, capture_output=True, text=True, env=user_environment(), timeout=600)
    assert done.returncode == 0 and json.loads(done.stdout)[0]["entry"] == entry.path, done.stderr
    assert done.stderr == "", done.stderr
    debug = subprocess.run(
        args, capture_output=True, text=True, env={**user_environment(), "REGISTRY_DEBUG": "1"}, timeout=600
    )
    assert debug.returncode == 0 and "Loading" in debug.stderr


# ---- each entry in its own format: the smoke sample ----------------------------------------------


def _greedy(model, ids: list[int], state, count: int) -> list[int]:
    """``count`` greedy tokens after ``ids``, no stop rule: what the sample must begin with."""
    logits, state = model.forward(ids, state)
    tokens = []
    for _ in range(count):
        tokens.append(int(torch.argmax(logits)))
        logits, state = model.forward(tokens[-1:], state)
    return tokens


def _trie():

    return TRIE_TOKENIZER(str(Path(rwkv.__file__).parent / VOCAB_NAME))


def test_each_entry_runs_a_sample_in_its_own_format(gated_registry):
    """State in g1k (its profile), MiSS in g1k-think (its method's default), the full fine-tune in
    the prompt its card states: the sample's tokens are the greedy continuation of that prompt on
    that entry's model, which random weights never end within the budget: reported, not a failure."""

    root, base, entries, receipts = gated_registry
    by_method = {r.method: r for r in receipts}
    base_t = load_tensors(base)
    own = {m: load_tensors(root / entries[m].path) for m in entries}
    models = {
        "state": (Rwkv7(base_t), Rwkv7(base_t).apply_state_file(own["state"])),
        "miss": (Rwkv7({**base_t, **dict(merged_weights(base_t, own["miss"], 2.0))}), None),
        "full": (Rwkv7(own["full"]), None),
    }
    expected = {
        "state": ("g1k", "profile", G1K_PROMPT),
        "miss": ("g1k-think", "default", G1K_THINK_PROMPT),
        "full": ("prompt", "prompt", SEED000_PROMPT),
    }
    trie = _trie()
    index = Index.model_validate_json((root / INDEX_NAME).read_text())
    for method, (name, source, prompt) in expected.items():
        sample = by_method[method].sample
        ids = trie.encode(prompt)
        model, state = models[method]
        assert (sample.format, sample.format_from) == (name, source), method
        assert sample.prompt_sha256 == sha256(prompt.encode()).hexdigest() and sample.prompt_tokens == len(ids)
        assert (sample.stop_tokens, sample.stop_texts) == ([0], ["\n\nUser:"])
        want = _greedy(model, ids, state, 16)
        assert sample.first_tokens == want and 0 not in want, method
        assert sample.text == trie.decodeBytes(want).decode("utf-8", errors="replace")
        assert (sample.tokens, sample.stop_reason, sample.stop_text_seen) == (32, "max_new_tokens", False)
        assert by_method[method].passed  # reported, not enforced
        assert index.entry_by_path(entries[method].path).gate.sample == sample  # what the card reads
    # the formats differ, so the samples do: the State and the MiSS run on the same base
    assert by_method["state"].sample.first_tokens != by_method["miss"].sample.first_tokens


def test_the_card_shows_the_smoke_sample_and_stays_current(gated_registry):

    root, _, entries, receipts = gated_registry
    card = (root / "README.md").read_text()
    assert "### 冒烟样例（不是跑分） · Smoke sample (not a benchmark)" in card
    assert "not a benchmark: the gate's verdict does not depend on it" in card
    rows = {line.split(" | ")[0].strip("| `"): line for line in card.splitlines() if line.startswith("| `")}
    name = entries["state"].path.split("/", 1)[0]
    for receipt in receipts:
        row = rows[receipt.entry.removeprefix(f"{name}/")]
        sample = receipt.sample
        assert md_cell(escaped(sample.text)) in row and "| 否 / no |" in row, row
        assert f"| 32 / 32（到上限 / budget） | {receipt.created[:10]}, cpu |" in row, row
    assert "| g1k |" in rows[entries["state"].path.removeprefix(f"{name}/")]
    assert (
        "| g1k-think（按方法的默认 / default for the method） |" in rows[entries["miss"].path.removeprefix(f"{name}/")]
    )
    assert "| 卡片上的提示格式 / the card's prompt format |" in rows[entries["full"].path.removeprefix(f"{name}/")]
    result = CliRunner().invoke(main, ["card", "-C", str(root), "--check"])
    assert result.exit_code == 0, result.output


def _a_word_it_writes(trie, tokens: list[int]) -> tuple[int, str]:
    """(k, word): the first of ``tokens`` after the first that is a plain word, where the text
    up to it decodes (the gate looks for a stop text in decodable text only) and does not hold
    the word before it."""
    for k in range(1, len(tokens)):
        head, piece = trie.decodeBytes(tokens[:k]), trie.decodeBytes(tokens[k : k + 1])
        word = piece.decode("ascii", errors="ignore").strip()
        try:
            (head + piece).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if piece.isascii() and len(word) >= 2 and word.isalpha() and word not in head.decode(errors="replace"):
            return k, word
    raise AssertionError(f"no plain word in {tokens}")


def test_the_cards_stop_rules_end_the_sample(tmp_path):
    """A full fine-tune's stated stop text and stop token end its sample where the model produces
    them: the receipt says the stop text came, after how many tokens, and cuts the text before it."""
    root, base, _ = state_registry(tmp_path)
    full = _tuned_full(root, base, tmp_path)
    describe(root, Target(path=full.path), Description(prompt_format=SEED000_PROMPT))
    [free] = smoke(root, [full.path], None, "cpu")
    k, stop = _a_word_it_writes(_trie(), free.sample.first_tokens)
    describe(root, Target(path=full.path), Description(stop_tokens=(0,), stop_texts=(stop,)))
    [stopped] = smoke(root, [full.path], None, "cpu")
    sample = stopped.sample
    assert (sample.stop_reason, sample.stop_text_seen, sample.tokens) == ("stop_text", True, k + 1)
    assert sample.first_tokens == free.sample.first_tokens[: k + 1] and stop not in sample.text
    assert sample.stop_texts == [stop] and sample.format == "prompt"
    # a stop token: the model's second token ends the sample before it
    describe(root, Target(path=full.path), Description(stop_tokens=(free.sample.first_tokens[1],), stop_texts=()))
    [token] = smoke(root, [full.path], None, "cpu")
    assert (token.sample.stop_reason, token.sample.tokens, token.sample.first_tokens) == (
        "stop_token",
        1,
        free.sample.first_tokens[:1],
    )
    assert token.passed and stopped.passed


GOLDEN = Path(__file__).parent / "golden"


def test_a_receipt_written_before_samples_is_still_trusted(tmp_path, monkeypatch, gated_registry):
    """A receipt the gate sealed and signed before samples existed (tests/golden, written by the
    previous version with a known key) still checks under its seal and signature, has no sample,
    and the card says so; a sample added to it afterwards breaks both."""

    key_dir = tmp_path / "config" / "rwkv-registry"
    key_dir.mkdir(parents=True)
    (key_dir / "receipt-key").write_text("0123456789abcdef" * 4 + "\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    old = Receipt.model_validate_json((GOLDEN / "receipt_before_samples.json").read_bytes())
    trusted = [TrustedKey.read(GOLDEN / "receipt_before_samples.pub", "--trust-gate-key")]
    assert old.sample is None and sealed_here(old) and signature_problem(old, trusted) is None
    assert gate_summary(old).sample is None
    _, _, _, receipts = gated_registry
    forged = old.model_copy(update={"sample": receipts[0].sample})
    assert not sealed_here(forged) and signature_problem(forged, trusted)[0] == "gate.bad-signature"
    # on the card: a weight gated before samples, beside one with a sample
    root = gated_registry[0]
    index = Index.model_validate_json((root / INDEX_NAME).read_text())
    index.entries[0].gate = gate_summary(old.model_copy(update={"file_sha256": index.entries[0].sha256}))
    card = render_card(index, None)
    assert "not recorded (gated before samples: run `registry smoke` again)" in card
    for entry in index.entries:
        entry.gate = gate_summary(old.model_copy(update={"file_sha256": entry.sha256}))
    assert "Smoke sample" not in render_card(index, None)  # no sample at all: the card is as it was
