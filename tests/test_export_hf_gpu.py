"""fla's RWKV-7 on the exported folder against our runtime on the source .pth (needs CUDA: fla's
kernels are Triton kernels, which do not run on a CPU)."""

from __future__ import annotations

import warnings

import pytest
import torch

from registry.gate.prompts import PROMPTS
from registry.gate.runtime import Rwkv7
from registry.hf.tokenizer import trie_tokenizer
from registry.ops.export_hf import ExportRequest, export_hf

from .test_export_hf import hf_registry, world_base  # noqa: F401  (fixtures)

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
        assert float((got - want).abs().max()) / max(1.0, float(want.abs().max())) <= SCALED_TOLERANCE
        assert int(got.argmax()) == int(want.argmax())
        token = int(want.argmax())
        want_step = ours.forward([token], state)[0]
        got_step = model(torch.tensor([[token]], device="cuda"), past_key_values=out.past_key_values, use_cache=True).logits[0, -1].float()
        assert float((got_step - want_step).abs().max()) / max(1.0, float(want_step.abs().max())) <= SCALED_TOLERANCE
