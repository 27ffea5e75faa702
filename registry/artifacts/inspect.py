"""Look inside weight files without running anything they contain.

A ``.pth`` is a pickle, and unpickling an untrusted pickle runs whatever code it names.  So:

* torch-zip ``.pth`` files are read without torch (:mod:`.torch_zip`): a bounded zip reader and
  an interpreter of data.pkl that knows only the opcodes of data and the globals of plain tensors,
  calling nothing; the tensor data stays on disk (a 15 GB base is inspected in milliseconds).
  Everything else is refused: legacy (non-zip) pickles, pickles naming other classes or functions,
  anything but a flat ``{str: Tensor}`` mapping.  Commands that need the tensors themselves
  (convert, export, the gate) load them with :func:`load_tensor_map`, after that reader accepted
  the file, with ``torch.load(weights_only=True, mmap=True)``.
* safetensors files are read through their JSON header only, accepted exactly where the
  safetensors loader accepts them (:mod:`.safetensors_header`, the package's one parser of
  headers and shard indexes); sharded checkpoints through ``model.safetensors.index.json`` and
  each shard's header.

The result says what the file is (an RWKV-7 checkpoint with its :class:`Architecture`, a State
file, or a MiSS adapter with its miss.json) so that :func:`check_state_fits` and
:func:`check_miss_fits` can refuse weights that do not fit a base.
"""

from __future__ import annotations

import math
import pickle
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ..core.errors import RegistryError
from ..core.lfs import refuse_pointer
from ..core.models import Architecture, Base
from ..core.names import SHARD_INDEX
from .dtypes import ITEMSIZE
from .miss import MissManifest, default_targets, manifest_from_metadata, verify_payload
from .rwkv7 import (
    OLDER_GENERATIONS,
    block_name,
    heads,
    layer_count,
    required_keys,
    shape_of,
    state_key,
    state_layer,
)
from .safetensors_header import MAX_HEADER_SIZE, SafetensorsHeader, read_safetensors_header, read_shard_index
from .torch_zip import read_torch_zip

if TYPE_CHECKING:  # torch loads .pth files; safetensors headers and shard indexes need none
    import torch

Kind = Literal["checkpoint", "state", "miss"]
Format = Literal["pth", "safetensors", "safetensors-sharded"]

STATE_DTYPES = ("BF16", "F32")


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
    refuse_pointer(path)
    if path.name.endswith(".json"):
        return _inspect_sharded(path)
    with open(path, "rb") as handle:
        head = handle.read(9)
    if head.startswith(b"PK"):
        return _inspect_torch_zip(path)
    if _looks_like_safetensors(path, head):
        header = read_safetensors_header(path)
        return _classified(
            path,
            "safetensors",
            _safetensors_tensors(path, header),
            manifest_from_metadata(header.metadata or {}, path),
            files=(path,),
        )
    if head.startswith(b"\x80"):
        raise RegistryError(
            "weights.legacy-pickle",
            path,
            "a legacy (non-zip) torch pickle: it cannot be memory-mapped, and reading it means unpickling it",
            "on a machine you trust, re-save it in the zip format: torch.save(tensors, 'new.pth') (the default since torch 1.6)",
        )
    raise RegistryError(
        "weights.unknown-format",
        path,
        "neither a torch-zip .pth nor a safetensors file",
        "pass a .pth written by torch.save or a .safetensors file",
    )


def _looks_like_safetensors(path: Path, head: bytes) -> bool:
    """Named .safetensors, or a JSON header's first byte after a length the loader allows (the
    loader also takes leading whitespace; a legacy pickle's first 8 bytes read as a far larger length)."""
    if path.suffix == ".safetensors" or head[8:9] == b"{":
        return True
    return head[8:9] in (b" ", b"\t", b"\n", b"\r") and int.from_bytes(head[:8], "little") <= MAX_HEADER_SIZE


# ----------------------------------------------------------------------------------------------
# torch-zip .pth


def _inspect_torch_zip(path: Path) -> Inspection:
    """Read without torch (:mod:`.torch_zip`): names, dtypes and shapes from data.pkl, and for an
    adapter the elements content_version hashes."""
    archive = read_torch_zip(path)
    described = {name: (t.dtype, t.shape) for name, t in archive.tensors.items()}
    manifest = verify_payload(path, described, archive.data) if archive.has_manifest else None
    infos = {name: TensorInfo(dtype, shape) for name, (dtype, shape) in described.items()}
    return _classified(path, "pth", infos, manifest, files=(path,))


def _unpickler_reason(error: Exception) -> str:
    """The useful part of torch's long weights_only message (which also suggests unsafe loading)."""
    text = str(error)
    if named := re.search(r"GLOBAL ([\w.]+)", text):
        return f"it names {named[1]}"
    detail = re.search(r"WeightsUnpickler error: ([^\n]*)", text)
    return detail[1] if detail else text.splitlines()[0]


def load_tensor_map(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a torch-zip ``.pth``, memory-mapped; refuses anything but str → Tensor.

    The file is read by :func:`read_torch_zip` first, so torch's unpickler only ever sees a file
    the stricter reader accepted (and the refusals are the same whether torch is installed or not)."""
    read_torch_zip(path)
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
            "weights.corrupt-zip",
            path,
            f"torch cannot read the archive ({str(error).splitlines()[0]})",
            "download or copy the file again and compare its sha256",
        ) from error
    return _require_flat_tensor_map(path, loaded)


def _require_flat_tensor_map(path: Path, loaded: Any) -> dict[str, torch.Tensor]:
    import torch

    fix = "save a flat dict of tensors (if they are nested, e.g. under 'state_dict', save that dict alone)"
    if not isinstance(loaded, Mapping):
        raise RegistryError(
            "weights.not-tensor-map", path, f"holds a {type(loaded).__name__}, not a dict of tensors", fix
        )
    if not loaded:
        raise RegistryError("weights.not-tensor-map", path, "holds an empty dict: no tensors", fix)
    for key, value in loaded.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor) or value.layout != torch.strided:
            raise RegistryError(
                "weights.not-tensor-map", path, f"entry {key!r} is a {type(value).__name__}, not a dense tensor", fix
            )
    return dict(loaded)


# ----------------------------------------------------------------------------------------------
# safetensors


def _safetensors_tensors(path: Path, header: SafetensorsHeader) -> dict[str, TensorInfo]:
    """The tensors of a header the loader accepts, in dtypes the registry handles."""
    tensors: dict[str, TensorInfo] = {}
    for name, info in header.tensors.items():
        if info.dtype not in ITEMSIZE:
            raise RegistryError(
                "weights.dtype",
                path,
                f"tensor {name!r:.80} is {info.dtype}, a safetensors dtype the registry does not handle",
                f"convert the tensors to one of {', '.join(ITEMSIZE)}",
            )
        tensors[name] = TensorInfo(info.dtype, info.shape)
    if not tensors:
        raise RegistryError(
            "weights.not-tensor-map",
            path,
            "a valid safetensors file that holds no tensors",
            "pass a file with the weights in it",
        )
    return tensors


def _shard_file(index_path: Path, name: str) -> Path:
    if not (index_path.parent / name).is_file():
        raise RegistryError(
            "weights.bad-shard-index",
            index_path,
            f"weight_map names shard {name!r}, which is not a file beside the index",
            "put every shard next to the index and name it there by file name",
        )
    return index_path.parent / name


def _inspect_sharded(index_path: Path) -> Inspection:
    index = read_shard_index(index_path)
    tensors: dict[str, TensorInfo] = {}
    shards = tuple(_shard_file(index_path, name) for name in index.shard_names)
    for shard in shards:
        header = _safetensors_tensors(shard, read_safetensors_header(shard))
        listed = {t for t, s in index.weight_map.items() if s == shard.name}
        if set(header) != listed:
            differ = sorted(set(header) ^ listed)
            raise RegistryError(
                "weights.bad-shard-index",
                index_path,
                f"weight_map and the header of {shard.name} disagree about {differ[:3]}",
                "regenerate the index from the shards",
            )
        tensors.update(header)
    return _classified(index_path, "safetensors-sharded", tensors, files=shards)


# ----------------------------------------------------------------------------------------------
# Classification


def _classified(
    path: Path,
    fmt: Format,
    tensors: dict[str, TensorInfo],
    manifest: MissManifest | None = None,
    files: tuple[Path, ...] = (),
) -> Inspection:
    if manifest is not None:
        return Inspection(path, "miss", fmt, tensors, miss=manifest, files=files)
    if any(state_layer(name) is not None for name in tensors):
        _check_state_layout(path, tensors)
        return Inspection(path, "state", fmt, tensors, files=files)
    return Inspection(path, "checkpoint", fmt, tensors, architecture=_architecture(path, tensors), files=files)


def _check_state_layout(path: Path, tensors: dict[str, TensorInfo]) -> None:
    """Exactly ``blocks.{0..L-1}.att.time_state``, each ``[H, N, N]`` in bf16 or fp32."""
    fix = "export the State with rwkv_state_tune (one blocks.<i>.att.time_state [H, N, N] per layer)"
    layers = sorted(layer for name in tensors if (layer := state_layer(name)) is not None)
    others = [name for name in tensors if state_layer(name) is None]
    if others or layers != list(range(len(layers))):
        raise RegistryError(
            "weights.bad-state",
            path,
            f"a State file must hold exactly blocks.0..L-1.att.time_state (extra: {others[:3]}, layers: {layers})",
            fix,
        )
    first = tensors[state_key(0)]
    for name, info in tensors.items():
        h_n_n = len(info.shape) == 3 and info.shape[1] == info.shape[2]
        if not h_n_n or info.shape != first.shape or info.dtype not in STATE_DTYPES:
            raise RegistryError(
                "weights.bad-state",
                path,
                f"{name} is {info.dtype} {list(info.shape)}; every layer needs the same [H, N, N] in {' or '.join(STATE_DTYPES)}",
                fix,
            )


def _architecture(path: Path, tensors: dict[str, TensorInfo]) -> Architecture:
    """RWKV-7 shape facts, refusing anything that is not an x070 checkpoint."""
    n_layer = layer_count(tensors)
    if "emb.weight" not in tensors or not n_layer:
        raise RegistryError(
            "weights.not-rwkv",
            path,
            f"not an RWKV checkpoint: no emb.weight and blocks.<i>.* tensors (it has {', '.join(list(tensors)[:3])}, …)",
            "pass an RWKV-7 (x070) checkpoint",
        )
    for key, generation in OLDER_GENERATIONS:
        if any(name.endswith("." + key) for name in tensors):
            raise RegistryError(
                "weights.not-rwkv7",
                path,
                f"looks like an {generation} checkpoint (it has blocks.<i>.{key}); this registry holds RWKV-7 (x070) weights",
                "pass an RWKV-7 (x070) checkpoint",
            )
    for layer in range(n_layer):
        missing = [key for key in required_keys(layer) if block_name(layer, key) not in tensors]
        if missing:
            raise RegistryError(
                "weights.not-rwkv7",
                path,
                f"not an RWKV-7 (x070) checkpoint: blocks.{layer} lacks {', '.join(missing[:4])}",
                "pass a complete RWKV-7 (x070) checkpoint",
            )
    architecture = shape_of({name: info.shape for name, info in tensors.items()})
    if heads(architecture) * architecture.head_size != architecture.n_embd:
        raise RegistryError(
            "weights.inconsistent",
            path,
            f"r_k is [{architecture.n_head}, {architecture.head_size}] but n_embd is {architecture.n_embd}",
            "pass an unmodified RWKV-7 checkpoint",
        )
    _check_consistent(path, tensors, architecture)
    return architecture


def _check_consistent(path: Path, tensors: dict[str, TensorInfo], arch: Architecture) -> None:
    """Every Linear has the shape the architecture implies (State and MiSS checks rely on it)."""
    for target in default_targets(arch):
        actual = tensors[target.name].shape
        if actual != target.shape:
            raise RegistryError(
                "weights.inconsistent",
                path,
                f"{target.name} is {list(actual)} but the architecture implies {list(target.shape)}",
                "pass an unmodified RWKV-7 checkpoint",
            )


# ----------------------------------------------------------------------------------------------
# Fit checks


def check_state_fits(inspection: Inspection, arch: Architecture, file: str | Path | None = None) -> None:
    """A State needs one ``[H, N, N]`` per base layer, with the base's heads and head size."""
    file = file or inspection.path
    if inspection.kind != "state":
        raise RegistryError(
            "weights.wrong-kind", file, f"this is a {inspection.kind} file, not a State file", "pass a State file"
        )
    expected = (arch.n_layer, (heads(arch), arch.head_size, arch.head_size))
    actual = (len(inspection.tensors), inspection.tensors[state_key(0)].shape)
    if actual != expected:
        raise RegistryError(
            "state.wrong-base",
            file,
            f"State has {actual[0]} layers × {list(actual[1])} but the base has {expected[0]} layers × {list(expected[1])}",
            "register the State under the base it was trained on",
        )


def check_miss_fits(
    inspection: Inspection,
    base: Architecture | Mapping[str, Sequence[int]],
    base_sha256: str,
    file: str | Path | None = None,
) -> None:
    """An adapter fits only the exact base file it was trained on, and only its Linears' shapes.

    ``base`` is the base's Architecture or its tensor shapes by name (e.g. ``Inspection.shapes``).
    """
    file = file or inspection.path
    manifest = inspection.miss
    if manifest is None:
        raise RegistryError(
            "weights.wrong-kind", file, f"this is a {inspection.kind} file, not a MiSS adapter", "pass a MiSS adapter"
        )
    if manifest.base_sha256 != base_sha256:
        raise RegistryError(
            "miss.wrong-base",
            file,
            f"adapter was trained on base {manifest.base_sha256} but this base is {base_sha256}",
            "register the adapter under the base it was trained on, or retrain it on this base",
        )
    base_shapes = (
        {t.name: t.shape for t in default_targets(base)}
        if isinstance(base, Architecture)
        else {n: tuple(s) for n, s in base.items()}
    )
    for target in manifest.targets:
        actual = base_shapes.get(target.name)
        if actual != target.shape:
            raise RegistryError(
                "miss.wrong-shape",
                file,
                f"target {target.name} is {list(target.shape)} in miss.json but {list(actual) if actual else 'absent'} in the base",
                "register the adapter under the base it was trained on",
            )


INSPECTION_KIND = {"state": "state", "miss": "miss", "full": "checkpoint"}


def check_fits(method: str, inspection: Inspection, base: Base, file: str | Path) -> None:
    """The acceptance rule shared by add, validate and the gate: the file is of ``method``'s
    kind and fits ``base`` (State shapes, MiSS fingerprint, a full checkpoint's architecture)."""
    expected = INSPECTION_KIND[method]
    if inspection.kind != expected:
        raise RegistryError(
            "weights.wrong-kind",
            file,
            f"this is a {inspection.kind} file, not a {method} file",
            f"pass --method matching the file ({inspection.kind})",
        )
    if base.architecture is None:
        raise RegistryError(
            "base.metadata-only",
            base.name,
            "the base was declared by hash only, so its shapes are unknown and the weights cannot be checked",
            f"run `registry add-base {base.filename}` with the base file",
        )
    if method == "state":
        check_state_fits(inspection, base.architecture, file)
    elif method == "miss":
        check_miss_fits(inspection, base.architecture, base.sha256, file)
    elif inspection.architecture != base.architecture:
        raise RegistryError(
            "weights.architecture",
            file,
            f"checkpoint architecture {inspection.architecture} differs from base {base.architecture}",
            "a full fine-tune must keep its base's shapes; register the right base",
        )
