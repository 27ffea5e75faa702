"""The torch side of :mod:`.mapping`: x070 tensors as fla's (views, no copies) and back.

:func:`to_fla` is what the export writes (through the convert pipeline); :func:`read_export`
turns an exported folder back into the x070 tensors the registry's runtime and the official one
run, the check that an export holds the same model as its source.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import torch

from ..core.errors import RegistryError
from ..core.names import CONFIG_NAME
from ..core.schemas import read_json
from ..gate.runtime import load_tensors
from .mapping import FlaPlan, Rule, rules

_FLA_LAYER = re.compile(r"model\.layers\.(\d+)\.")


def _forward(tensor: torch.Tensor, rule: Rule) -> torch.Tensor:
    if rule.transform == "transpose":
        return tensor.t()
    if rule.transform == "flatten":
        return tensor.reshape(-1)
    return tensor


def to_fla(plan: FlaPlan, tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """fla's tensors, in fla's order, each a view of its x070 source (the layer-0 tensors fla has
    no place for are left out)."""
    return {rule.target: _forward(tensors[rule.source], rule) for rule in plan.rules}


def to_x070(
    n_layer: int, tensors: Mapping[str, torch.Tensor], source: str | Path | None = None
) -> dict[str, torch.Tensor]:
    """x070 tensors from fla's: names back, low-rank matrices transposed back, vectors as ``[1, 1, C]``."""
    out: dict[str, torch.Tensor] = {}
    for rule in rules(n_layer):
        if rule.target not in tensors:
            raise RegistryError(
                "export.unreadable", source, f"lacks {rule.target}", "export it again with `registry export-hf --force`"
            )
        tensor = tensors[rule.target]
        out[rule.source] = (
            tensor.t()
            if rule.transform == "transpose"
            else tensor.reshape(1, 1, -1)
            if rule.transform == "flatten"
            else tensor
        )
    return out


def fla_to_x070(tensors: Mapping[str, torch.Tensor], source: str | Path | None = None) -> dict[str, torch.Tensor]:
    """x070 tensors from a checkpoint in fla's names (seed 004's layout, an export), its layers
    counted from the names: what the gate runs a Transformers checkpoint on (views, in memory)."""
    layers = {int(m.group(1)) for name in tensors if (m := _FLA_LAYER.match(name))}
    if not layers:
        raise RegistryError(
            "gate.not-rwkv7", source, "holds no model.layers.<i>. tensors of fla's RWKV-7", "gate an RWKV-7 checkpoint"
        )
    return to_x070(max(layers) + 1, tensors, source)


def read_export(folder: str | Path) -> dict[str, torch.Tensor]:
    """The x070 tensors of an exported folder (its config.json and safetensors)."""

    folder = Path(folder)
    try:
        n_layer = int(read_json(folder / CONFIG_NAME)["num_hidden_layers"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RegistryError(
            "export.unreadable",
            folder / CONFIG_NAME,
            f"has no readable num_hidden_layers ({exc})",
            "export it again with `registry export-hf --force`",
        ) from exc
    return to_x070(n_layer, load_tensors(folder), folder)
