"""An RWKV-7 (x070) checkpoint as flash-linear-attention's ``RWKV7ForCausalLM``: names, shapes, config.

Pure functions of tensor names and shapes (no torch), so ``validate`` can check an export from its
headers alone.  The facts come from ``fla.models.rwkv7`` (fla 0.6.0): every x070 tensor has one
place in fla's model, reached in one of three ways:

* ``rename``: the same bytes under another name (``att.receptance.weight`` → ``attn.r_proj.weight``);
* ``flatten``: the same bytes, ``[1, 1, C]`` read as ``[C]`` (``att.k_k``, ``att.w0`` → a LoRA bias);
* ``transpose``: the low-rank matrices, ``x @ w1`` in x070 and ``nn.Linear`` (``x @ W.T``) in fla,
  so ``w1 [C, r]`` becomes ``w_lora.lora.0.weight [r, C]``: the same values, another byte order.

Layer 0 of an official file carries ``att.v0/v1/v2``, which neither runtime uses (layer 0 makes
``v_first``); fla's layer 0 has no ``v_lora``, so they are left out (:data:`DROPPED_SOURCES`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..artifacts.rwkv7 import HEAD_SIZE, SHAPE_TENSORS, VALUE_RESIDUAL, block_name, has_value_residual, shape_of
from ..core.errors import RegistryError

NORM_EPS = 1e-5  # x070's layer norms; fla's group norm uses head_dim * norm_eps = 64e-5, as x070
# The x070 tensors fla has no place for: layer 0's value residual (in official files, used by no runtime).
DROPPED_SOURCES = tuple(block_name(0, leaf) for leaf in VALUE_RESIDUAL)
Transform = Literal["rename", "flatten", "transpose"]

# (x070 leaf, fla leaf, transform), per layer; the fla order of RWKV7Block's state_dict.
_LAYER: tuple[tuple[str, str, Transform], ...] = (
    ("ln1.weight", "attn_norm.weight", "rename"),
    ("ln1.bias", "attn_norm.bias", "rename"),
    *((f"att.x_{m}", f"attn.x_{m}", "rename") for m in "rwkvag"),
    ("att.k_k", "attn.k_k", "flatten"),
    ("att.k_a", "attn.k_a", "flatten"),
    ("att.r_k", "attn.r_k", "rename"),
    ("att.receptance.weight", "attn.r_proj.weight", "rename"),
    ("att.key.weight", "attn.k_proj.weight", "rename"),
    ("att.value.weight", "attn.v_proj.weight", "rename"),
    ("att.output.weight", "attn.o_proj.weight", "rename"),
    ("att.w1", "attn.w_lora.lora.0.weight", "transpose"),
    ("att.w2", "attn.w_lora.lora.2.weight", "transpose"),
    ("att.w0", "attn.w_lora.lora.2.bias", "flatten"),
    ("att.v1", "attn.v_lora.lora.0.weight", "transpose"),
    ("att.v2", "attn.v_lora.lora.2.weight", "transpose"),
    ("att.v0", "attn.v_lora.lora.2.bias", "flatten"),
    ("att.a1", "attn.a_lora.lora.0.weight", "transpose"),
    ("att.a2", "attn.a_lora.lora.2.weight", "transpose"),
    ("att.a0", "attn.a_lora.lora.2.bias", "flatten"),
    ("att.g1", "attn.g_lora.lora.0.weight", "transpose"),
    ("att.g2", "attn.g_lora.lora.2.weight", "transpose"),
    ("att.ln_x.weight", "attn.g_norm.weight", "rename"),
    ("att.ln_x.bias", "attn.g_norm.bias", "rename"),
    ("ln2.weight", "ffn_norm.weight", "rename"),
    ("ln2.bias", "ffn_norm.bias", "rename"),
    ("ffn.x_k", "ffn.x_k", "flatten"),
    ("ffn.key.weight", "ffn.key.weight", "rename"),
    ("ffn.value.weight", "ffn.value.weight", "rename"),
)
# config.json's low-rank sizes, read from layer 1's (layer 0 has no v LoRA in fla) first matrices
_RANKS = {
    "decay_low_rank_dim": "att.w1",
    "a_low_rank_dim": "att.a1",
    "v_low_rank_dim": "att.v1",
    "gate_low_rank_dim": "att.g1",
}
# config.json's fields read from the checkpoint's shapes, in the order export-hf writes them
SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "head_dim", "num_heads", "intermediate_size", "vocab_size", *_RANKS)


@dataclass(frozen=True)
class Rule:
    """One fla tensor and the x070 tensor it is made from."""

    target: str
    source: str
    transform: Transform


def rules(n_layer: int) -> list[Rule]:
    """Every fla tensor of an ``n_layer`` model with its x070 source, in fla's order."""
    out = [Rule("model.embeddings.weight", "emb.weight", "rename")]
    for i in range(n_layer):
        if i == 0:
            out += [
                Rule("model.layers.0.pre_norm.weight", "blocks.0.ln0.weight", "rename"),
                Rule("model.layers.0.pre_norm.bias", "blocks.0.ln0.bias", "rename"),
            ]
        out += [
            Rule(f"model.layers.{i}.{dst}", f"blocks.{i}.{src}", how)
            for src, dst, how in _LAYER
            if has_value_residual(i) or src not in VALUE_RESIDUAL
        ]
    out += [
        Rule("model.norm.weight", "ln_out.weight", "rename"),
        Rule("model.norm.bias", "ln_out.bias", "rename"),
        Rule("lm_head.weight", "head.weight", "rename"),
    ]
    return out


def moved_shape(shape: Sequence[int], transform: Transform) -> tuple[int, ...]:
    """The fla shape of an x070 tensor of ``shape``."""
    if transform == "flatten":
        return (math.prod(shape),)
    if transform == "transpose":
        return tuple(reversed(shape))
    return tuple(shape)


def fla_shapes(config: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every tensor of fla's ``RWKV7ForCausalLM`` for this config.json, by name (fla's own sizes)."""
    c, v, f = int(config["hidden_size"]), int(config["vocab_size"]), int(config["intermediate_size"])
    heads, n = int(config["num_heads"]), int(config["head_dim"])
    rank = {key: int(config[key]) for key in _RANKS}
    per_layer: dict[str, tuple[int, ...]] = {
        "attn_norm.weight": (c,), "attn_norm.bias": (c,), "ffn_norm.weight": (c,), "ffn_norm.bias": (c,),
        **{f"attn.x_{m}": (1, 1, c) for m in "rwkvag"},
        "attn.k_k": (c,), "attn.k_a": (c,), "attn.r_k": (heads, n),
        "attn.r_proj.weight": (c, c), "attn.k_proj.weight": (c, c), "attn.v_proj.weight": (c, c), "attn.o_proj.weight": (c, c),
        "attn.g_norm.weight": (c,), "attn.g_norm.bias": (c,),
        "ffn.x_k": (c,), "ffn.key.weight": (f, c), "ffn.value.weight": (c, f),
    }  # fmt: skip
    for lora, key in (
        ("w", "decay_low_rank_dim"),
        ("v", "v_low_rank_dim"),
        ("a", "a_low_rank_dim"),
        ("g", "gate_low_rank_dim"),
    ):
        per_layer[f"attn.{lora}_lora.lora.0.weight"] = (rank[key], c)
        per_layer[f"attn.{lora}_lora.lora.2.weight"] = (c, rank[key])
        if lora != "g":  # fla's gate LoRA has no bias
            per_layer[f"attn.{lora}_lora.lora.2.bias"] = (c,)
    shapes: dict[str, tuple[int, ...]] = {"model.embeddings.weight": (v, c)}
    for i in range(int(config["num_hidden_layers"])):
        if i == 0:
            shapes["model.layers.0.pre_norm.weight"] = shapes["model.layers.0.pre_norm.bias"] = (c,)
        shapes.update(
            {
                f"model.layers.{i}.{leaf}": shape
                for leaf, shape in per_layer.items()
                if has_value_residual(i) or not leaf.startswith("attn.v_lora.")
            }
        )
    shapes.update({"model.norm.weight": (c,), "model.norm.bias": (c,), "lm_head.weight": (v, c)})
    return shapes


@dataclass(frozen=True)
class FlaPlan:
    """What an x070 checkpoint becomes: config.json's shape fields and one rule per fla tensor."""

    config: dict[str, Any]
    rules: list[Rule]
    dropped: list[str]


def _refuse(
    source: str | Path | None,
    message: str,
    fix: str = f"export an RWKV-7 (x070) checkpoint with head size {HEAD_SIZE} and all four LoRA blocks in every layer",
) -> RegistryError:
    return RegistryError("export.not-fla", source, message, fix)


def _shape_config(shapes: Mapping[str, Sequence[int]], source: str | Path | None) -> dict[str, Any]:
    for name in SHAPE_TENSORS:
        if name not in shapes:
            raise _refuse(source, f"missing {name}, so this is not an RWKV-7 (x070) checkpoint")
    arch = shape_of(shapes)
    if arch.head_size != HEAD_SIZE:
        raise _refuse(
            source,
            f"blocks.0.att.r_k is {arch.n_head}x{arch.head_size}: head size {arch.head_size}, and fla's RWKV-7 takes head size {HEAD_SIZE} only",
        )
    if arch.n_layer == 1:
        # fla 0.6's RWKV7Attention._initialize_weights divides by num_hidden_layers - 1, and runs
        # whenever the model is built (transformers 5 has no switch to skip it), from_pretrained too
        raise _refuse(
            source,
            "has 1 layer, and fla's RWKV-7 takes 2 or more layers only (its attention set-up divides by num_hidden_layers - 1)",
            "no Transformers export exists for a 1-layer model: publish the .pth, which the rwkv runtime loads",
        )
    config: dict[str, Any] = {
        "hidden_size": arch.n_embd, "num_hidden_layers": arch.n_layer, "head_dim": arch.head_size, "num_heads": arch.n_head,
        "intermediate_size": arch.dim_ffn, "vocab_size": arch.vocab_size,
    }  # fmt: skip
    for key, leaf in _RANKS.items():
        name = block_name(1, leaf)
        if name not in shapes:
            raise _refuse(source, f"missing {name} (fla's RWKV-7 has this LoRA block in every layer)")
        config[key] = shapes[name][-1]
    return config


def fla_plan(shapes: Mapping[str, Sequence[int]], source: str | Path | None = None) -> FlaPlan:
    """The fla rules for a checkpoint with these tensor shapes; refused, in one line, when no fla
    configuration has exactly these tensors (head size ≠ 64, a single layer, a missing LoRA
    block, another rank in one layer, a tensor fla has no place for)."""
    config = _shape_config(shapes, source)
    n_layer = config["num_hidden_layers"]
    plan = rules(n_layer)
    want = fla_shapes(config)
    for rule in plan:
        if rule.source not in shapes:
            raise _refuse(source, f"missing {rule.source} (fla's {rule.target} is made from it)")
        got = moved_shape(shapes[rule.source], rule.transform)
        if got != want[rule.target]:
            raise _refuse(
                source,
                f"{rule.source} is {tuple(shapes[rule.source])}, which makes {rule.target} {got}; fla's config from the other shapes needs {want[rule.target]}",
            )
    extra = sorted(set(shapes) - {r.source for r in plan} - set(DROPPED_SOURCES))
    if extra:
        raise _refuse(source, f"{len(extra)} tensor(s) fla's RWKV-7 has no place for, e.g. {extra[0]}")
    return FlaPlan(config, plan, [d for d in DROPPED_SOURCES if d in shapes])


def _natural(name: str) -> list[int | str]:
    """Sort key that puts layer 2 before layer 10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def tensor_misfit(
    file: str,
    what: str,
    want: Mapping[str, tuple[tuple[int, ...], str]],
    found: Mapping[str, tuple[tuple[int, ...], str]],
) -> str | None:
    """The first way ``found`` (name → (shape, safetensors dtype)) differs from ``want`` in
    ``file``, said as a finding, or None: ``what`` names the tensors ("miss_block its config
    makes", …)."""
    missing = sorted(set(want) - set(found), key=_natural)
    if missing:
        return f"{file} lacks {missing[0]} (the {want[missing[0]][1]} {want[missing[0]][0]} {what})"
    unexpected = sorted(set(found) - set(want), key=_natural)
    if unexpected:
        return f"{file} holds {unexpected[0]}, which is not a {what}"
    wrong = sorted((n for n in want if (tuple(found[n][0]), found[n][1]) != want[n]), key=_natural)
    if wrong:
        name = wrong[0]
        return f"{file}: {name} is {found[name][1]} {tuple(found[name][0])}, but the {what} is {want[name][1]} {want[name][0]}"
    return None
