"""A State file as fla's initial recurrent state: ``initial_state.safetensors``, used with the base export.

A State (rwkv_state_tune) holds per layer ``blocks.{i}.att.time_state`` ``[H, V, K]``: the official
runtime's WKV state ``state[3i+1]``, whose rows are indexed by the value channel and columns by
the key channel (its update adds ``v kᵀ``).  fla's RWKV-7 keeps per layer ``recurrent_state``
``[B, H, K, V]`` in float32 in its ``Cache`` (``chunk_rwkv7`` / ``fused_mul_recurrent_rwkv7``'s
``initial_state``), so the export holds ``model.layers.{i}.attn.recurrent_state`` = the
transpose of the last two axes, float32 (exact from bf16).  A State sets nothing else: both
runtimes start the token shifts (fla's ``conv_state`` and ``ffn_state``) at zero.

The names and :func:`misfit` are pure (no torch), so ``validate`` checks an export from its header
with the rule the export is checked with; :func:`fla_state` makes the tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..artifacts.rwkv7 import state_key
from ..core.names import STATE_WEIGHTS_NAME
from .mapping import tensor_misfit

if TYPE_CHECKING:
    import torch


def tensor_name(layer: int) -> str:
    return f"model.layers.{layer}.attn.recurrent_state"


def source_name(layer: int) -> str:
    """The State file's tensor that :func:`tensor_name` is made from."""
    return state_key(layer)


def misfit(base_config: Mapping[str, Any], found: Mapping[str, tuple[tuple[int, ...], str]]) -> str | None:
    """Why a State export does not fit the base export, or None when it does: ``base_config`` the
    base export's config.json, ``found`` the state file's tensors (name → (shape, safetensors dtype))."""
    head = int(base_config["head_dim"])
    heads = int(base_config["hidden_size"]) // head
    want = {tensor_name(i): ((heads, head, head), "F32") for i in range(int(base_config["num_hidden_layers"]))}
    return tensor_misfit(STATE_WEIGHTS_NAME, "recurrent state of the base export's config.json", want, found)


def fla_state(time_state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``recurrent_state[i] = time_state[i]ᵀ`` (last two axes) in float32, in layer order."""
    layers = len(time_state)
    return {tensor_name(i): time_state[source_name(i)].float().transpose(-1, -2).contiguous() for i in range(layers)}
