"""A Transformers-format checkpoint as its author made it (seed 004), checked as Transformers loads it.

A folder (the registry's root, or ``<base>/full/<data-version>/``) holding
``model.safetensors.index.json``, the safetensors shards its ``weight_map`` names, config.json, and
optionally generation_config.json, tokenizer files, ``checkpoint_manifest.json`` and evaluation.json.
Everything here reads headers and JSON only (no torch), through the package's one parser per format
(:mod:`registry.artifacts.safetensors_header` for shard headers and the index):

* every tensor of the weight_map lives in the shard it names, no shard holds a tensor the
  weight_map lacks, no ``.safetensors`` in the folder is left out of it, and ``metadata.total_size``
  is the tensors' bytes;
* for RWKV-7 (``model_type: rwkv7``, flash-linear-attention's names) config.json's shape fields
  make exactly the tensors the headers hold (:func:`registry.hf.mapping.fla_shapes`, what export-hf
  and its check use); any other architecture's config is kept as written;
* ``checkpoint_manifest.json``, where there is one, is the author's hash list: every file it lists
  is there with that sha256 (and size, where it states one).  The registry keeps it in step with
  SHA256SUMS: a command that rewrites a listed file (the card) updates that line in the same
  transaction (:func:`updated_manifest`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..artifacts.safetensors_header import read_safetensors_header, read_shard_index, tensor_bytes
from ..artifacts.shapes import shape_findings
from ..core.errors import Problem, RegistryError
from ..core.models import RWKV7_MODEL_TYPE, SHA256_PATTERN, Architecture, Checkpoint
from ..core.names import CHECKPOINT_FILES, CHECKPOINT_MANIFEST, CONFIG_NAME, ROOT_FILES, SHARD_INDEX
from ..core.schemas import parse_json, read_json
from .mapping import fla_shapes

FIX_SHARDS = (
    "restore the shards and the index as they were published (download them again), "
    "or regenerate the index from the shards"
)
FIX_MANIFEST = f"restore the file (download it again); if the file is right, correct its line in {CHECKPOINT_MANIFEST}"
_SHA = re.compile(SHA256_PATTERN)


def gate_not_applicable(checkpoint: Checkpoint) -> Problem:
    """What smoke and publish say of a checkpoint of another architecture: never a pass."""
    return Problem(
        "gate.not-applicable",
        checkpoint.path,
        f"not RWKV-7 (model_type {checkpoint.model_type}): the RWKV-7 gate does not apply, so it was not gated",
        "nothing to run: validate checks its shards, index, config and manifest; "
        "publish sends it ungated, and the card says the gate does not apply",
    )


def in_folder(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def is_checkpoint_folder(files: Iterable[str], folder: str = "") -> bool:
    """Whether ``folder`` holds a Transformers checkpoint: a weight index beside config.json."""
    files = set(files)
    return in_folder(folder, SHARD_INDEX) in files and in_folder(folder, CONFIG_NAME) in files


def checkpoint_file(rel: str, folder: str = "") -> bool:
    """Whether ``rel`` (a direct child of ``folder``) is one of a checkpoint's files."""
    prefix = f"{folder}/" if folder else ""
    if not rel.startswith(prefix) or "/" in rel[len(prefix) :]:
        return False
    name = rel[len(prefix) :]
    return name in CHECKPOINT_FILES or name.endswith(".safetensors")


@dataclass(frozen=True)
class CheckpointFacts:
    """What a checkpoint folder holds, as read from its index, headers and config."""

    folder: str
    index: str  # the weight index's registry path
    shards: list[str]  # registry paths, in the weight_map's order of names
    files: list[str]  # its other files (config, generation config, tokenizer files, the manifest)
    config: dict[str, Any]
    architecture: str
    model_type: str
    manifest: str | None


def _config(root: Path, rel: str) -> dict[str, Any]:
    config = read_json(root / rel, rel)
    if not isinstance(config, dict):
        raise RegistryError(
            "checkpoint.bad-config", rel, "is not a JSON object", "restore the config.json Transformers wrote"
        )
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise RegistryError(
            "checkpoint.bad-config",
            rel,
            "names no model_type, so Transformers cannot tell which model to build",
            "restore the config.json Transformers wrote (it names model_type)",
        )
    return config


def read_checkpoint(root: Path, folder: str, files: Iterable[str], registry_root: bool = True) -> CheckpointFacts:
    """The checkpoint in ``folder`` (``files``: the registry's files), every problem of it refused
    at once, one line each (:func:`checkpoint_problems`); ``registry_root``: ``root`` is the
    registry's, whose README.md and evaluation.json are root files (a folder to be added: not)."""
    files = sorted(files)
    index_rel = in_folder(folder, SHARD_INDEX)
    config = _config(root, in_folder(folder, CONFIG_NAME))
    problems = list(_shard_problems(root, folder, files, config))
    if problems:
        raise RegistryError.of(problems)
    parsed = read_shard_index(root / index_rel)
    own = [rel for rel in files if checkpoint_file(rel, folder)]
    shards = [in_folder(folder, name) for name in parsed.shard_names]
    manifest = in_folder(folder, CHECKPOINT_MANIFEST)
    architectures = config.get("architectures")
    architecture = (
        architectures[0]
        if isinstance(architectures, list) and architectures and isinstance(architectures[0], str)
        else config["model_type"]
    )
    return CheckpointFacts(
        folder=folder,
        index=index_rel,
        shards=shards,
        files=[rel for rel in own if rel not in {*shards, index_rel, manifest, *(ROOT_FILES if registry_root else ())}],
        config=config,
        architecture=architecture,
        model_type=config["model_type"],
        manifest=manifest if manifest in own else None,
    )


def _shard_problems(root: Path, folder: str, files: list[str], config: dict[str, Any]) -> Iterable[Problem]:
    """The weight index against the shards' headers, as Transformers loads them."""
    index_rel = in_folder(folder, SHARD_INDEX)
    try:
        parsed = read_shard_index(root / index_rel)
    except RegistryError as err:
        yield from err.naming(str(root / index_rel), index_rel).problems
        return
    where: dict[str, str] = {}  # tensor -> the shard whose header holds it
    shapes: dict[str, tuple[int, ...]] = {}
    total = 0
    for name in parsed.shard_names:
        rel = in_folder(folder, name)
        if rel not in files:
            yield Problem(
                "checkpoint.missing-shard",
                index_rel,
                f"weight_map names shard {name}, which is not in the folder",
                FIX_SHARDS,
            )
            continue
        try:
            header = read_safetensors_header(root / rel)
        except RegistryError as err:
            yield from err.naming(str(root / rel), rel).problems
            continue
        for tensor, info in header.tensors.items():
            where[tensor] = name
            shapes[tensor] = tuple(info.shape)
            size = tensor_bytes(info)
            total += size if isinstance(size, int) else 0
    for tensor, shard in parsed.weight_map.items():
        held = where.get(tensor)
        if held is not None and held != shard:
            yield Problem(
                "checkpoint.wrong-shard",
                index_rel,
                f"weight_map sends {tensor} to {shard}, but {held} holds it (Transformers would not find it)",
                FIX_SHARDS,
            )
        elif held is None and in_folder(folder, shard) in files:
            yield Problem(
                "checkpoint.missing-tensor",
                index_rel,
                f"weight_map sends {tensor} to {shard}, which does not hold it",
                FIX_SHARDS,
            )
    for tensor, shard in sorted(where.items()):
        if tensor not in parsed.weight_map:
            yield Problem(
                "checkpoint.unlisted-tensor",
                in_folder(folder, shard),
                f"holds {tensor}, which {SHARD_INDEX}'s weight_map does not list (Transformers would not load it)",
                FIX_SHARDS,
            )
    named = {in_folder(folder, n) for n in parsed.shard_names}
    for rel in files:
        if checkpoint_file(rel, folder) and rel.endswith(".safetensors") and rel not in named:
            yield Problem(
                "checkpoint.stray-shard",
                rel,
                f"a safetensors file beside {SHARD_INDEX} that its weight_map does not name",
                f"name its tensors in the weight_map, or move it out of {folder or 'the root'}",
            )
    if parsed.total_size is None:
        yield Problem(
            "checkpoint.total-size",
            index_rel,
            f"metadata.total_size is missing (the shards hold {total} bytes)",
            FIX_SHARDS,
        )
    elif parsed.total_size != total:
        yield Problem(
            "checkpoint.total-size",
            index_rel,
            f"metadata.total_size is {parsed.total_size} but the shards' tensors hold {total} bytes",
            FIX_SHARDS,
        )
    if config.get("model_type") == RWKV7_MODEL_TYPE:
        yield from _rwkv7_config_problems(in_folder(folder, CONFIG_NAME), config, shapes)


def _rwkv7_config_problems(
    rel: str, config: Mapping[str, Any], shapes: dict[str, tuple[int, ...]]
) -> Iterable[Problem]:
    """config.json's shape fields make exactly the tensors the headers hold (fla's RWKV-7)."""
    fix = (
        "correct config.json's shape fields to the shards' tensors (hidden_size, num_hidden_layers, "
        "num_heads, head_dim, intermediate_size, vocab_size, the low-rank dims)"
    )
    try:
        want = fla_shapes(config)
    except (KeyError, TypeError, ValueError) as exc:
        yield Problem("checkpoint.config-shapes", rel, f"lacks a shape field fla's RWKV-7 needs ({exc})", fix)
        return
    for message in shape_findings(
        want,
        shapes,
        missing="makes {name}, which no shard holds ({count} of its tensors missing)",
        unexpected="makes no {name}, which a shard holds",
        wrong="makes {name} {want}, but the shard holds {found}",
    ):
        yield Problem("checkpoint.config-shapes", rel, message, fix)


def base_fit_problems(
    rel: str, config: Mapping[str, Any], architecture: Architecture | None, base: str
) -> list[Problem]:
    """An RWKV-7 checkpoint under ``<base>/full/<v>/``: config.json's shape (checked against the
    shards already) is the base's, as a full fine-tune keeps its base's shape."""
    if architecture is None or config.get("model_type") != RWKV7_MODEL_TYPE:
        return []
    recorded = {
        "num_hidden_layers": architecture.n_layer,
        "hidden_size": architecture.n_embd,
        "head_dim": architecture.head_size,
        "vocab_size": architecture.vocab_size,
        "intermediate_size": architecture.dim_ffn,
    }
    return [
        Problem(
            "checkpoint.wrong-base",
            rel,
            f"says {key} {config.get(key)} but the base {base} has {want}",
            "add it under the base it was trained from (--base), or add that base first",
        )
        for key, want in recorded.items()
        if want is not None and config.get(key) != want
    ]


def checkpoint_problems(root: Path, folder: str, files: Iterable[str]) -> list[Problem]:
    """Every finding of the checkpoint in ``folder`` (empty when it is sound)."""
    try:
        read_checkpoint(root, folder, files)
    except RegistryError as err:
        return list(err.problems)
    return []


# ----------------------------------------------------------------------------------------------
# checkpoint_manifest.json: the author's hash list


@dataclass(frozen=True)
class ManifestLine:
    sha256: str
    size: int | None


def _refuse_manifest(rel: str, message: str) -> RegistryError:
    return RegistryError(
        "checkpoint.bad-manifest",
        rel,
        message,
        'write it as {"files": [{"path": …, "sha256": …, "size": …}, …]} or {"files": {"<path>": "<sha256>"}}',
    )


def _lines(data: Any, rel: str) -> list[tuple[str, Any]]:
    """(path, its record) pairs, in whichever of the accepted shapes the author wrote."""
    files = data.get("files") if isinstance(data, dict) and "files" in data else data
    if isinstance(files, dict):
        return list(files.items())
    if isinstance(files, list):
        out = []
        for item in files:
            path = next(
                (item[k] for k in ("path", "file", "filename", "name") if isinstance(item, dict) and k in item), None
            )
            if not isinstance(path, str):
                raise _refuse_manifest(rel, f"an item of files names no path: {json.dumps(item)[:60]}")
            out.append((path, item))
        return out
    raise _refuse_manifest(rel, "holds no list or object of files")


def read_manifest(data: bytes, rel: str) -> dict[str, ManifestLine]:
    """The manifest's lines: path (inside the checkpoint's folder) → sha256 and, where stated, size."""
    parsed = parse_json(data, rel)
    out = {}
    for path, record in _lines(parsed, rel):
        sha = record if isinstance(record, str) else record.get("sha256") if isinstance(record, dict) else None
        size = record.get("size") if isinstance(record, dict) else None
        if not isinstance(sha, str) or not _SHA.fullmatch(sha.lower()):
            raise _refuse_manifest(rel, f"{path}: no sha256 of 64 hex digits")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise _refuse_manifest(rel, f"{path}: size {json.dumps(size)[:30]} is not a byte count")
        out[path.removeprefix("./")] = ManifestLine(sha.lower(), size)
    return out


def manifest_problems(
    rel: str, data: bytes, folder: str, digests: Mapping[str, str], sizes: Mapping[str, int]
) -> list[Problem]:
    """The manifest ``rel`` (bytes ``data``) against the files (``digests``/``sizes`` by registry path),
    one finding per file it gets wrong, each naming the manifest."""
    try:
        lines = read_manifest(data, rel)
    except RegistryError as err:
        return list(err.problems)
    problems = []
    for path, line in sorted(lines.items()):
        target = in_folder(folder, path)
        if target not in digests:
            problems.append(
                Problem(
                    "checkpoint.manifest-missing",
                    rel,
                    f"lists {path}, which is not in the folder",
                    f"restore {path} (download it again), or remove its line from {CHECKPOINT_MANIFEST}",
                )
            )
        elif digests[target] != line.sha256:
            problems.append(
                Problem(
                    "checkpoint.manifest-mismatch",
                    rel,
                    f"says {path} has sha256 {line.sha256[:12]}…, but the file's is {digests[target][:12]}…",
                    f"{FIX_MANIFEST} (the shard or file changed since the author hashed it)",
                )
            )
        elif line.size is not None and sizes.get(target) != line.size:
            problems.append(
                Problem(
                    "checkpoint.manifest-mismatch",
                    rel,
                    f"says {path} is {line.size} bytes, but the file is {sizes.get(target)}",
                    FIX_MANIFEST,
                )
            )
    return problems


def updated_manifest(data: bytes, rel: str, changed: Mapping[str, tuple[str, int]]) -> bytes | None:
    """The manifest with the lines of ``changed`` (path inside the folder → new sha256 and size)
    rewritten, every other byte of meaning kept (key order, the author's fields, indentation), or
    None when it lists none of them."""
    parsed = parse_json(data, rel)
    read_manifest(data, rel)  # the shape is one we can write back
    touched = False
    files = parsed.get("files") if isinstance(parsed, dict) and "files" in parsed else parsed
    if isinstance(files, dict):
        for path, record in list(files.items()):
            new = changed.get(path.removeprefix("./"))
            if new is None:
                continue
            touched = True
            if isinstance(record, str):
                files[path] = new[0]
            else:
                record["sha256"] = new[0]
                if "size" in record:
                    record["size"] = new[1]
    elif isinstance(files, list):
        for item in files:
            path = next(item[k] for k in ("path", "file", "filename", "name") if k in item)
            new = changed.get(path.removeprefix("./"))
            if new is not None:
                touched = True
                item["sha256"] = new[0]
                if "size" in item:
                    item["size"] = new[1]
    if not touched:
        return None
    text = data.decode("utf-8")
    indent_match = re.search(r"\n( +|\t)\S", text)
    indent = indent_match.group(1) if indent_match else None
    out = json.dumps(parsed, indent=indent, ensure_ascii=False)
    return (out + ("\n" if text.endswith("\n") else "")).encode("utf-8")
