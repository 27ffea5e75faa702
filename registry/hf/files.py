"""config.json and generation_config.json of an export: JSON from shapes and stop rules, no torch."""

from __future__ import annotations

import json
from typing import Any

from ..core.models import StopRules
from ..gate.prompts import STOP_TEXT, STOP_TOKEN
from .mapping import NORM_EPS

# What a weight with no recorded stop rules stops on: seed 000's rules, the gate's.
DEFAULT_STOP = StopRules(tokens=[STOP_TOKEN], texts=[STOP_TEXT])
TORCH_DTYPE_NAMES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}


def render(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def config_json(shape_config: dict[str, Any], dtype: str) -> dict[str, Any]:
    """fla's RWKV7Config: the shape fields read from the checkpoint, x070's constants, and the
    weights' dtype (``dtype``: a safetensors dtype name)."""
    return {
        "architectures": ["RWKV7ForCausalLM"],
        "model_type": "rwkv7",
        **shape_config,
        "hidden_act": "sqrelu",
        "norm_first": True,
        "norm_bias": True,
        "norm_eps": NORM_EPS,
        "attn_mode": "chunk",
        "fuse_norm": True,
        "tie_word_embeddings": False,
        "use_cache": True,
        "bos_token_id": STOP_TOKEN,
        "eos_token_id": STOP_TOKEN,
        "dtype": TORCH_DTYPE_NAMES.get(dtype, "float32"),
    }


def generation_config_json(stop: StopRules | None) -> dict[str, Any]:
    """Greedy decoding that stops on the weight's stop tokens (:data:`DEFAULT_STOP` when it records
    none) as ``eos_token_id``: a single token marks each.  Its stop texts (``\n\nUser:`` is three
    tokens) are left out: ``stop_strings`` here would make every plain ``generate()`` fail without
    ``tokenizer=``, so the card's snippet passes them to ``generate`` with the tokenizer instead
    (and cuts a consumed stop text, which Transformers keeps in the output)."""
    rules = stop or DEFAULT_STOP
    data: dict[str, Any] = {"bos_token_id": STOP_TOKEN, "pad_token_id": STOP_TOKEN, "do_sample": False}
    if rules.tokens:
        data["eos_token_id"] = rules.tokens[0] if len(rules.tokens) == 1 else list(rules.tokens)
    return data
