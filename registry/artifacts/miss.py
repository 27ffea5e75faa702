"""The MiSS adapter format, as rwkv_lightning's ``rwkv_miss_tune`` exports it.

A MiSS adapter is a torch-zip ``.pth`` holding one bf16 matrix ``D[out, rank]`` per adapted
Linear of the base (keyed by the Linear's weight name, e.g. ``blocks.3.att.receptance.weight``)
plus a JSON member ``<top folder>/miss.json`` describing it.  The manifest lives in the zip, not
in the pickle, so the registry can read it with :mod:`zipfile` alone, without unpickling anything.

Two fingerprints matter (see docs/formats.md):

* ``base_sha256``: sha256 of the base ``.pth`` file the adapter was trained on.  An adapter only
  fits that exact file; the inference server refuses it on any other base.
* ``content_version``: sha256 of the adapter's *normalized tensor payload* (:func:`content_version`).
  The inference server returns it as the adapter's version, so it must not depend on how the
  container happens to be laid out (zip member order, top-folder name, shared storages).

Merging into the base (what the GPU gate does) is, per target Linear ``W[out, in]``::

    W' = W + scale * D.repeat(1, ceil(in / rank))[:, :in]

i.e. the ``rank`` columns of ``D`` are tiled along the input dimension (:func:`merge_delta`).
"""

from __future__ import annotations

import json
import math
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
)

from ..core.errors import RegistryError
from ..core.hashing.digest import sha256
from ..core.models import SHA256_PATTERN, Architecture
from ..core.schemas import parse_json
from .dtypes import dtype_code, little_endian_bytes
from .rwkv7 import MISS_TARGETS, block_name, linear_shapes, miss_target_order

if TYPE_CHECKING:  # torch is imported where tensors are made: reading a manifest needs none
    import torch

MISS_FORMAT: Final = "rwkv-miss"
MISS_FORMAT_VERSION: Final = 1
MANIFEST_MEMBER = "miss.json"
ADAPTER_DTYPE = "BF16"  # safetensors name of the adapters' dtype


# ----------------------------------------------------------------------------------------------
# miss.json


class MissTarget(BaseModel):
    """One adapted Linear: its weight name and the *base* weight's shape ``[out, in]``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    shape: tuple[PositiveInt, PositiveInt]


class MissManifest(BaseModel):
    """miss.json.  Unknown fields are refused: a new field means a new ``format_version``."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["rwkv-miss"] = MISS_FORMAT
    format_version: Literal[1] = MISS_FORMAT_VERSION
    rank: PositiveInt
    scale: float = Field(allow_inf_nan=False)
    targets: list[MissTarget] = Field(min_length=1)
    base_sha256: str = Field(pattern=SHA256_PATTERN)
    content_version: str = Field(pattern=SHA256_PATTERN)

    @field_validator("targets")
    @classmethod
    def _unique_names(cls, targets: list[MissTarget]) -> list[MissTarget]:
        names = [t.name for t in targets]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"target names repeat: {', '.join(duplicates)}")
        return targets


def default_targets(base: Architecture | Mapping[str, Sequence[int]]) -> list[MissTarget]:
    """The Linears rwkv_miss_tune adapts by default (:data:`~registry.artifacts.rwkv7.MISS_TARGETS`),
    with their base shapes, in block order.

    ``base`` is either the base's :class:`Architecture` (shapes derived from it) or the base's
    tensor shapes by name (the Linears present among them).
    """
    if isinstance(base, Architecture):
        shapes = linear_shapes(base)
        return [
            MissTarget(name=block_name(i, f"{linear}.weight"), shape=shapes[f"{linear}.weight"])
            for i in range(base.n_layer)
            for linear in MISS_TARGETS
        ]
    found = [(order, name) for name in base if (order := miss_target_order(name))]
    found.sort(key=lambda item: item[0])
    return [MissTarget(name=name, shape=tuple(base[name])) for _, name in found]


# ----------------------------------------------------------------------------------------------
# content_version


def content_version(tensors: Mapping[str, torch.Tensor]) -> str:
    """sha256 of the normalized tensor payload: the same weights give the same value, whatever
    container bytes hold them (:func:`payload_version` of the tensors' elements)."""
    return payload_version(_described(tensors), lambda name: little_endian_bytes(tensors[name]))


def payload_version(
    tensors: Mapping[str, tuple[str, tuple[int, ...]]], elements: Callable[[str], bytes | memoryview]
) -> str:
    """content_version of tensors given as ``{name: (dtype's safetensors name, shape)}`` and their
    elements (row-major, little-endian) by name: what torch tensors and a file read without torch share.

    For each tensor in order of name (Unicode code point order, i.e. UTF-8 byte order), four
    fields are hashed, each as an unsigned 64-bit little-endian byte length followed by the bytes:
    the name in UTF-8, the dtype's safetensors name in ASCII (``BF16``), the shape as one u64le
    per dimension, and the elements (row-major, little-endian).
    """
    digest = sha256()
    for name in sorted(tensors):
        dtype, dims = tensors[name]
        shape = b"".join(struct.pack("<Q", d) for d in dims)
        for data in (name.encode("utf-8"), dtype.encode("ascii"), shape, elements(name)):
            digest.update(struct.pack("<Q", memoryview(data).nbytes))
            digest.update(data)
    return digest.hexdigest()


def _described(tensors: Mapping[str, torch.Tensor]) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {name: (dtype_code(t.dtype), tuple(t.shape)) for name, t in tensors.items()}


# ----------------------------------------------------------------------------------------------
# The torch-zip container


@contextmanager
def zip_refusals(path: str | Path) -> Iterator[None]:
    """Turn zipfile's errors about a damaged archive into one refusal."""
    try:
        yield
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise RegistryError(
            "weights.corrupt-zip",
            path,
            f"truncated or corrupt zip archive ({error})",
            "download or copy the file again and compare its sha256",
        ) from error


def torch_zip_folder(archive: zipfile.ZipFile, path: str | Path) -> str:
    """The archive's top folder, found from its ``<folder>/data.pkl`` member.

    torch.save names it after the file's stem (``archive`` when saving to a file object), so a
    renamed or re-saved file has another one; it is never assumed.
    """
    folders = [
        name[: -len("/data.pkl")] for name in archive.namelist() if name.endswith("/data.pkl") and name.count("/") == 1
    ]
    if len(folders) != 1:
        raise RegistryError(
            "weights.not-torch-zip",
            path,
            "a zip archive without exactly one <folder>/data.pkl member, so not written by torch.save",
            "re-save the tensors with torch.save",
        )
    return folders[0]


def write_adapter(
    path: str | Path,
    tensors: Mapping[str, torch.Tensor],
    rank: int,
    scale: float,
    targets: Sequence[MissTarget],
    base_sha256: str,
) -> MissManifest:
    """Write an adapter as rwkv_miss_tune exports it: torch.save, then miss.json appended.

    The tensors are checked against the targets first, so no inconsistent file is ever written.
    Appending keeps torch's members and offsets intact: the file still loads with
    ``torch.load(weights_only=True, mmap=True)``.
    """
    manifest = MissManifest(
        rank=rank, scale=scale, targets=list(targets), base_sha256=base_sha256, content_version=content_version(tensors)
    )
    path = Path(path)
    _check_tensors(manifest, _described(tensors), path)
    path.parent.mkdir(parents=True, exist_ok=True)
    import torch

    torch.save(dict(tensors), path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(
            f"{torch_zip_folder(archive, path)}/{MANIFEST_MEMBER}", manifest.model_dump_json(indent=2) + "\n"
        )
    return manifest


# A safetensors twin carries miss.json in its header's string-only ``__metadata__``: one
# ``miss.<field>`` key per field, strings as they are, other values as compact JSON.
METADATA_PREFIX = "miss."


def _is_text(field: str) -> bool:
    annotation = MissManifest.model_fields[field].annotation
    return annotation is str or (
        get_origin(annotation) is Literal and all(isinstance(a, str) for a in get_args(annotation))
    )


def manifest_metadata(manifest: MissManifest) -> dict[str, str]:
    data = manifest.model_dump(mode="json")
    return {METADATA_PREFIX + k: v if _is_text(k) else json.dumps(v, separators=(",", ":")) for k, v in data.items()}


def manifest_from_metadata(metadata: Mapping[str, str], path: str | Path) -> MissManifest | None:
    """miss.json from a safetensors twin's metadata, or None when it carries none."""
    fields = {k[len(METADATA_PREFIX) :]: v for k, v in metadata.items() if k.startswith(METADATA_PREFIX)}
    if not fields:
        return None
    try:
        decoded = {
            k: v if k in MissManifest.model_fields and _is_text(k) else parse_json(v, f"{METADATA_PREFIX}{k}")
            for k, v in fields.items()
        }
        return MissManifest.model_validate(decoded)
    except (RegistryError, ValidationError) as exc:
        why = f"{exc.file}: {exc.message}" if isinstance(exc, RegistryError) else str(exc).splitlines()[0]
        raise RegistryError(
            "miss.bad-manifest",
            path,
            f"the miss.* metadata is not a valid miss.json ({why})",
            "convert the adapter again with `registry convert --force`",
        ) from exc


def read_miss_json(path: str | Path) -> MissManifest:
    """The adapter's miss.json, read with zipfile only: nothing in the file is unpickled."""
    with zip_refusals(path), zipfile.ZipFile(path) as archive:
        member = f"{torch_zip_folder(archive, path)}/{MANIFEST_MEMBER}"
        if member not in archive.namelist():
            raise RegistryError(
                "miss.no-manifest",
                path,
                f"no {member} member, so this is not a MiSS adapter",
                "export the adapter with rwkv_miss_tune",
            )
        raw = archive.read(member)
    try:
        data = parse_json(raw, member)
    except RegistryError as error:
        raise RegistryError(
            "miss.bad-json",
            path,
            f"{member} is not valid JSON ({error.file}: {error.message})",
            "re-export the adapter with rwkv_miss_tune",
        ) from error
    try:
        return MissManifest.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise RegistryError(
            "miss.bad-manifest",
            path,
            f"{member} field {where}: {first['msg']} ({error.error_count()} problem(s))",
            "see docs/formats.md for the miss.json fields",
        ) from error


def _check_tensors(manifest: MissManifest, tensors: Mapping[str, tuple[str, tuple[int, ...]]], path: Path) -> None:
    """Exactly one bf16 ``[out, rank]`` tensor per target."""
    targets = {t.name: t for t in manifest.targets}
    extra = sorted(set(tensors) - set(targets))
    missing = sorted(set(targets) - set(tensors))
    if extra or missing:
        differences = ([f"not in targets: {', '.join(extra[:3])}"] if extra else []) + (
            [f"no tensor for: {', '.join(missing[:3])}"] if missing else []
        )
        raise RegistryError(
            "miss.tensor-mismatch",
            path,
            f"tensors and miss.json targets differ ({'; '.join(differences)})",
            "re-export the adapter so that miss.json lists exactly its tensors",
        )
    for name, (dtype, shape) in tensors.items():
        expected = (targets[name].shape[0], manifest.rank)
        if shape != expected or dtype != ADAPTER_DTYPE:
            raise RegistryError(
                "miss.tensor-mismatch",
                path,
                f"{name} is {dtype} {list(shape)} but a rank-{manifest.rank} target needs BF16 {list(expected)}",
                "re-export the adapter with rwkv_miss_tune",
            )


def verify_adapter(
    path: str | Path, tensors: Mapping[str, torch.Tensor], manifest: MissManifest | None = None
) -> MissManifest:
    """Check loaded adapter tensors against miss.json; refuse a file edited after export.

    ``manifest`` is read from ``path`` when not given.
    """
    return verify_payload(path, _described(tensors), lambda name: little_endian_bytes(tensors[name]), manifest)


def verify_payload(
    path: str | Path,
    tensors: Mapping[str, tuple[str, tuple[int, ...]]],
    elements: Callable[[str], bytes | memoryview],
    manifest: MissManifest | None = None,
) -> MissManifest:
    """:func:`verify_adapter` of tensors given as :func:`payload_version` takes them."""
    path = Path(path)
    manifest = manifest or read_miss_json(path)
    _check_tensors(manifest, tensors, path)
    actual = payload_version(tensors, elements)
    if actual != manifest.content_version:
        raise RegistryError(
            "miss.content-mismatch",
            path,
            f"miss.json says content_version {manifest.content_version} but the tensors hash to {actual}",
            "the file was changed after export: download it again or re-export it",
        )
    return manifest


def merge_delta(weight: torch.Tensor, delta: torch.Tensor, scale: float) -> torch.Tensor:
    """``W + scale · D.repeat(1, ceil(in/rank))[:, :in]``, computed in fp32, returned in W's dtype."""
    out_features, in_features = weight.shape
    if delta.shape[0] != out_features:
        raise ValueError(f"delta has {delta.shape[0]} rows but the weight has {out_features}")
    tiled = delta.float().repeat(1, math.ceil(in_features / delta.shape[1]))[:, :in_features]
    return (weight.float() + scale * tiled).to(weight.dtype)


# ----------------------------------------------------------------------------------------------
# Tiny adapters for tests, the demo and benchmarks
