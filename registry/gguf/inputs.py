"""The tensors a GGUF export is made from, memory-mapped from pinned, hash-checked files: the
source's own, or for a MiSS adapter its base's, with the adapter's blocks to merge."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..artifacts.inspect import load_tensor_map
from ..artifacts.miss import read_miss_json, verify_adapter
from ..convert.source import locate_tensors
from ..core.errors import RegistryError
from ..core.pinned import Pinned
from ..core.repo import Repo
from ..gate.runtime import check_mergeable
from ..hf.source import ExportSource, pinned_source
from . import writer


@dataclass
class Inputs:
    source: ExportSource
    tensors: dict[str, torch.Tensor]
    mapped: frozenset[int]
    adapter: dict[str, torch.Tensor] | None = None
    scale: float = 1.0
    files: dict[str, str] = field(default_factory=dict)  # registered files the GGUF is made from


@contextmanager
def open_inputs(repo: Repo, source: ExportSource, base_file: Path | None) -> Iterator[Inputs]:
    """The source's tensors, memory-mapped from pinned, hash-checked files (for a MiSS adapter: its
    base's, from ``base_file``, with the adapter's blocks to merge)."""
    with ExitStack() as stack:
        if source.entry is not None and source.entry.method == "miss":
            if base_file is None:
                raise RegistryError(
                    "args.missing-file", source.entry.path, "is a MiSS adapter: its GGUF is the adapter merged into its base, and the registry does not hold bases",
                    f"pass --base-file {source.base.filename}",
                )  # fmt: skip
            adapter_pin: Pinned = stack.enter_context(pinned_source(repo, source, None))
            base = ExportSource(source.base.name, source.base, None, source.base.sha256, "")
            handle: Pinned = stack.enter_context(pinned_source(repo, base, base_file))
            manifest = read_miss_json(adapter_pin.stable)
            adapter = load_tensor_map(adapter_pin.stable)
            verify_adapter(adapter_pin.path, adapter, manifest)
            tensors = load_tensor_map(handle.stable)
            check_mergeable(tensors, adapter, source=source.entry.path)
            yield Inputs(
                source,
                tensors,
                locate_tensors(handle.stable, tensors).mapped,
                adapter,
                manifest.scale,
                {source.entry.path: source.sha256},
            )
            return
        handle = stack.enter_context(pinned_source(repo, source, base_file))
        tensors = load_tensor_map(handle.stable)
        files = {source.entry.path: source.sha256} if source.entry is not None else {}
        yield Inputs(source, tensors, locate_tensors(handle.stable, tensors).mapped, files=files)


def reference_tensors(inputs: Inputs) -> dict[str, torch.Tensor]:
    """The model the GGUF files hold, as our reference runtime loads it (an adapter merged in)."""
    if inputs.adapter is None:
        return inputs.tensors
    source = writer.Source(inputs.tensors, inputs.mapped, inputs.adapter, inputs.scale)
    return {name: source.tensor(name) for name in inputs.tensors}
