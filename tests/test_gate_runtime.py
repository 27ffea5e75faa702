"""CPU tests of the gate's WKV reference recurrence and its RWKV-7 runtime (no GPU needed).

The runtime is checked against the official ``rwkv==0.8.32`` package, run in a subprocess
because it reads RWKV_V7_ON / RWKV_CUDA_ON once, at import.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from safetensors.torch import save_file

from registry.artifacts.synthetic import (
    TinySpec,
    make_base_state_dict,
    make_state_tensors,
    save_checkpoint,
)
from registry.core.errors import RegistryError
from registry.gate.kernel import wkv7
from registry.gate.reference import make_wkv7_inputs, wkv7_reference
from registry.gate.runtime import (
    Rwkv7,
    from_package_state,
    load_tensors,
    merged_weights,
    patched,
    to_package_state,
)

SPEC = TinySpec(n_layer=2, n_embd=128)
PROMPT = [1, 5, 300, 7, 9000, 12, 65535, 3]
NEXT_TOKEN = 42
LOGIT_TOL = 1e-4


# ---- the WKV recurrence ------------------------------------------------------------------------


def naive_wkv7(r, w, k, v, a, b, state):
    """Row by row, as the kernel does it, written without the reference's broadcasting."""
    batch, steps, channels = r.shape
    heads = state.shape[1]
    n = channels // heads
    s = state.clone()
    y = torch.zeros(batch, steps, channels)
    for e in range(batch):
        for h in range(heads):
            lanes = slice(h * n, (h + 1) * n)
            for t in range(steps):
                decay = torch.exp(-torch.exp(w[e, t, lanes]))
                for i in range(n):
                    row = s[e, h, i]
                    row = (
                        row * decay
                        + torch.dot(row, a[e, t, lanes]) * b[e, t, lanes]
                        + v[e, t, h * n + i] * k[e, t, lanes]
                    )
                    s[e, h, i] = row
                    y[e, t, h * n + i] = torch.dot(row, r[e, t, lanes])
    return y, s


def test_reference_matches_naive_loop():
    inputs, state = make_wkv7_inputs(2, 4, 2, seed=3)
    want_y, want_state = naive_wkv7(*inputs, state)
    y, final = wkv7_reference(*inputs, state.clone())
    torch.testing.assert_close(y, want_y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(final, want_state, rtol=1e-5, atol=1e-5)


def test_reference_updates_state_in_place_and_carries_across_chunks():
    inputs, state = make_wkv7_inputs(1, 12, 2, seed=4)
    y_whole, state_whole = wkv7_reference(*inputs, state.clone())
    carried = state.clone()
    y_head, _ = wkv7_reference(*(t[:, :5].contiguous() for t in inputs), carried)
    y_tail, returned = wkv7_reference(*(t[:, 5:].contiguous() for t in inputs), carried)
    assert returned is carried
    torch.testing.assert_close(torch.cat((y_head, y_tail), 1), y_whole)
    torch.testing.assert_close(carried, state_whole)


def test_reference_batched_equals_per_sequence():
    inputs, state = make_wkv7_inputs(3, 6, 2, seed=5)
    y, final = wkv7_reference(*inputs, state.clone())
    for e in range(3):
        y_one, final_one = wkv7_reference(*(t[e : e + 1] for t in inputs), state[e : e + 1].clone())
        torch.testing.assert_close(y[e : e + 1], y_one)
        torch.testing.assert_close(final[e : e + 1], final_one)


def test_reference_keeps_bf16_inputs_dtype():
    inputs, state = make_wkv7_inputs(1, 3, 1, dtype=torch.bfloat16, seed=6)
    y, _ = wkv7_reference(*inputs, state)
    assert y.dtype == torch.bfloat16


def test_wkv7_on_cpu_tensors_is_the_reference():
    inputs, state = make_wkv7_inputs(1, 5, 2, seed=7)
    torch.testing.assert_close(
        wkv7(*inputs, state.clone())[0], wkv7_reference(*inputs, state.clone())[0], rtol=0, atol=0
    )


@pytest.mark.parametrize(
    "breakage",
    ["state_batch", "state_dtype", "input_shape", "input_dtype"],
)
def test_reference_rejects_bad_arguments(breakage):
    (r, w, k, v, a, b), state = make_wkv7_inputs(2, 3, 2, seed=8)
    if breakage == "state_batch":
        state = state[:1]
    elif breakage == "state_dtype":
        state = state.double()
    elif breakage == "input_shape":
        w = w[:, :2]
    else:
        k = k.bfloat16()
    with pytest.raises(ValueError, match="wkv7"):
        wkv7_reference(r, w, k, v, a, b, state)


# ---- the runtime against the rwkv package ------------------------------------------------------

PACKAGE_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["RWKV_V7_ON"] = "1"
    os.environ["RWKV_CUDA_ON"] = "0"
    import torch
    from rwkv.model import RWKV

    model_path, state_path, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    prompt, next_token = json.loads(sys.argv[4]), int(sys.argv[5])
    model = RWKV(model_path[: -len(".pth")], "cpu fp32")
    logits, state = model.forward(prompt, None)
    prompt_state = [s.clone() for s in state]
    logits_next, state = model.forward([next_token], state)
    tuned = model.generate_zero_state()
    for name, t in torch.load(state_path).items():
        tuned[3 * int(name.split(".")[1]) + 1] = t.float()
    logits_tuned, _ = model.forward(prompt, tuned)
    torch.save(
        dict(
            logits=logits, prompt_state=prompt_state, logits_next=logits_next,
            next_state=state, logits_tuned=logits_tuned,
        ),
        out_path,
    )
    """
)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gate")
    tensors = make_base_state_dict(SPEC)
    return {
        "dir": directory,
        "tensors": tensors,
        "model": save_checkpoint(directory / "model.pth", tensors),
        "state_tensors": make_state_tensors(SPEC, seed=2),
        "state": save_checkpoint(directory / "state.pth", make_state_tensors(SPEC, seed=2)),
    }


@pytest.fixture(scope="module")
def package(artifacts):
    out = artifacts["dir"] / "package.pt"
    args = [str(artifacts["model"]), str(artifacts["state"]), str(out), json.dumps(PROMPT), str(NEXT_TOKEN)]
    proc = subprocess.run([sys.executable, "-c", PACKAGE_SCRIPT, *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return torch.load(out)


@pytest.fixture(scope="module")
def model(artifacts):
    return Rwkv7.from_path(artifacts["model"], wkv="reference")


def assert_logits_close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max().item() <= LOGIT_TOL


def test_prompt_logits_match_package(model, package):
    logits, state = model.forward(PROMPT)
    assert_logits_close(logits, package["logits"])
    for ours, theirs in zip(to_package_state(state), package["prompt_state"], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)


def test_one_token_continuation_matches_package(model, package):
    _, state = model.forward(PROMPT)
    logits, state = model.forward([NEXT_TOKEN], state)
    assert_logits_close(logits, package["logits_next"])
    for ours, theirs in zip(to_package_state(state), package["next_state"], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)


def test_continuing_from_a_package_state(model, package):
    logits, _ = model.forward([NEXT_TOKEN], from_package_state(package["prompt_state"]))
    assert_logits_close(logits, package["logits_next"])


def test_state_file_changes_logits_and_matches_package(model, package, artifacts):
    tuned = model.apply_state_file(load_tensors(artifacts["state"]))
    logits, _ = model.forward(PROMPT, tuned)
    assert_logits_close(logits, package["logits_tuned"])
    assert (logits - package["logits"]).abs().max().item() > 100 * LOGIT_TOL


def test_forward_does_not_modify_the_given_state(model, artifacts):
    tuned = model.apply_state_file(artifacts["state_tensors"])
    before = [s.clone() for s in tuned]
    model.forward(PROMPT, tuned)
    for s, b in zip(tuned, before, strict=True):
        assert torch.equal(s, b)


def test_prefill_in_chunks_equals_one_prefill(model):
    logits, state = model.forward(PROMPT)
    _, head = model.forward(PROMPT[:3])
    logits_chunked, state_chunked = model.forward(PROMPT[3:], head)
    torch.testing.assert_close(logits_chunked, logits, rtol=1e-5, atol=1e-5)
    for a, b in zip(state_chunked, state, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_batched_forward_equals_per_sequence(model):
    batch = torch.tensor([PROMPT, list(reversed(PROMPT))])
    logits, state = model.forward(batch, model.zero_state(2))
    for e in range(2):
        logits_one, state_one = model.forward(batch[e].tolist())
        torch.testing.assert_close(logits[e], logits_one, rtol=1e-5, atol=1e-5)
        for a, b in zip(state, state_one, strict=True):
            torch.testing.assert_close(a[e : e + 1], b, rtol=1e-5, atol=1e-5)


def test_full_output_gives_every_position(model):
    logits_all, _ = model.forward(PROMPT, full_output=True)
    logits_last, _ = model.forward(PROMPT)
    assert logits_all.shape == (len(PROMPT), SPEC.vocab_size)
    torch.testing.assert_close(logits_all[-1], logits_last)


def test_layer0_value_tensors_are_optional(model, artifacts):
    trimmed = {
        k: v
        for k, v in artifacts["tensors"].items()
        if not k.startswith(("blocks.0.att.v0", "blocks.0.att.v1", "blocks.0.att.v2"))
    }
    logits, _ = Rwkv7(trimmed, wkv="reference").forward(PROMPT)
    torch.testing.assert_close(logits, model.forward(PROMPT)[0], rtol=0, atol=0)


def test_pth_safetensors_and_shards_load_the_same_model(model, artifacts, tmp_path):
    tensors = {k: v.contiguous() for k, v in artifacts["tensors"].items()}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    shards = tmp_path / "sharded"
    shards.mkdir()
    names = sorted(tensors)
    weight_map = {}
    for i, part in enumerate((names[: len(names) // 2], names[len(names) // 2 :])):
        shard = f"model-{i + 1:05d}-of-00002.safetensors"
        save_file({n: tensors[n] for n in part}, str(shards / shard))
        weight_map.update(dict.fromkeys(part, shard))
    (shards / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))

    want = model.forward(PROMPT)[0]
    for source in (tmp_path / "model.safetensors", shards, shards / "model.safetensors.index.json"):
        torch.testing.assert_close(Rwkv7.from_path(source, wkv="reference").forward(PROMPT)[0], want, rtol=0, atol=0)


def test_bf16_runtime_stays_close_to_fp32(model, artifacts):
    logits = Rwkv7(artifacts["tensors"], dtype=torch.bfloat16).forward(PROMPT)[0]
    assert logits.dtype == torch.bfloat16
    want = model.forward(PROMPT)[0]
    assert (logits.float() - want).abs().max().item() < 0.05 * want.abs().max().item()


def test_kernel_wkv_needs_cuda(artifacts):
    with pytest.raises(ValueError, match="cuda"):
        Rwkv7(artifacts["tensors"], wkv="kernel")


def test_package_state_conversion_round_trips(model):
    _, state = model.forward(PROMPT)
    package_state = to_package_state(state)
    assert package_state[1].shape == (SPEC.n_head, SPEC.head_size, SPEC.head_size)
    assert package_state[0].shape == (SPEC.n_embd,)
    for a, b in zip(from_package_state(package_state), state, strict=True):
        assert torch.equal(a, b)


# ---- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "code"),
    [
        (lambda t: t.pop("blocks.1.att.k_k"), "gate.weights-keys"),
        (lambda t: t.update({"blocks.1.ffn.s_emb.weight": torch.zeros(4)}), "gate.weights-keys"),
        (lambda t: t.update({"blocks.1.att.key.weight": torch.zeros(128, 64)}), "gate.weights-shape"),
        (lambda t: t.update({"blocks.1.att.w2": torch.zeros(7, 128)}), "gate.weights-shape"),
        (lambda t: t.update({"blocks.1.att.x_r": torch.zeros(1, 1, 64)}), "gate.weights-shape"),
    ],
)
def test_inconsistent_weights_are_refused(artifacts, edit, code):
    tensors = dict(artifacts["tensors"])
    edit(tensors)
    with pytest.raises(RegistryError) as caught:
        Rwkv7(tensors, source="bad.pth")
    assert caught.value.code == code and caught.value.file == "bad.pth"


def test_unreadable_weights_are_refused(tmp_path):
    broken = tmp_path / "broken.pth"
    broken.write_bytes(b"not a checkpoint")
    with pytest.raises(RegistryError, match="broken.pth"):
        load_tensors(broken)


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda t: t.pop("blocks.1.att.time_state"), "blocks.1.att.time_state"),
        (lambda t: t.update({"blocks.2.att.time_state": torch.zeros(2, 64, 64)}), "blocks.2.att.time_state"),
        (lambda t: t.update({"blocks.0.att.time_state": torch.zeros(4, 64, 64)}), "(4, 64, 64)"),
    ],
)
def test_mismatched_state_files_are_refused(model, artifacts, edit, fragment):
    tensors = dict(artifacts["state_tensors"])
    edit(tensors)
    with pytest.raises(RegistryError) as caught:
        model.apply_state_file(tensors, source="state.pth")
    assert caught.value.code == "gate.state-mismatch" and fragment in caught.value.message


# ---- MiSS merge ----------------------------------------------------------------------------------


def merge_miss(base, adapter, scale, **kwargs):
    """``base`` with the adapter merged in, as a new dict: what the gate copies into its runtimes."""
    return {**base, **dict(merged_weights(base, adapter, scale, **kwargs))}


@pytest.mark.parametrize("width", [12, 10, 2])  # divisible by the rank, not divisible, narrower
def test_merge_miss_tiles_the_block_over_the_input_columns(width):
    rank, out = 3, 4
    base = {"blocks.0.att.key.weight": torch.randn(out, width), "emb.weight": torch.randn(5, width)}
    block = torch.randn(out, rank)
    merged = merge_miss(base, {"blocks.0.att.key.weight": block}, 0.5)
    want = base["blocks.0.att.key.weight"].clone()
    for col in range(width):
        want[:, col] += 0.5 * block[:, col % rank]
    torch.testing.assert_close(merged["blocks.0.att.key.weight"], want)
    assert merged["emb.weight"] is base["emb.weight"]


def test_merge_miss_keeps_the_base_dtype_and_leaves_the_base_alone():
    weight = torch.randn(4, 8).bfloat16()
    base = {"blocks.1.ffn.key.weight": weight}
    merged = merge_miss(base, {"blocks.1.ffn.key.weight": torch.ones(4, 2)}, 1.0)
    assert merged["blocks.1.ffn.key.weight"].dtype == torch.bfloat16
    assert base["blocks.1.ffn.key.weight"] is weight and not torch.equal(merged["blocks.1.ffn.key.weight"], weight)


@pytest.mark.parametrize(
    ("adapter", "code"),
    [
        ({"blocks.0.att.gate.weight": torch.ones(4, 2)}, "gate.miss-target"),
        ({"blocks.0.att.key.weight": torch.ones(5, 2)}, "gate.miss-shape"),
        ({"blocks.0.att.key.lora_A": torch.ones(4, 2)}, "gate.miss-key"),
    ],
)
def test_merge_miss_refuses_adapters_that_do_not_fit(adapter, code):
    with pytest.raises(RegistryError) as caught:
        merge_miss({"blocks.0.att.key.weight": torch.zeros(4, 8)}, adapter, 1.0, source="adapter.pth")
    assert caught.value.code == code and caught.value.file == "adapter.pth"


# ---- generation ----------------------------------------------------------------------------------


def test_generate_cuts_at_the_stop_text(model):
    def decode(tokens):  # the model "starts the next turn" on its third token
        return "abc"[: len(tokens)] + ("\n\nUser: more" if len(tokens) >= 3 else "")

    result = model.generate(PROMPT, 10, decode=decode)
    assert (result.text, len(result.tokens), result.stop_reason) == ("abc", 3, "stop_text")


def test_generate_is_greedy_and_honours_the_budget(model):
    result = model.generate(PROMPT, 3, decode=lambda tokens: " ".join(map(str, tokens)))
    logits, state = model.forward(PROMPT)
    first = int(torch.argmax(logits))
    second = int(torch.argmax(model.forward([first], state)[0]))
    assert result.stop_reason == "max_new_tokens" and result.tokens[:2] == [first, second] and len(result.tokens) == 3


def test_generate_stops_on_token_zero(artifacts):
    tensors = dict(artifacts["tensors"])
    tensors["ln_out.weight"] = torch.zeros(SPEC.n_embd)
    tensors["ln_out.bias"] = torch.ones(SPEC.n_embd)
    head = tensors["head.weight"].clone()
    head[0] = 1.0  # logit of token 0 = n_embd, far above any other
    tensors["head.weight"] = head
    result = Rwkv7(tensors).generate(PROMPT, 5, decode=lambda tokens: "x" * len(tokens))
    assert (result.tokens, result.text, result.stop_reason) == ([], "", "stop_token")


def test_fp32_view_of_a_bf16_model_equals_an_fp32_model_without_copying(artifacts):
    """The gate's fp32 reference runs on the bf16 model's stored weights, converted layer by layer."""
    tensors = {k: v.to(torch.bfloat16) for k, v in artifacts["tensors"].items()}
    stored = Rwkv7(tensors, dtype=torch.bfloat16)
    view = stored.computing_in(torch.float32, "reference")
    assert all(a is b for a, b in zip(view.stored_weights().values(), stored.stored_weights().values(), strict=True))
    want = Rwkv7(tensors, dtype=torch.float32).forward(PROMPT)[0]
    assert torch.equal(view.forward(PROMPT)[0], want)


def test_a_runtime_never_shares_the_callers_tensors(artifacts):
    tensors = artifacts["tensors"]
    model = Rwkv7(tensors)
    name = "blocks.1.att.key.weight"
    model.replace_weight(name, torch.zeros_like(tensors[name]))
    assert tensors[name].abs().sum() > 0 and model.stored_weights()[name].abs().sum() == 0


def test_a_runtime_stores_contiguous_weights_whatever_the_callers_strides(artifacts):
    """An export read back hands the low-rank matrices as transposed views; on CUDA a GEMM on a
    transposed operand rounds differently, so the same weights would give other bf16 logits
    (seen on the H200: the 7.2B export read back was not bit-equal to its .pth)."""
    tensors = artifacts["tensors"]
    strided = {k: (v.t().contiguous().t() if v.dim() == 2 else v) for k, v in tensors.items()}
    assert not strided["blocks.1.att.w1"].is_contiguous() and torch.equal(
        strided["blocks.1.att.w1"], tensors["blocks.1.att.w1"]
    )
    stored = Rwkv7(strided).stored_weights()
    assert all(t.is_contiguous() for t in stored.values())
    assert all(
        torch.equal(t, want) for t, want in zip(stored.values(), Rwkv7(tensors).stored_weights().values(), strict=True)
    )


def test_a_patch_is_undone_bit_exactly_in_both_runtimes(artifacts, tmp_path):
    """What a multi-entry gate does per MiSS entry: the official runtime is built on our runtime's
    tensors (one copy for both), a merge into them is seen by both, and the pristine values, from
    the host's checkpoint or from clones of only the touched Linears, restore both bit-exactly."""
    base = {k: v.to(torch.bfloat16) for k, v in artifacts["tensors"].items()}
    adapter = {
        "blocks.0.att.key.weight": torch.randn(128, 8).bfloat16(),
        "blocks.1.ffn.value.weight": torch.randn(128, 8).bfloat16(),
    }
    path = save_checkpoint(tmp_path / "rwkv7-restore.pth", base)
    script = textwrap.dedent(f"""
        import torch
        from pathlib import Path
        from registry.gate.official import load_official
        from registry.gate.runtime import Rwkv7, merged_weights, patched
        base = torch.load({str(path)!r}, weights_only=True, mmap=True)
        adapter = torch.load({str(tmp_path / "adapter.pt")!r}, weights_only=True)
        ours = Rwkv7(base)
        official = load_official(Path({str(path)!r}), "cpu", ours.checkpoint())
        storages = {{t.untyped_storage().data_ptr() for t in ours.checkpoint().values()}}
        z = official.model.z
        own = sorted(k for k, v in z.items() if v.numel() and v.untyped_storage().data_ptr() not in storages)
        assert own == ["emb.weight"], own  # its embedding with ln0 applied is its own; every other tensor is ours
        before = (
            {{k: v.clone() for k, v in ours.stored_weights().items()}},
            {{k: v.clone() for k, v in z.items()}},
        )
        plain = ours.forward([1, 2, 3])[0], official.logits([1, 2, 3], None)[0]
        for pristine in (base, {{n: ours.weight(n).clone() for n in adapter}}):
            with patched(ours.replace_weight, pristine, merged_weights(ours.checkpoint(), adapter, 2.0)):
                assert not torch.equal(ours.forward([1, 2, 3])[0], plain[0])
                assert not torch.equal(official.logits([1, 2, 3], None)[0], plain[1])
            assert all(torch.equal(v, before[0][k]) for k, v in ours.stored_weights().items())
            assert all(torch.equal(v, before[1][k]) for k, v in z.items())
            assert torch.equal(ours.forward([1, 2, 3])[0], plain[0])
            assert torch.equal(official.logits([1, 2, 3], None)[0], plain[1])
        print("restored")
    """)
    torch.save(adapter, tmp_path / "adapter.pt")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0 and "restored" in proc.stdout, proc.stderr[-2000:]


def test_a_patch_left_in_is_not_undone(artifacts):
    """The group's last entry leaves its merge in (nothing reads the weights after it)."""
    base = artifacts["tensors"]
    ours = Rwkv7(base)
    name = "blocks.1.att.key.weight"
    with patched(ours.replace_weight, base, [(name, torch.zeros_like(base[name]))], undo=False):
        pass
    assert ours.weight(name).abs().sum() == 0


def test_the_checkpoint_view_is_the_stored_tensors_in_the_files_layout(artifacts):
    tensors = artifacts["tensors"]
    ours = Rwkv7(tensors)
    view = ours.checkpoint()
    assert set(view) == set(tensors) - {"blocks.0.att.v0", "blocks.0.att.v1", "blocks.0.att.v2"}
    assert all(torch.equal(view[k], tensors[k].float()) and view[k].shape == tensors[k].shape for k in view)
    stored = {
        t.untyped_storage().data_ptr() for t in (*ours.stored_weights().values(), ours._emb, *ours._outer.values())
    }
    assert {t.untyped_storage().data_ptr() for t in view.values()} == stored  # views: nothing copied
