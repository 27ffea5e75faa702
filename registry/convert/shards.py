"""Shard planning, and the checks of a sharded checkpoint's ``model.safetensors.index.json``
(parsed by :func:`registry.artifacts.safetensors_header.read_shard_index`, the one parser)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..artifacts.inspect import inspect_weights
from ..artifacts.safetensors_header import read_shard_index
from ..core.errors import RegistryError
from ..core.names import SINGLE_SAFETENSORS

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 1 << 10,
    "MIB": 1 << 20,
    "GIB": 1 << 30,
    "TIB": 1 << 40,
}


def parse_size(text: str, option: str = "--shard-size") -> int:
    """'5GB' → 5·10⁹ (decimal, as Transformers' max_shard_size), '512MiB' → 512·2²⁰."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else None
    if not match or unit not in _UNITS:
        raise RegistryError("args.bad-size", text, "not a size like 5GB or 512MiB", f"pass {option} 5GB")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise RegistryError("args.bad-size", text, "the size must be positive", f"pass {option} 5GB")
    return size


def shard_name(i: int, count: int) -> str:
    return f"model-{i + 1:05d}-of-{count:05d}.safetensors"


@dataclass(frozen=True)
class ShardPlan:
    """Tensor names per output file, in source order."""

    files: list[tuple[str, list[str]]]

    @property
    def sharded(self) -> bool:
        return len(self.files) > 1


def plan_shards(sizes: dict[str, int], shard_size: int, single_name: str = SINGLE_SAFETENSORS) -> ShardPlan:
    """Greedy in source order: a new shard starts when the next tensor would overflow this one.

    A tensor larger than the shard size gets a shard of its own (it cannot be split).
    """
    groups: list[list[str]] = [[]]
    used = 0
    for name, size in sizes.items():
        if groups[-1] and used + size > shard_size:
            groups.append([])
            used = 0
        groups[-1].append(name)
        used += size
    if len(groups) == 1:
        return ShardPlan([(single_name, groups[0])])
    return ShardPlan([(shard_name(i, len(groups)), names) for i, names in enumerate(groups)])


def shard_set_problems(index_path: Path, listed_shards: set[str]) -> list[str]:
    """What is wrong with a sharded checkpoint, as messages (empty when it is sound).

    The weight_map must name each tensor once, every shard it names must exist, shard headers
    must agree with it (and be headers the safetensors loader accepts), metadata.total_size must
    be the tensors' bytes, and the shard files must be the ones the registry entry lists.
    """
    try:
        parsed = read_shard_index(index_path)
    except RegistryError as err:
        return [err.message]
    problems = [
        f"weight_map names missing shard {name}" for name in parsed.shard_names if not parsed.shard_path(name).is_file()
    ]
    if problems:
        return problems
    try:
        inspection = inspect_weights(index_path)
    except RegistryError as err:
        return [err.message if err.file == str(index_path) else f"{Path(err.file or '').name}: {err.message}"]
    if parsed.total_size is None:
        problems.append(f"metadata.total_size is missing (the tensors hold {inspection.total_bytes} bytes)")
    elif parsed.total_size != inspection.total_bytes:
        problems.append(
            f"metadata.total_size is {parsed.total_size} but the tensors hold {inspection.total_bytes} bytes"
        )
    on_disk = {f.name for f in inspection.files}
    if on_disk != listed_shards:
        problems.append(f"index.json lists shards {sorted(listed_shards)} but the weight_map uses {sorted(on_disk)}")
    return problems
