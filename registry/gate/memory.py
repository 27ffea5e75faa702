"""Where the gate's weights live: moved once to the GPU, the pages of memory-mapped tensors given
back, and a CUDA out-of-memory error named with the memory a model needs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from ..core.errors import Exit, RegistryError
from ..core.libc import unmap_pages

# What a group needs on the GPU, as a multiple of its bf16 weights: the pristine copy, the
# running runtime's copy, and a layer converted to fp32 (checked: docs/gpu-gate.md).
GPU_MEMORY_FACTOR = 2.2


def drop_pages(tensor: torch.Tensor) -> None:
    """Drop a memory-mapped tensor's pages from this process; the next read maps them again."""
    unmap_pages(tensor.data_ptr(), tensor.numel() * tensor.element_size())


def mapped(device: str, path: Path) -> bool:
    """Whether :func:`~registry.gate.runtime.load_tensors` of ``path`` on ``device`` gives tensors mapped from the
    file."""
    return device == "cpu" and path.suffix in (".pth", ".pt")


def on_device(device: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Move once to the GPU, so merging and each model's dtype conversion happen there."""
    return {k: v.to(device) for k, v in tensors.items()} if device == "cuda" else tensors


@contextmanager
def out_of_memory_named(paths: list[str], weights_bytes: int) -> Iterator[None]:
    """A CUDA out-of-memory error as one line naming the entries and the memory they need."""
    try:
        yield
    except torch.cuda.OutOfMemoryError as error:
        need = GPU_MEMORY_FACTOR * weights_bytes / 2**30
        free, total = (x / 2**30 for x in torch.cuda.mem_get_info())
        raise RegistryError(
            "gate.out-of-memory",
            ", ".join(paths),
            f"the GPU ran out of memory; gating this model needs about {need:.1f} GiB (now free: {free:.1f} "
            f"of {total:.1f} GiB)",
            "stop other processes on the GPU or gate on a GPU with more memory (docs/gpu-gate.md: models "
            "larger than one GPU)",
            Exit.MACHINE,
        ) from error
