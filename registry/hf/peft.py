"""A MiSS adapter as a PEFT adapter on the exported base: ``adapter_config.json`` + ``adapter_model.safetensors``.

PEFT's MiSS (``MissConfig``, default ``init_weights=True``) holds ``miss_block`` B ``[r, out]`` per
target Linear and merges ``W' = W + Bᵀ.repeat(1, ceil(in / r))[:, :in]``; ours merges
``W' = W + scale · D.repeat(1, ceil(in / rank))[:, :in]`` with ``D [out, rank]``.  They are the same
function with ``B = (scale · D)ᵀ`` computed in float32, as :func:`~registry.artifacts.miss.merge_delta`
computes it (docs/formats.md), so the merge gives the same bits.

The JSON, the names and :func:`misfit` are pure (no torch, no PEFT), so ``validate`` checks an
export from its files with the same rule the export is checked with; :func:`peft_tensors` makes
the tensors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..artifacts.rwkv7 import block_key
from ..core.names import ADAPTER_CONFIG_NAME, ADAPTER_WEIGHTS_NAME
from .mapping import fla_shapes, rules, tensor_misfit

if TYPE_CHECKING:
    import torch

PEFT_TYPE = "MISS"
# PEFT's names for a saved adapter's tensors: the wrapped model's module path, then the adapter's
# parameter (the adapter's own name, "default", is left out of saved files).
_PREFIX = "base_model.model."
_SUFFIX = ".miss_block"


def fla_module(target: str) -> str:
    """The fla module a MiSS target Linear is: ``blocks.3.att.receptance.weight`` → ``model.layers.3.attn.r_proj``."""
    key = block_key(target)
    if not key:
        raise ValueError(f"{target} is not a layer's weight")
    layer = key[0]
    by_source = {rule.source: rule.target for rule in rules(layer + 1)}
    fla = by_source.get(target)
    if fla is None or not fla.endswith(".weight"):
        raise ValueError(f"{target} has no Linear in fla's RWKV-7")
    return fla.removesuffix(".weight")


def tensor_name(module: str) -> str:
    return f"{_PREFIX}{module}{_SUFFIX}"


def module_of(name: str) -> str | None:
    """The module a saved ``miss_block`` belongs to, or None for another name."""
    if name.startswith(_PREFIX) and name.endswith(_SUFFIX):
        return name[len(_PREFIX) : -len(_SUFFIX)]
    return None


def adapter_config(rank: int, modules: Sequence[str], base_folder: str) -> dict[str, Any]:
    """PEFT's MissConfig for the default MiSS on exactly these fla Linears (:func:`fla_module`;
    full module names match exactly, so a target set that skips layers is kept as it is)."""
    return {
        "peft_type": PEFT_TYPE,
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_folder,
        "r": rank,
        "mini_r": 1,
        "init_weights": True,
        "miss_dropout": 0.0,
        "bias": "none",
        "target_modules": sorted(modules),
        "exclude_modules": None,
        "layers_to_transform": None,
        "layers_pattern": None,
        "modules_to_save": None,
        "inference_mode": True,
    }


def misfit(
    config: Mapping[str, Any], base_config: Mapping[str, Any], found: Mapping[str, tuple[tuple[int, ...], str]]
) -> str | None:
    """Why an adapter folder is not the default MiSS on the base export's Linears, or None when it
    is: ``config`` its adapter_config.json, ``base_config`` the base export's config.json,
    ``found`` the adapter file's tensors (name → (shape, safetensors dtype))."""
    if config.get("peft_type") != PEFT_TYPE or config.get("init_weights") is not True:
        return f"its {ADAPTER_CONFIG_NAME} is not PEFT's default MiSS"
    modules = config.get("target_modules")
    if not isinstance(modules, list) or not modules:
        return f"its {ADAPTER_CONFIG_NAME} lists no target modules"
    out_features = {
        name.removesuffix(".weight"): shape[0]
        for name, shape in fla_shapes(base_config).items()
        if name.endswith(".weight") and len(shape) == 2
    }
    unknown = [m for m in modules if m not in out_features]
    if unknown:
        return f"it targets {unknown[0]}, which the base export has no Linear for"
    want = {tensor_name(m): ((int(config["r"]), out_features[m]), "F32") for m in modules}
    return tensor_misfit(ADAPTER_WEIGHTS_NAME, "miss_block its config makes", want, found)


def peft_tensors(adapter: Mapping[str, torch.Tensor], scale: float) -> dict[str, torch.Tensor]:
    """``miss_block = (scale · D)ᵀ`` in float32 for each target (``adapter``: by x070 weight name)."""
    return {tensor_name(fla_module(name)): (scale * block.float()).t().contiguous() for name, block in adapter.items()}
