"""Entries gated on one set of weights, loaded once, and the files each reads.

Every State and MiSS entry of a base runs on that base; full entries are grouped by the ``.pth``
they come from (a ``.pth`` and its safetensors twins).  A group's files are hashed while its
weights load, and nothing runs on bytes that are not what index.json registered.

The weights are read on the host (memory-mapped from a ``.pth``) and copied once, tensor by
tensor, into our runtime on the gate's device; that copy is the only one on the GPU (the official
runtime is built on its tensors).  The host tensors stay as the pristine values a MiSS merge is
undone from; their pages are dropped after each use (they stay in the page cache).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.errors import RegistryError
from ..core.models import Entry, Index
from ..core.pinned import Pinned, check_registered
from .loading import Hashed, ToHash, load_hashed, user_hash_cache
from .memory import drop_pages, mapped
from .run import Run
from .runtime import Rwkv7, load_tensors


@dataclass
class Group:
    """Entries that run on one set of weights, loaded once: a base's State/MiSS entries, or one full entry."""

    weights: Mapping[str, torch.Tensor]  # pristine, on the host, in the checkpoint's layout; never modified
    model: Rwkv7  # our runtime: the one copy on the gate's device, which MiSS merges patch in place
    official_checkpoint: Path  # the .pth the official runtime is named after (built on ``model``'s tensors)
    entries: list[Entry]
    setup_s: float
    # Tensors memory-mapped from a .pth (torch.load mmap): pages this process no longer needs are
    # dropped (they stay in the page cache), so reading them does not add the file's size to RSS.
    weights_mapped: bool = False

    def drop_pages(self) -> None:
        if self.weights_mapped:
            for tensor in self.weights.values():
                drop_pages(tensor)


def _runtime(run: Run, tensors: Mapping[str, torch.Tensor], entry: Entry, is_mapped: bool) -> Rwkv7:
    """Our runtime on ``tensors``: bf16 on CUDA (the kernel), fp32 on CPU (the torch recurrence)."""
    return Rwkv7(
        tensors, dtype=torch.bfloat16 if run.device == "cuda" else torch.float32, device=run.device, wkv="auto",
        source=entry.path, copied=drop_pages if is_mapped else None,
    )  # fmt: skip


def entry_files(entry: Entry) -> dict[str, str]:
    files = {entry.path: entry.sha256}
    files.update({s.path: s.sha256 for s in entry.shards})
    return files


def source_pth(index: Index, entry: Entry) -> str:
    """The .pth with the same tensors (a safetensors twin's source), for the official runtime."""
    if entry.format == "pth":
        return entry.path
    source = index.entry_by_path(entry.derived_from or "")
    if source is None or source.format != "pth":
        raise RegistryError(
            "gate.no-source",
            entry.path,
            "the official runtime loads .pth files and this twin names no .pth source",
            "gate the .pth entry it was converted from",
        )
    return source.path


def gate_files(index: Index, entries: list[Entry]) -> dict[str, str]:
    """Every registered file the gate reads for ``entries`` (shards, a twin's .pth source), with its indexed sha256."""
    files: dict[str, str] = {}
    for entry in entries:
        files.update(entry_files(entry))
        source = index.entry_by_path(entry.derived_from or "")
        if source is not None:
            files[source.path] = source.sha256
    return files


def full_groups(index: Index, entries: list[Entry]) -> list[list[Entry]]:
    """Full entries grouped by the .pth they come from (a .pth and its safetensors twins), the
    .pth first when it is among them."""
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        source = entry.path if entry.format == "pth" else (entry.derived_from or entry.path)
        groups.setdefault(source, []).append(entry)
    return [sorted(members, key=lambda e: e.format != "pth") for members in groups.values()]


def _group_files(run: Run, entries: list[Entry]) -> list[ToHash]:
    return [ToHash(run.opened[rel], run.cache, rel) for rel in gate_files(run.index, entries)]


def _check_group_files(run: Run, entries: list[Entry], hashed: list[Hashed]) -> None:
    """Nothing runs on bytes that are not what index.json registered (``hashed``: of
    :func:`_group_files`'s files, in its order)."""
    for (relpath, sha256), result in zip(gate_files(run.index, entries).items(), hashed, strict=True):
        check_registered(relpath, result.sha256, sha256)


def base_group(run: Run, entries: list[Entry], base: Pinned, base_view: Path) -> Group:
    """The base (and the entries' own files), hashed while the base loads; refused before anything
    runs when the base is not the entries' base or a file is not what the index registered."""
    start = time.perf_counter()
    run.say(f"loading the base {base.path.name} (hashed on the way)")
    files = [ToHash(base, user_hash_cache(), os.path.realpath(base.path)), *_group_files(run, entries)]
    is_mapped = mapped(base_view)

    def load() -> tuple[dict[str, torch.Tensor], Rwkv7]:
        weights = load_tensors(base_view)
        return weights, _runtime(run, weights, entries[0], is_mapped)

    (weights, model), hashed = load_hashed(files, load)
    base_sha = hashed[0].sha256
    run.say(
        f"  base sha256 {base_sha[:12]}… "
        f"({'known from the stat cache' if hashed[0].from_cache else 'hashed while loading'})"
    )
    for entry in entries:
        if entry.base_sha256 != base_sha:
            raise RegistryError(
                "gate.base-mismatch",
                base.path,
                f"sha256 is {base_sha} but {entry.path} was trained on base {entry.base_sha256}",
                "pass the base file the entry was trained on (nothing was run)",
            )
    _check_group_files(run, entries, hashed[1:])
    return Group(weights, model, base_view, entries, time.perf_counter() - start, is_mapped)


def full_group(run: Run, entries: list[Entry]) -> Group:
    """The first full entry's weights, hashed while they load with every file of the group (a
    twin's .pth source included: the official runtime is named after it, and runs on the same
    tensors, which :func:`~registry.gate.prepare.prepare` compares bit by bit for each twin)."""
    start = time.perf_counter()
    entry = entries[0]
    run.say(f"loading {entry.path} (hashed on the way)")
    files = _group_files(run, entries)
    path = run.files / entry.path

    def load() -> tuple[dict[str, torch.Tensor], Rwkv7]:
        weights = load_tensors(path)
        return weights, _runtime(run, weights, entry, mapped(path))

    (weights, model), hashed = load_hashed(files, load)
    _check_group_files(run, entries, hashed)
    return Group(
        weights, model, run.files / source_pth(run.index, entry), entries, time.perf_counter() - start, mapped(path)
    )
