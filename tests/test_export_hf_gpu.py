"""fla's RWKV-7 on the exported folder against our runtime on the source .pth (needs CUDA: fla's
kernels are Triton kernels, which do not run on a CPU)."""

from __future__ import annotations

import warnings

import pytest
import torch

from registry.gate.prompts import PROMPTS
from registry.gate.runtime import Rwkv7
from registry.hf.tokenizer import trie_tokenizer
from registry.ops.add import AddRequest, add_weight
from registry.ops.export_hf import ExportRequest, export_hf
from registry.synthetic import make_state_tensors, save_checkpoint

from .test_export_hf import WORLD, hf_registry, world_base  # noqa: F401  (fixtures)
from .test_ops_artifacts import train_json

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (fla's Triton kernels)")]
SCALED_TOLERANCE = 1e-2  # fla fp32 vs our fp32 recurrence: summation order and fla's chunked form


@torch.inference_mode()
def test_fla_logits_on_the_export_match_our_runtime_on_the_pth(hf_registry):  # noqa: F811
    import fla  # noqa: F401
    from transformers import AutoModelForCausalLM

    root, entry = hf_registry
    export = export_hf(root, ExportRequest(entry=entry.path))
    ours = Rwkv7.from_path(root / entry.path, dtype=torch.float32, device="cuda", wkv="reference")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_pretrained(root / export.path, dtype=torch.float32, device_map="cuda").eval()
    texts = [*PROMPTS.values(), "\n\n".join(PROMPTS.values()) * 2]  # the last is > 64 tokens: fla's chunked kernel
    for text in texts:
        ids = trie_tokenizer().encode(text)
        want, state = ours.forward(ids)
        out = model(torch.tensor([ids], device="cuda"), use_cache=True)
        got = out.logits[0, -1].float()
        assert _scaled(got, want) <= SCALED_TOLERANCE
        assert int(got.argmax()) == int(want.argmax())
        token = int(want.argmax())
        want_step = ours.forward([token], state)[0]
        got_step = model(torch.tensor([[token]], device="cuda"), past_key_values=out.past_key_values, use_cache=True).logits[0, -1].float()
        assert _scaled(got_step, want_step) <= SCALED_TOLERANCE


def _scaled(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).abs().max()) / max(1.0, float(want.float().abs().max()))


@torch.inference_mode()
@pytest.mark.parametrize("prompt", [*PROMPTS, "long-chunked"])
def test_generation_from_an_exported_state_matches_our_runtime_with_the_state(hf_registry, world_base, tmp_path, prompt):  # noqa: F811
    """The card's State snippet: fla's Cache holding the exported recurrent states, passed to
    ``generate``; its logits (after the prompt and after the first generated token) are our
    runtime's with the State applied, and far from those without it."""
    import fla  # noqa: F401
    from fla.models.utils import Cache
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root, _ = hf_registry
    name = world_base.name[:-4]
    # 30x the synthetic State's scale: at 0.1 its effect after a 60-token prompt was 0.007-0.010
    # scaled (H200, 2026-12-04), below the tolerance, so a dropped State could not have failed.
    state_file = save_checkpoint(tmp_path / "s1224.pth", {name: t * 30 for name, t in make_state_tensors(WORLD, seed=3).items()})
    entry = add_weight(root, AddRequest(state_file, name, "state", "v1.41", train_json(tmp_path / "s.json")))
    base_export = export_hf(root, ExportRequest(base=name, base_file=world_base))
    export = export_hf(root, ExportRequest(entry=entry.path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_pretrained(root / base_export.path, dtype=torch.float32, device_map="cuda").eval()
    tokenizer = AutoTokenizer.from_pretrained(root / base_export.path)  # generation_config.json's stop strings need it
    state = load_file(root / export.files[0].path)

    def initial_state():  # as the card writes it
        cache = Cache()
        for i in range(model.config.num_hidden_layers):
            cache.update(recurrent_state=state[f"model.layers.{i}.attn.recurrent_state"][None].to("cuda"), layer_idx=i, offset=0)
        return cache

    ours = Rwkv7.from_path(world_base, dtype=torch.float32, device="cuda", wkv="reference")
    time_state = torch.load(state_file, weights_only=True)
    text = PROMPTS[prompt] if prompt in PROMPTS else "\n\n".join(PROMPTS.values()) * 2  # > 64 tokens: fla's chunked kernel
    ids = trie_tokenizer().encode(text)
    want, after = ours.forward(ids, ours.apply_state_file(time_state))
    without = ours.forward(ids)[0]
    inputs = torch.tensor([ids], device="cuda")
    out = model.generate(
        inputs, attention_mask=torch.ones_like(inputs), past_key_values=initial_state(), max_new_tokens=2, do_sample=False,
        tokenizer=tokenizer, output_logits=True, return_dict_in_generate=True,
    )  # fmt: skip
    got = out.logits[0][0]
    assert _scaled(got, want) <= SCALED_TOLERANCE and int(got.argmax()) == int(want.argmax())
    assert _scaled(without, want) > 10 * SCALED_TOLERANCE  # the State moves the logits: a dropped state would fail
    token = int(out.sequences[0, len(ids)])
    want_step = ours.forward([token], after)[0]
    assert _scaled(out.logits[1][0], want_step) <= SCALED_TOLERANCE
