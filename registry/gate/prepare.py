"""One entry, checked and loaded for its group: add's acceptance rule on the very bytes the gate
loads, the world vocabulary, a twin compared bit by bit with its group's weights, a MiSS adapter's
fit."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from ..artifacts.dtypes import bit_equal
from ..artifacts.miss import read_miss_json
from ..core.errors import RegistryError
from ..core.models import Entry
from .checks import WORLD_VOCAB_SIZE, check_finite_weights
from .groups import Group, source_pth
from .memory import on_device
from .receipt import CheckResult
from .run import Run
from .runtime import check_mergeable, load_tensors


@dataclass
class Prepared:
    """One entry, checked and loaded, ready to run on its group's weights."""

    entry: Entry
    own: Mapping[str, torch.Tensor]  # the entry's tensors: a State, an adapter, or the full weights
    scale: float | None  # MiSS only
    finite: CheckResult
    seconds: float


def prepare(run: Run, entry: Entry, group: Group) -> Prepared:
    """add's acceptance rule on the very bytes the gate will load, then the entry's tensors."""
    start = time.perf_counter()
    path = run.files / entry.path
    base = next(b for b in run.index.bases if b.sha256 == entry.base_sha256)
    try:
        inspection = run.accept(path, entry.method, base, entry.path)
    except RegistryError as err:
        raise err.naming(str(path), entry.path) from err
    architecture = inspection.architecture or base.architecture
    if architecture is not None and architecture.vocab_size < WORLD_VOCAB_SIZE:
        raise RegistryError(
            "gate.vocab",
            entry.path,
            f"the model's vocabulary has {architecture.vocab_size} tokens; the gate's prompts need the RWKV "
            f"world vocabulary ({WORLD_VOCAB_SIZE})",
            "gate models built on the world vocabulary (rwkv_vocab_v20230424)",
        )
    if entry.method == "full":
        # The group's weights are its first entry's; a twin's own tensors (read on the CPU) must
        # equal them, or the gate would run the first entry's model under the twin's name.
        first = group.entries[0]
        if entry is not first and not equal_tensors(group.weights, load_tensors(path)):
            raise RegistryError(
                "gate.twin-differs",
                entry.path,
                f"its tensors are not those of {first.path}, which it was converted from",
                f"convert it again: `registry convert {first.path} --force`",
            )
        own = group.weights  # compared equal: the twin's own copy is let go
    else:
        own = on_device(run.device, load_tensors(path))
    scale = None
    if entry.method == "miss":
        scale = read_miss_json(run.files / source_pth(run.index, entry)).scale
        check_mergeable(group.weights, own, source=entry.path)
    # A full entry's weights are checked where they run: our runtime's copy (on the GPU), not the host's pages.
    finite = check_finite_weights(group.model.checkpoint() if entry.method == "full" else own)
    return Prepared(entry, own, scale, finite, time.perf_counter() - start)


def equal_tensors(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> bool:
    """The same names and, tensor by tensor, :func:`~registry.artifacts.dtypes.bit_equal` (``b``'s
    moved to ``a``'s device one at a time)."""
    return a is b or (a.keys() == b.keys() and all(bit_equal(x, b[k]) for k, x in a.items()))


def same_tensors(a: Prepared, b: Prepared) -> bool:
    """Whether two entries run the same model: same method and MiSS scale, and tensors equal in
    names, dtypes, shapes and every bit (a twin and its source; compared, never assumed)."""
    return a.entry.method == b.entry.method and a.scale == b.scale and equal_tensors(a.own, b.own)
