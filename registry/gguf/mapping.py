"""An RWKV-7 (x070) checkpoint as llama.cpp's ``rwkv7`` GGUF: tensor names, layouts, storage types
and metadata, as pure functions of names and shapes (no torch, no gguf package).

The facts are those of llama.cpp's own converter (``convert_hf_to_gguf.py``'s ``Rwkv7Model`` and
``prepare_tensors``, gguf-py 0.19.0's constants; llama-cpp-python 0.3.36's vendored llama.cpp):

* names: ``emb.weight`` → ``token_embd.weight``, ``blocks.0.ln0`` → ``token_embd_norm``,
  ``ln1``/``ln2`` → ``blk.N.attn_norm``/``attn_norm_2``, ``att.X`` → ``blk.N.time_mix_X``
  (``receptance``/``key``/``value``/``output``, ``ln_x`` → ``time_mix_ln``), ``ffn.x_k``/``key``/``value``
  → ``blk.N.channel_mix_lerp_k``/``channel_mix_key``/``channel_mix_value``, ``ln_out`` → ``output_norm``,
  ``head`` → ``output``;
* layouts: every ``[1, 1, C]`` vector squeezed to ``[C]``, ``r_k [H, N]`` flattened to ``[H*N]``, the
  low-rank matrices (``w1 w2 a1 a2 v1 v2 g1 g2``) transposed (x070 computes ``x @ w1``, ggml
  ``w1 · x`` over rows), and the six token-shift mixes ``x_r x_w x_k x_v x_a x_g`` stacked into one
  ``time_mix_lerp_fused [6, 1, 1, C]`` in that order;
* layer 0's ``v0/v1/v2`` (in official files, used by no runtime) are replaced by copies of
  ``a0/a1/a2``, which is what the converter writes: llama.cpp requires the tensors and ignores them;
* storage: 1-D tensors, ``*_norm.weight``, biases, ``time_mix_w1/w2`` and ``time_mix_lerp_fused``
  stay float32; the others take the file's type (f16, bf16, q8_0; q8_0 needs rows of a multiple
  of 32 values, else f16).  k-quants are made from a lossless GGUF by llama.cpp's own quantizer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..artifacts.rwkv7 import HEAD_SIZE, VALUE_RESIDUAL, has_value_residual
from ..hf.mapping import NORM_EPS, fla_plan

ARCH = "rwkv7"
CONTEXT_LENGTH = 1048576  # RWKV is not context-limited; the converter writes this
LERP_ORDER = "rwkvag"  # time_mix_lerp_fused's rows: x_r, x_w, x_k, x_v, x_a, x_g
EOT_TOKEN = 261  # "\n\n": the converter's end-of-turn token for the world vocabulary
# Types made with the gguf package directly (from the source, each tensor once) and types that
# llama.cpp's quantizer makes from a lossless GGUF (ggml file type ids, llama.h's LLAMA_FTYPE_*).
DIRECT_TYPES = {"f16": 1, "bf16": 32, "q8_0": 7}
QUANTIZER_TYPES = {"q6_k": 18, "q5_k_m": 17, "q4_k_m": 15}
LOSSLESS_FTYPE = {"F32": 0, "F16": 1, "BF16": 32}  # the intermediate file a k-quant is made from
Transform = Literal["rename", "squeeze", "flatten", "transpose", "stack"]
_FORCED_F32_SUFFIXES = ("_norm.weight", "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_lerp_fused.weight")

_LAYER: tuple[tuple[str, str, Transform], ...] = (
    ("ln1.weight", "attn_norm.weight", "rename"),
    ("ln1.bias", "attn_norm.bias", "rename"),
    ("ln2.weight", "attn_norm_2.weight", "rename"),
    ("ln2.bias", "attn_norm_2.bias", "rename"),
    *((f"att.{x}{n}", f"time_mix_{x}{n}.weight", "transpose") for x in "wav" for n in "12"),
    *((f"att.{x}0", f"time_mix_{x}0.weight", "squeeze") for x in "wav"),
    ("att.g1", "time_mix_g1.weight", "transpose"),
    ("att.g2", "time_mix_g2.weight", "transpose"),
    ("att.k_k", "time_mix_k_k.weight", "squeeze"),
    ("att.k_a", "time_mix_k_a.weight", "squeeze"),
    ("att.r_k", "time_mix_r_k.weight", "flatten"),
    ("att.key.weight", "time_mix_key.weight", "rename"),
    ("att.value.weight", "time_mix_value.weight", "rename"),
    ("att.receptance.weight", "time_mix_receptance.weight", "rename"),
    ("att.output.weight", "time_mix_output.weight", "rename"),
    ("att.ln_x.weight", "time_mix_ln.weight", "rename"),
    ("att.ln_x.bias", "time_mix_ln.bias", "rename"),
    ("ffn.x_k", "channel_mix_lerp_k.weight", "squeeze"),
    ("ffn.key.weight", "channel_mix_key.weight", "rename"),
    ("ffn.value.weight", "channel_mix_value.weight", "rename"),
)


@dataclass(frozen=True)
class Rule:
    """One GGUF tensor, the x070 tensor(s) it is made from, and how."""

    target: str
    sources: tuple[str, ...]
    transform: Transform


def rules(n_layer: int) -> list[Rule]:
    """Every GGUF tensor of an ``n_layer`` model with its x070 source(s), in the converter's order."""
    out = [Rule("token_embd.weight", ("emb.weight",), "rename")]
    out += [Rule(f"token_embd_norm.{leaf}", (f"blocks.0.ln0.{leaf}",), "rename") for leaf in ("weight", "bias")]
    for i in range(n_layer):
        for src, dst, how in _LAYER:
            if not has_value_residual(i) and src in VALUE_RESIDUAL:
                src = src.replace("att.v", "att.a")  # the converter's stand-ins for layer 0's unused v0/v1/v2
            out.append(Rule(f"blk.{i}.{dst}", (f"blocks.{i}.{src}",), how))
        out.append(
            Rule(f"blk.{i}.time_mix_lerp_fused.weight", tuple(f"blocks.{i}.att.x_{m}" for m in LERP_ORDER), "stack")
        )
    out += [Rule(f"output_norm.{leaf}", (f"ln_out.{leaf}",), "rename") for leaf in ("weight", "bias")]
    out.append(Rule("output.weight", ("head.weight",), "rename"))
    return out


def target_shape(rule: Rule, shapes: Mapping[str, Sequence[int]]) -> tuple[int, ...]:
    """The GGUF (numpy-order) shape of ``rule``'s tensor."""
    first = tuple(shapes[rule.sources[0]])
    if rule.transform == "transpose":
        return tuple(reversed(first))
    if rule.transform in ("squeeze", "flatten"):
        return (_product(first),)
    if rule.transform == "stack":
        return (len(rule.sources), *first)
    return first


def _product(shape: Sequence[int]) -> int:
    out = 1
    for n in shape:
        out *= n
    return out


def storage_type(target: str, shape: Sequence[int], gguf_type: str) -> str:
    """The ggml type name a tensor is stored as in a file of ``gguf_type`` made directly (f16,
    bf16, q8_0): the converter's rules (see the module docstring)."""
    if len(shape) <= 1 or not target.endswith(".weight") or target.endswith(_FORCED_F32_SUFFIXES):
        return "F32"
    if gguf_type == "q8_0" and shape[-1] % 32:
        return "F16"  # the converter's fallback: Q8_0 blocks are 32 values of a row
    return {"f16": "F16", "bf16": "BF16", "q8_0": "Q8_0"}[gguf_type]


@dataclass(frozen=True)
class GgufPlan:
    """What an x070 checkpoint becomes: the shape fields, one rule per tensor, the dropped tensors."""

    config: dict[str, Any]
    rules: list[Rule]
    dropped: list[str]


def gguf_plan(shapes: Mapping[str, Sequence[int]], source: str | Path | None = None) -> GgufPlan:
    """The GGUF rules for a checkpoint with these shapes; refused, in one line, as the Transformers
    export refuses (the shape checks are those of :func:`registry.hf.mapping.fla_plan`: head size
    64, two or more layers, every LoRA block in every layer, nothing unknown)."""
    fla = fla_plan(shapes, source)
    plan = rules(fla.config["num_hidden_layers"])
    used = {s for r in plan for s in r.sources}
    return GgufPlan(fla.config, plan, sorted(set(shapes) - used))


def metadata(config: Mapping[str, Any], file_type: int) -> dict[str, Any]:
    """The rwkv7 keys llama.cpp reads (``general.architecture`` is the writer's), as the converter
    writes them; ``head_count`` 0 is required and unused."""
    return {
        f"{ARCH}.context_length": CONTEXT_LENGTH,
        f"{ARCH}.embedding_length": int(config["hidden_size"]),
        f"{ARCH}.block_count": int(config["num_hidden_layers"]),
        f"{ARCH}.attention.layer_norm_epsilon": NORM_EPS,
        f"{ARCH}.wkv.head_size": HEAD_SIZE,
        f"{ARCH}.attention.decay_lora_rank": int(config["decay_low_rank_dim"]),
        f"{ARCH}.attention.iclr_lora_rank": int(config["a_low_rank_dim"]),
        f"{ARCH}.attention.value_residual_mix_lora_rank": int(config["v_low_rank_dim"]),
        f"{ARCH}.attention.gate_lora_rank": int(config["gate_low_rank_dim"]),
        f"{ARCH}.feed_forward_length": int(config["intermediate_size"]),
        "general.file_type": file_type,
        f"{ARCH}.attention.head_count": 0,
    }


def lineage_metadata(source_sha256: str, base_sha256: str, gguf_type: str, merged: bool) -> dict[str, str]:
    """The registry's own keys: what the file was made from (validate checks them against index.json)."""
    return {
        "rwkv_registry.source_sha256": source_sha256,
        "rwkv_registry.base_sha256": base_sha256,
        "rwkv_registry.type": gguf_type,
        "rwkv_registry.merged": "miss" if merged else "no",
    }


def world_tokens(vocab: Mapping[int, bytes], vocab_size: int) -> tuple[list[str], list[int]]:
    """llama.cpp's ``rwkv`` tokenizer list for the world vocabulary: id 0 ``<s>`` (control), each
    token as ``repr(bytes)[2:-1]`` (llama.cpp unescapes it), ``[PADi]`` (unused) up to the model's
    vocabulary size; and the token types (gguf's TokenType: 1 normal, 3 control, 5 unused)."""
    ids = sorted(vocab)
    if ids != list(range(1, len(ids) + 1)) or len(ids) + 1 > vocab_size:
        raise ValueError(f"the vocabulary's ids are not 1..{len(ids)} within a model of {vocab_size}")
    tokens = ["<s>", *(repr(vocab[i])[2:-1] for i in ids)]
    types = [3] + [1] * len(ids)
    tokens += [f"[PAD{i}]" for i in range(len(tokens), vocab_size)]
    types += [5] * (vocab_size - len(types))
    return tokens, types
