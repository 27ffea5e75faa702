"""Look inside weight files without running anything they contain.

A ``.pth`` is a pickle, and unpickling an untrusted pickle runs whatever code it names.  So:

* torch-zip ``.pth`` files are opened with ``torch.load(weights_only=True, mmap=True)``: the
  restricted unpickler only builds tensors and plain containers, and mmap leaves the tensor data
  on disk (a 15 GB base is inspected in milliseconds).  Everything else is refused: legacy
  (non-zip) pickles, pickles naming other classes or functions, anything but a flat
  ``{str: Tensor}`` mapping.
* safetensors files are read through their JSON header only; sharded checkpoints through
  ``model.safetensors.index.json`` and each shard's header.

The result says what the file is (an RWKV-7 checkpoint with its :class:`Architecture`, a State
file, or a MiSS adapter with its miss.json) so that :func:`check_state_fits` and
:func:`check_miss_fits` can refuse weights that do not fit a base.
"""

from __future__ import annotations

import json
import math
import pickle
import re
import struct
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, NonNegativeInt, ValidationError

from ..errors import RegistryError
from ..layout import SHARD_INDEX
from ..models import Architecture
from .dtypes import ITEMSIZE, dtype_code
from .miss import (
    MANIFEST_MEMBER,
    MissManifest,
    default_targets,
    torch_zip_folder,
    verify_adapter,
    zip_refusals,
)

if TYPE_CHECKING:  # torch loads .pth files; safetensors headers and shard indexes need none
    import torch

Kind = Literal["checkpoint", "state", "miss"]
Format = Literal["pth", "safetensors", "safetensors-sharded"]

MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024  # the safetensors library's own limit
STATE_DTYPES = ("BF16", "F32")

_STATE_KEY = re.compile(r"blocks\.(\d+)\.att\.time_state")
_BLOCK_KEY = re.compile(r"blocks\.(\d+)\.")
# Per-layer keys only x070 (RWKV-7) has, plus the Linears every layer needs.
_X070_LAYER_KEYS = ("att.w0", "att.a0", "att.k_k", "att.r_k", *(f"{t}.weight" for t in ("att.receptance", "att.key", "att.value", "att.output", "ffn.key", "ffn.value")))
# Layer 0 takes v_first directly; official files still carry unused blocks.0.att.v0/v1/v2, others drop them.
_X070_LATER_LAYER_KEYS = ("att.v0", "att.v1", "att.v2")
# Keys of earlier RWKV generations, most specific first, with what they betray.
_OLDER_RWKV_KEYS = (
    ("att.time_maa_x", "RWKV-6 (x060)"),
    ("att.time_faaaa", "RWKV-6 (x060)"),
    ("att.time_first", "RWKV-4/5"),
    ("att.time_mix_k", "RWKV-4/5"),
    ("att.time_decay", "RWKV-6 or earlier"),
)


class TensorInfo(NamedTuple):
    """A tensor as the file describes it; ``dtype`` is the safetensors name (``BF16``)."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ITEMSIZE[self.dtype]


@dataclass(frozen=True)
class Inspection:
    """What a weight file is, read without executing it."""

    path: Path
    kind: Kind
    format: Format
    tensors: dict[str, TensorInfo]
    architecture: Architecture | None = None  # checkpoints only
    miss: MissManifest | None = None  # MiSS adapters only
    files: tuple[Path, ...] = ()  # the files holding tensor data (the shards of a sharded checkpoint)

    @property
    def total_bytes(self) -> int:
        """Bytes of tensor data (not of the container)."""
        return sum(info.nbytes for info in self.tensors.values())

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: info.shape for name, info in self.tensors.items()}


def inspect_weights(path: str | Path) -> Inspection:
    """Inspect a torch-zip ``.pth``, a ``.safetensors`` file, or a sharded checkpoint (its
    ``model.safetensors.index.json`` or the folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / SHARD_INDEX
    if not path.is_file():
        raise RegistryError("args.missing-file", path, "no such file", "check the path")
    if path.name.endswith(".json"):
        return _inspect_sharded(path)
    with open(path, "rb") as handle:
        head = handle.read(9)
    if head.startswith(b"PK"):
        return _inspect_torch_zip(path)
    if head[8:9] == b"{":
        tensors = _safetensors_header(path)
        return _classified(path, "safetensors", tensors, files=(path,))
    if head.startswith(b"\x80"):
        raise RegistryError(
            "weights.legacy-pickle",
            path,
            "a legacy (non-zip) torch pickle: it cannot be memory-mapped, and reading it means unpickling it",
            "on a machine you trust, re-save it in the zip format: torch.save(tensors, 'new.pth') (the default since torch 1.6)",
        )
    raise RegistryError("weights.unknown-format", path, "neither a torch-zip .pth nor a safetensors file", "pass a .pth written by torch.save or a .safetensors file")


# ----------------------------------------------------------------------------------------------
# torch-zip .pth


def _inspect_torch_zip(path: Path) -> Inspection:
    has_manifest = _check_torch_zip(path)
    tensors = load_tensor_map(path)
    manifest = verify_adapter(path, tensors) if has_manifest else None
    infos = {name: TensorInfo(dtype_code(t.dtype), tuple(t.shape)) for name, t in tensors.items()}
    return _classified(path, "pth", infos, manifest, files=(path,))


def _check_torch_zip(path: Path) -> bool:
    """Refuse a damaged archive before torch sees it; say whether it holds a miss.json.

    Every member except the tensor storages (``<folder>/data/<n>``, the bulk of the file) is read
    through zipfile, which checks its CRC: a corrupted pickle is reported as corruption rather
    than as whatever the unpickler makes of random bytes.  Damaged tensor data is caught by the
    file's sha256 (and, for adapters, by content_version).
    """
    with zip_refusals(path), zipfile.ZipFile(path) as archive:
        folder = torch_zip_folder(archive, path)
        for name in archive.namelist():
            if not name.startswith(f"{folder}/data/"):
                archive.read(name)
        return f"{folder}/{MANIFEST_MEMBER}" in archive.namelist()


def _unpickler_reason(error: Exception) -> str:
    """The useful part of torch's long weights_only message (which also suggests unsafe loading)."""
    text = str(error)
    if named := re.search(r"GLOBAL ([\w.]+)", text):
        return f"it names {named[1]}"
    detail = re.search(r"WeightsUnpickler error: ([^\n]*)", text)
    return detail[1] if detail else text.splitlines()[0]


def load_tensor_map(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a torch-zip ``.pth``, memory-mapped; refuses anything but str → Tensor."""
    import torch

    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as error:
        raise RegistryError(
            "weights.unsafe-pickle",
            path,
            f"the pickle builds objects other than tensors, so it was not loaded ({_unpickler_reason(error)})",
            "on a machine you trust, re-save only the tensors: torch.save({name: tensor, ...}, path)",
        ) from error
    except (RuntimeError, ValueError, EOFError) as error:  # damage that passed the CRC checks
        raise RegistryError(
            "weights.corrupt-zip", path, f"torch cannot read the archive ({str(error).splitlines()[0]})", "download or copy the file again and compare its sha256"
        ) from error
    return _require_flat_tensor_map(path, loaded)


def _require_flat_tensor_map(path: Path, loaded: Any) -> dict[str, torch.Tensor]:
    import torch

    fix = "save a flat dict of tensors (if they are nested, e.g. under 'state_dict', save that dict alone)"
    if not isinstance(loaded, Mapping):
        raise RegistryError("weights.not-tensor-map", path, f"holds a {type(loaded).__name__}, not a dict of tensors", fix)
    if not loaded:
        raise RegistryError("weights.not-tensor-map", path, "holds an empty dict: no tensors", fix)
    for key, value in loaded.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor) or value.layout != torch.strided:
            raise RegistryError("weights.not-tensor-map", path, f"entry {key!r} is a {type(value).__name__}, not a dense tensor", fix)
    return dict(loaded)


# ----------------------------------------------------------------------------------------------
# safetensors


class _SafetensorsEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dtype: str
    shape: tuple[NonNegativeInt, ...]
    data_offsets: tuple[NonNegativeInt, NonNegativeInt]


def _safetensors_refusal(path: Path, message: str) -> RegistryError:
    return RegistryError("weights.bad-safetensors", path, message, "download or convert the file again")


def _read_safetensors_json(path: Path) -> tuple[dict[str, Any], int]:
    """The JSON header and the size of the data section; tensor data is never read."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise _safetensors_refusal(path, "shorter than the 8-byte header length")
        (length,) = struct.unpack("<Q", prefix)
        if length > min(size - 8, MAX_SAFETENSORS_HEADER):
            raise _safetensors_refusal(path, f"header length {length} does not fit in a {size}-byte file (truncated?)")
        raw = handle.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _safetensors_refusal(path, f"header is not UTF-8 JSON ({error})") from error
    if not isinstance(header, dict):
        raise _safetensors_refusal(path, "header is not a JSON object")
    return header, size - 8 - length


def _safetensors_header(path: Path) -> dict[str, TensorInfo]:
    header, data_size = _read_safetensors_json(path)
    tensors: dict[str, TensorInfo] = {}
    for name, raw in header.items():
        if name == "__metadata__":
            continue
        try:
            entry = _SafetensorsEntry.model_validate(raw)
        except ValidationError as error:
            raise _safetensors_refusal(path, f"header entry {name!r}: {error.errors()[0]['msg']}") from error
        if entry.dtype not in ITEMSIZE:
            raise _safetensors_refusal(path, f"{name} has unknown dtype {entry.dtype!r}")
        info = TensorInfo(entry.dtype, entry.shape)
        begin, end = entry.data_offsets
        if end - begin != info.nbytes or end > data_size:
            raise _safetensors_refusal(path, f"{name}: data offsets {begin}..{end} do not match {entry.dtype} {list(entry.shape)} in a {data_size}-byte data section")
        tensors[name] = info
    if not tensors:
        raise _safetensors_refusal(path, "holds no tensors")
    return tensors


class _ShardIndex(BaseModel):
    """model.safetensors.index.json (Hugging Face's layout; ``metadata`` is free-form)."""

    weight_map: dict[str, str]
    metadata: dict[str, Any] = {}


def _shard_file(index_path: Path, name: str) -> Path:
    if "/" in name or "\\" in name or name.startswith(".") or not (index_path.parent / name).is_file():
        raise RegistryError(
            "weights.bad-shard-index", index_path, f"weight_map names shard {name!r}, which is not a file beside the index", "put every shard next to the index and name it there by file name"
        )
    return index_path.parent / name


def _inspect_sharded(index_path: Path) -> Inspection:
    try:
        index = _ShardIndex.model_validate_json(index_path.read_bytes())
    except ValidationError as error:
        first = error.errors()[0]
        raise RegistryError(
            "weights.bad-shard-index", index_path, f"not a safetensors shard index ({'.'.join(map(str, first['loc']))}: {first['msg']})", f"pass the checkpoint's {SHARD_INDEX}"
        ) from error
    tensors: dict[str, TensorInfo] = {}
    shards = tuple(_shard_file(index_path, name) for name in sorted(set(index.weight_map.values())))
    for shard in shards:
        header = _safetensors_header(shard)
        listed = {t for t, s in index.weight_map.items() if s == shard.name}
        if set(header) != listed:
            differ = sorted(set(header) ^ listed)
            raise RegistryError(
                "weights.bad-shard-index", index_path, f"weight_map and the header of {shard.name} disagree about {differ[:3]}", "regenerate the index from the shards"
            )
        tensors.update(header)
    return _classified(index_path, "safetensors-sharded", tensors, files=shards)


# ----------------------------------------------------------------------------------------------
# Classification


def _classified(path: Path, fmt: Format, tensors: dict[str, TensorInfo], manifest: MissManifest | None = None, files: tuple[Path, ...] = ()) -> Inspection:
    if manifest is not None:
        return Inspection(path, "miss", fmt, tensors, miss=manifest, files=files)
    if any(_STATE_KEY.fullmatch(name) for name in tensors):
        _check_state_layout(path, tensors)
        return Inspection(path, "state", fmt, tensors, files=files)
    return Inspection(path, "checkpoint", fmt, tensors, architecture=_architecture(path, tensors), files=files)


def _check_state_layout(path: Path, tensors: dict[str, TensorInfo]) -> None:
    """Exactly ``blocks.{0..L-1}.att.time_state``, each ``[H, N, N]`` in bf16 or fp32."""
    fix = "export the State with rwkv_state_tune (one blocks.<i>.att.time_state [H, N, N] per layer)"
    layers = sorted(int(m[1]) for name in tensors if (m := _STATE_KEY.fullmatch(name)))
    others = [name for name in tensors if not _STATE_KEY.fullmatch(name)]
    if others or layers != list(range(len(layers))):
        raise RegistryError("weights.bad-state", path, f"a State file must hold exactly blocks.0..L-1.att.time_state (extra: {others[:3]}, layers: {layers})", fix)
    first = tensors["blocks.0.att.time_state"]
    for name, info in tensors.items():
        h_n_n = len(info.shape) == 3 and info.shape[1] == info.shape[2]
        if not h_n_n or info.shape != first.shape or info.dtype not in STATE_DTYPES:
            raise RegistryError(
                "weights.bad-state", path, f"{name} is {info.dtype} {list(info.shape)}; every layer needs the same [H, N, N] in {' or '.join(STATE_DTYPES)}", fix
            )


def _architecture(path: Path, tensors: dict[str, TensorInfo]) -> Architecture:
    """RWKV-7 shape facts, refusing anything that is not an x070 checkpoint."""
    layers = {int(m[1]) for name in tensors if (m := _BLOCK_KEY.match(name))}
    if "emb.weight" not in tensors or not layers:
        raise RegistryError(
            "weights.not-rwkv", path, f"not an RWKV checkpoint: no emb.weight and blocks.<i>.* tensors (it has {', '.join(list(tensors)[:3])}, …)", "pass an RWKV-7 (x070) checkpoint"
        )
    for key, generation in _OLDER_RWKV_KEYS:
        if any(name.endswith("." + key) for name in tensors):
            raise RegistryError(
                "weights.not-rwkv7", path, f"looks like an {generation} checkpoint (it has blocks.<i>.{key}); this registry holds RWKV-7 (x070) weights", "pass an RWKV-7 (x070) checkpoint"
            )
    n_layer = max(layers) + 1
    for layer in range(n_layer):
        required = _X070_LAYER_KEYS + (_X070_LATER_LAYER_KEYS if layer else ())
        missing = [key for key in required if f"blocks.{layer}.{key}" not in tensors]
        if missing:
            raise RegistryError(
                "weights.not-rwkv7", path, f"not an RWKV-7 (x070) checkpoint: blocks.{layer} lacks {', '.join(missing[:4])}", "pass a complete RWKV-7 (x070) checkpoint"
            )
    vocab_size, n_embd = tensors["emb.weight"].shape
    n_head, head_size = tensors["blocks.0.att.r_k"].shape
    architecture = Architecture(
        n_layer=n_layer, n_embd=n_embd, head_size=head_size, vocab_size=vocab_size, n_head=n_head, dim_ffn=tensors["blocks.0.ffn.key.weight"].shape[0]
    )
    if n_head * head_size != n_embd:
        raise RegistryError("weights.inconsistent", path, f"r_k is [{n_head}, {head_size}] but n_embd is {n_embd}", "pass an unmodified RWKV-7 checkpoint")
    _check_consistent(path, tensors, architecture)
    return architecture


def _check_consistent(path: Path, tensors: dict[str, TensorInfo], arch: Architecture) -> None:
    """Every Linear has the shape the architecture implies (State and MiSS checks rely on it)."""
    for target in default_targets(arch):
        actual = tensors[target.name].shape
        if actual != target.shape:
            raise RegistryError(
                "weights.inconsistent", path, f"{target.name} is {list(actual)} but the architecture implies {list(target.shape)}", "pass an unmodified RWKV-7 checkpoint"
            )


# ----------------------------------------------------------------------------------------------
# Fit checks


def check_state_fits(inspection: Inspection, arch: Architecture, file: str | Path | None = None) -> None:
    """A State needs one ``[H, N, N]`` per base layer, with the base's heads and head size."""
    file = file or inspection.path
    if inspection.kind != "state":
        raise RegistryError("weights.wrong-kind", file, f"this is a {inspection.kind} file, not a State file", "pass a State file")
    n_head = arch.n_head or arch.n_embd // arch.head_size
    expected = (arch.n_layer, (n_head, arch.head_size, arch.head_size))
    actual = (len(inspection.tensors), inspection.tensors["blocks.0.att.time_state"].shape)
    if actual != expected:
        raise RegistryError(
            "state.wrong-base",
            file,
            f"State has {actual[0]} layers × {list(actual[1])} but the base has {expected[0]} layers × {list(expected[1])}",
            "register the State under the base it was trained on",
        )


def check_miss_fits(
    inspection: Inspection, base: Architecture | Mapping[str, Sequence[int]], base_sha256: str, file: str | Path | None = None
) -> None:
    """An adapter fits only the exact base file it was trained on, and only its Linears' shapes.

    ``base`` is the base's Architecture or its tensor shapes by name (e.g. ``Inspection.shapes``).
    """
    file = file or inspection.path
    manifest = inspection.miss
    if manifest is None:
        raise RegistryError("weights.wrong-kind", file, f"this is a {inspection.kind} file, not a MiSS adapter", "pass a MiSS adapter")
    if manifest.base_sha256 != base_sha256:
        raise RegistryError(
            "miss.wrong-base",
            file,
            f"adapter was trained on base {manifest.base_sha256} but this base is {base_sha256}",
            "register the adapter under the base it was trained on, or retrain it on this base",
        )
    base_shapes = {t.name: t.shape for t in default_targets(base)} if isinstance(base, Architecture) else {n: tuple(s) for n, s in base.items()}
    for target in manifest.targets:
        actual = base_shapes.get(target.name)
        if actual != target.shape:
            raise RegistryError(
                "miss.wrong-shape",
                file,
                f"target {target.name} is {list(target.shape)} in miss.json but {list(actual) if actual else 'absent'} in the base",
                "register the adapter under the base it was trained on",
            )
