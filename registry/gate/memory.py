"""Where the gate's weights live, and how much GPU memory a group needs: planned before loading.

One copy of the weights is resident (bf16 on CUDA), shared by our runtime and the official one;
the fp32 reference converts one layer at a time; a MiSS merge is undone from pristine values kept
only for the Linears it touched, on the GPU when the plan has room for them under its ceiling,
else read back from the host's mapped checkpoint.  :func:`plan_gpu` sizes that from the file and
its architecture, so a card too small is refused in one line before anything is loaded, and an
out-of-memory error names the same figure.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.errors import Exit, RegistryError
from ..core.libc import unmap_pages
from ..core.models import Architecture
from .runtime import HEAD_CHUNK, MERGE_ROWS

GIB = 2**30
# Peak target: the weights times this, plus one layer's working set (issue #45; docs/gpu-gate.md).
CEILING_FACTOR = 1.15
# Activations (prefill chunks of 256 tokens), the kernel check's inputs and the allocator's rounding.
WORKSPACE = 512 * 2**20


def drop_pages(tensor: torch.Tensor) -> None:
    """Drop a memory-mapped tensor's pages from this process; the next read maps them again."""
    unmap_pages(tensor.data_ptr(), tensor.numel() * tensor.element_size())


def mapped(path: Path) -> bool:
    """Whether :func:`~registry.gate.runtime.load_tensors` of ``path`` gives tensors mapped from the file."""
    return path.suffix in (".pth", ".pt")


def on_device(device: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Move once to the GPU (an entry's own small tensors: a State, an adapter)."""
    return {k: v.to(device) for k, v in tensors.items()} if device == "cuda" else tensors


def measure_peak_from_here(device: str) -> None:
    """Start the CUDA peak counter afresh: what the next receipt records as ``gpu_peak_bytes`` is
    then its own group's (or checkpoint's), not the whole process's."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


@dataclass(frozen=True)
class GpuPlan:
    """What one group of entries needs on the GPU, against what it may use."""

    card: str  # the GPU's name and memory, as the refusal names it
    budget: int  # bytes the gate may use (--max-gpu-memory, or what the card has free)
    weights: int  # the one resident copy
    working: int  # the most held beside it at any time: a converted layer, a merge, the official embedding
    ceiling: int  # the peak target: CEILING_FACTOR x weights + one layer's working set

    @property
    def need(self) -> int:
        return self.weights + self.working

    @property
    def fits(self) -> bool:
        return self.need <= self.budget

    def pristine_on_gpu(self, touched: int) -> bool:
        """Whether a MiSS entry's ``touched`` bytes of pristine Linears are kept on the GPU (a
        restore is then a copy on the card) rather than read back from the host's checkpoint."""
        return self.need + touched <= min(self.budget, self.ceiling)


def plan_gpu(card: str, budget: int, weights: int, architecture: Architecture | None, adapter: int = 0) -> GpuPlan:
    """The plan for ``weights`` bytes of bf16 checkpoint of ``architecture`` (None: not recorded,
    then the working set is taken as the ceiling's 15 % plus the activations' workspace), with a
    MiSS ``adapter`` of that many bytes at most.  Every figure is an upper bound from the shapes
    (docs/gpu-gate.md)."""
    if architecture is None:
        working = int((CEILING_FACTOR - 1) * weights) + WORKSPACE
        return GpuPlan(card, budget, weights, working, weights + working)
    c, v, layers = architecture.n_embd, architecture.vocab_size, architecture.n_layer
    ffn = architecture.dim_ffn or 4 * c
    layer_bf16 = max(0, weights - 2 * 2 * v * c) // layers  # all but the embedding and the head
    fp32_layer = 2 * layer_bf16 + 4 * c * min(v, HEAD_CHUNK)  # a layer converted, or a head chunk beside it
    # The largest Linear merged (bf16) and, for MERGE_ROWS of its rows, merge_delta's fp32 temporaries.
    merge = adapter + 2 * ffn * c + 18 * MERGE_ROWS * max(ffn, c)
    embedding = 2 * v * c  # the official runtime's embedding, ln0 applied (its own tensor)
    working = embedding + max(fp32_layer, merge) + WORKSPACE
    return GpuPlan(card, budget, weights, working, int(CEILING_FACTOR * weights) + 2 * layer_bf16)


def gpu_budget(max_gpu_memory: int | None) -> tuple[str, int]:
    """The card as a refusal names it, and the bytes the gate may use on it: ``max_gpu_memory``
    (held to by this process's allocator from here on), else what the card has free (within a
    memory fraction this process was already given)."""
    free, total = torch.cuda.mem_get_info()
    card = f"{torch.cuda.get_device_name(0)} ({total / GIB:.1f} GiB, {free / GIB:.1f} GiB free)"
    if max_gpu_memory is not None:
        if max_gpu_memory < total:
            torch.cuda.set_per_process_memory_fraction(max_gpu_memory / total)
        return card, max_gpu_memory
    fraction = getattr(torch.cuda, "get_per_process_memory_fraction", lambda: 1.0)()
    return card, min(free, int(fraction * total))


def refuse_unless_fits(plan: GpuPlan, paths: list[str]) -> None:
    """One line, before loading, when even this plan (the smallest: one copy, the reference
    streamed layer by layer, pristine values on the host) does not fit the budget."""
    if plan.fits:
        return
    raise RegistryError(
        "gate.gpu-memory",
        ", ".join(paths),
        f"gating needs {plan.need / GIB:.1f} GiB of GPU memory even with the weights held once and the reference "
        f"streamed layer by layer ({plan.weights / GIB:.1f} GiB of weights + {plan.working / GIB:.1f} GiB working "
        f"set); {plan.card} has {plan.budget / GIB:.1f} GiB for it",
        f"gate on a GPU with {plan.need / GIB:.1f} GiB free (or raise --max-gpu-memory if the card has it)",
        Exit.MACHINE,
    )


@contextmanager
def out_of_memory_named(paths: list[str], plan: GpuPlan | None) -> Iterator[None]:
    """A CUDA out-of-memory error as one line naming the entries and the memory they need."""
    try:
        yield
    except torch.cuda.OutOfMemoryError as error:
        free, total = (x / GIB for x in torch.cuda.mem_get_info())
        need = f"about {plan.need / GIB:.1f} GiB" if plan else "more than it has"
        raise RegistryError(
            "gate.out-of-memory",
            ", ".join(paths),
            f"the GPU ran out of memory; gating this model needs {need} (now free: {free:.1f} of {total:.1f} GiB)",
            "stop other processes on the GPU or gate on a GPU with more memory (docs/gpu-gate.md: models "
            "larger than one GPU)",
            Exit.MACHINE,
        ) from error
