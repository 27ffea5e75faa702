"""The RWKV-7 ("x070") checkpoint's vocabulary, in one place: what every reader of a checkpoint
(inspect, the gate, the Transformers and GGUF exports and their checks, the synthetic builders)
means by a key name, a layer, a head size and a model's shape.  Names and shapes only: no torch.

* key names: the global tensors (``emb.weight`` … ``head.weight``) and, per layer,
  ``blocks.<i>.<part>`` (:func:`block_key` parses one, :func:`block_name` makes one);
* the head size every published checkpoint, fla's kernels and the gate's CUDA kernel use;
* the value residual: layer 0 makes ``v_first``; every later layer mixes it into its value through
  ``att.v0/v1/v2``.  Official files still carry an unused ``blocks.0.att.v0/v1/v2``, others drop it;
* a model's shape (:class:`~registry.core.models.Architecture`, the one type, recorded in
  index.json) derived from a state dict's or a header's names and shapes (:func:`shape_of`);
* the Linears rwkv_miss_tune adapts by default (:data:`MISS_TARGETS`) and their shapes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..core.errors import RegistryError
from ..core.models import Architecture

HEAD_SIZE = 64  # every published RWKV-7 checkpoint, fla's RWKV-7 kernels and the gate's CUDA kernel (its N)

GLOBAL_KEYS = ("emb.weight", "blocks.0.ln0.weight", "blocks.0.ln0.bias", "ln_out.weight", "ln_out.bias", "head.weight")
MIX_KEYS = ("x_r", "x_w", "x_k", "x_v", "x_a", "x_g")  # the token-shift mixes, in the trainer's order
LORA_KEYS = ("w", "a", "v", "g")  # the low-rank blocks: att.<x>1 [C, rank] and att.<x>2 [rank, C]
# The Linears of a block, in the order they appear in it.
LINEARS = ("att.receptance", "att.key", "att.value", "att.output", "ffn.key", "ffn.value")
# The Linears rwkv_miss_tune adapts by default: all of them.
MISS_TARGETS: tuple[str, ...] = LINEARS
# The value residual's mix: present in every layer but 0 (see the module docstring).
VALUE_RESIDUAL = ("att.v0", "att.v1", "att.v2")
# Every per-layer tensor a runtime uses.
LAYER_KEYS = (
    "ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias",
    *(f"att.{m}" for m in MIX_KEYS),
    "att.w0", "att.a0", "att.v0", "att.k_k", "att.k_a", "att.r_k",
    *(f"att.{x}{n}" for x in LORA_KEYS for n in (1, 2)),
    *(f"{linear}.weight" for linear in LINEARS[:4]),
    "att.ln_x.weight", "att.ln_x.bias",
    "ffn.x_k", *(f"{linear}.weight" for linear in LINEARS[4:]),
)  # fmt: skip
# Per-layer keys only x070 has, plus the Linears every layer needs: what marks a file as RWKV-7.
X070_MARKERS = ("att.w0", "att.a0", "att.k_k", "att.r_k", *(f"{linear}.weight" for linear in LINEARS))
# Keys of earlier RWKV generations, most specific first, with what they betray.
OLDER_GENERATIONS = (
    ("att.time_maa_x", "RWKV-6 (x060)"),
    ("att.time_faaaa", "RWKV-6 (x060)"),
    ("att.time_first", "RWKV-4/5"),
    ("att.time_mix_k", "RWKV-4/5"),
    ("att.time_decay", "RWKV-6 or earlier"),
)
STATE_PART = "att.time_state"  # a State file's one tensor per layer, [H, N, N]
# The tensors a model's shape is read from (:func:`shape_of`), in the order readers look for them.
SHAPE_TENSORS = ("emb.weight", "blocks.0.att.r_k", "blocks.0.ffn.key.weight")

_BLOCK_KEY = re.compile(r"blocks\.(\d+)\.(.*)", re.DOTALL)
_LINEAR_WEIGHT = re.compile(r"(att|ffn)\.\w+\.weight")
_MISS_TARGET = re.compile(r"(" + "|".join(re.escape(t) for t in MISS_TARGETS) + r")\.weight")


def block_key(name: str) -> tuple[int, str] | None:
    """``blocks.<i>.<part>`` → ``(i, part)``; None for a global tensor's name."""
    match = _BLOCK_KEY.fullmatch(name)
    return (int(match[1]), match[2]) if match else None


def block_name(layer: int, part: str) -> str:
    return f"blocks.{layer}.{part}"


def state_key(layer: int) -> str:
    """A State file's tensor of ``layer``."""
    return block_name(layer, STATE_PART)


def state_layer(name: str) -> int | None:
    """The layer of a State file's tensor name; None for any other name."""
    key = block_key(name)
    return key[0] if key and key[1] == STATE_PART else None


def layer_count(names: Iterable[str]) -> int:
    """Highest block index + 1 among ``names`` (0 when none is a block's)."""
    layers = [key[0] for name in names if (key := block_key(name))]
    return max(layers) + 1 if layers else 0


def has_value_residual(layer: int) -> bool:
    """Whether ``layer`` mixes ``v_first`` into its value (needs ``att.v0/v1/v2``): every layer but 0."""
    return layer > 0


def layer_keys(layer: int) -> tuple[str, ...]:
    """The block parts a runtime uses in ``layer`` (layer 0 without the value residual)."""
    return LAYER_KEYS if has_value_residual(layer) else tuple(k for k in LAYER_KEYS if k not in VALUE_RESIDUAL)


def required_keys(layer: int) -> tuple[str, ...]:
    """The block parts a file must hold in ``layer`` to be read as an x070 checkpoint."""
    return X070_MARKERS + (VALUE_RESIDUAL if has_value_residual(layer) else ())


def is_linear_weight(name: str) -> bool:
    """``blocks.<i>.(att|ffn).<linear>.weight``: a name a MiSS block can be merged into."""
    key = block_key(name)
    return key is not None and _LINEAR_WEIGHT.fullmatch(key[1]) is not None


def miss_target_order(name: str) -> tuple[int, int] | None:
    """(layer, place in the block) of a default MiSS target's weight name; None for any other name."""
    key = block_key(name)
    match = _MISS_TARGET.fullmatch(key[1]) if key else None
    return (key[0], MISS_TARGETS.index(match[1])) if key and match else None


def shape_of(shapes: Mapping[str, Sequence[int]]) -> Architecture:
    """A checkpoint's shape from its tensors' names and shapes (a state dict's or a header's):
    ``n_layer`` = highest block index + 1, ``vocab_size, n_embd`` = ``emb.weight``'s shape,
    ``n_head, head_size`` = ``blocks.0.att.r_k``'s, ``dim_ffn`` = rows of ``blocks.0.ffn.key.weight``.
    The caller has checked that :data:`SHAPE_TENSORS` are present (each reader refuses in its words)."""
    vocab_size, n_embd = shapes["emb.weight"]
    n_head, head_size = shapes["blocks.0.att.r_k"]
    return Architecture(
        n_layer=layer_count(shapes),
        n_embd=n_embd,
        head_size=head_size,
        vocab_size=vocab_size,
        n_head=n_head,
        dim_ffn=shapes["blocks.0.ffn.key.weight"][0],
    )


def heads(arch: Architecture) -> int:
    """``n_head``, or what ``n_embd`` and ``head_size`` make it where a base did not record it."""
    return arch.n_head or arch.n_embd // arch.head_size


def linear_shapes(arch: Architecture) -> dict[str, tuple[int, int]]:
    """Each Linear's weight shape ``[out, in]`` by block part (``att.key.weight``), the same in every layer."""
    if arch.dim_ffn is None:
        raise RegistryError(
            "base.architecture-incomplete",
            None,
            "the base's dim_ffn is unknown, so its ffn Linear shapes are too",
            "register the base from its .pth file",
        )
    c, f = arch.n_embd, arch.dim_ffn
    per_linear = {linear: (c, c) for linear in LINEARS}
    per_linear.update({"ffn.key": (f, c), "ffn.value": (c, f)})
    return {f"{linear}.weight": shape for linear, shape in per_linear.items()}


def recorded_differences(
    arch: Architecture, claimed: Mapping[str, Any], fields: Mapping[str, str]
) -> Iterator[tuple[str, Any, int]]:
    """``(key, claimed value, recorded value)`` for each shape field a file claims otherwise than
    the base's recorded ``arch``: ``fields`` maps the file's keys to Architecture's field names
    (fields the base did not record are skipped).  The Transformers and GGUF checks share it."""
    for key, field in fields.items():
        recorded = getattr(arch, field)
        if recorded is not None and claimed.get(key) != recorded:
            yield key, claimed.get(key), recorded
