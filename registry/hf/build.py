"""An export's files, made before anything is committed: the checkpoint converted to fla-named
shards (through the convert pipeline), config.json, generation_config.json and the world
tokenizer's files, a MiSS adapter's PEFT files or a State's initial state; each set checked with
Transformers, fla or PEFT (:mod:`registry.hf.verify`) from a temporary folder."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..artifacts.inspect import load_tensor_map
from ..artifacts.miss import read_miss_json, verify_adapter
from ..convert.pipeline import ConversionResult, Opener, convert_file
from ..convert.writer import SAFETENSORS_DTYPES, safetensors_bytes
from ..core.hashing.engine import Progress
from ..core.models import StopRules
from ..core.names import (
    ADAPTER_CONFIG_NAME,
    ADAPTER_WEIGHTS_NAME,
    CONFIG_NAME,
    GENERATION_CONFIG_NAME,
    STATE_WEIGHTS_NAME,
    TOKENIZER_CONFIG_NAME,
    TOKENIZER_NAME,
    VOCAB_NAME,
)
from ..core.pinned import Pinned
from . import files as hf_files
from . import peft
from . import state as fla_state
from .mapping import FlaPlan, fla_plan
from .source import ExportSource
from .tensors import to_fla
from .tokenizer import check_vocab, tokenizer_config_json, world_tokenizer_json, world_vocab_file
from .verify import check_model, check_peft, check_state, check_tokenizer


def _dtype_name(tensors: dict[str, torch.Tensor]) -> str:
    dtypes = {SAFETENSORS_DTYPES.get(t.dtype, "F32") for t in tensors.values()}
    return dtypes.pop() if len(dtypes) == 1 else "F32"


@dataclass
class Converted:
    """The fla-named shards in staging, and what the small files are derived from."""

    result: ConversionResult
    plan: FlaPlan
    shapes: dict[str, tuple[int, ...]]
    dtype: str


def convert_to_fla(
    root: Path,
    source: ExportSource,
    handle: Pinned,
    shard_size: int,
    force: bool,
    staging: Path,
    opener: Opener,
    progress: Progress | None,
) -> Converted:
    """The checkpoint read from ``handle``, renamed and reshaped for fla, as shards in ``staging``
    bound for the export folder under ``root``."""
    found: dict[str, Any] = {}

    def remap(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        plan = fla_plan({name: tuple(t.shape) for name, t in tensors.items()}, handle.path)
        check_vocab(source.base, plan.config["vocab_size"], handle.path)
        fla = to_fla(plan, tensors)
        found.update(plan=plan, dtype=_dtype_name(fla), shapes={name: tuple(t.shape) for name, t in fla.items()})
        return fla

    metadata = {"base_sha256": source.base.sha256, "export": "fla-rwkv7"}
    named = root / source.entry.path if source.entry else handle.path
    result = convert_file(
        named,
        "checkpoint",
        metadata,
        source.sha256,
        shard_size,
        staging,
        force,
        opener,
        progress,
        read_from=handle.stable,
        remap=remap,
        into=root / source.folder,
    )
    return Converted(result, found["plan"], found["shapes"], found["dtype"])


def json_files(converted: Converted, stop: StopRules | None) -> dict[str, bytes]:
    """config.json, generation_config.json and the tokenizer's files of a converted checkpoint."""
    return {
        CONFIG_NAME: hf_files.render(hf_files.config_json(converted.plan.config, converted.dtype)),
        GENERATION_CONFIG_NAME: hf_files.render(hf_files.generation_config_json(stop)),
        TOKENIZER_NAME: world_tokenizer_json(),
        TOKENIZER_CONFIG_NAME: tokenizer_config_json(),
        VOCAB_NAME: world_vocab_file().read_bytes(),
    }


@contextmanager
def _written(data: dict[str, bytes]) -> Iterator[Path]:
    """``data`` as files in a temporary folder, for the checks that read an export from disk."""
    with tempfile.TemporaryDirectory(prefix="registry-export-") as tmp:
        for name, content in data.items():
            Path(tmp, name).write_bytes(content)
        yield Path(tmp)


def verify_model_files(data: dict[str, bytes], shapes: dict[str, tuple[int, ...]]) -> None:
    """fla's model from config.json has exactly ``shapes``; AutoTokenizer gives the rwkv ids."""
    with _written(data) as folder:
        check_model(folder, shapes)
        check_tokenizer(folder)


def _peft_files(source: ExportSource, handle: Pinned, base_folder: str) -> dict[str, bytes]:
    """adapter_config.json and adapter_model.safetensors of the MiSS adapter read from ``handle``."""
    manifest = read_miss_json(handle.stable)
    tensors = load_tensor_map(handle.stable)
    verify_adapter(handle.path, tensors, manifest)
    metadata = {
        "format": "pt",
        "source_sha256": source.sha256,
        "base_sha256": source.base.sha256,
        "export": "peft-miss",
    }
    return {
        ADAPTER_CONFIG_NAME: hf_files.render(
            peft.adapter_config(manifest.rank, [peft.fla_module(t) for t in tensors], base_folder)
        ),
        ADAPTER_WEIGHTS_NAME: safetensors_bytes(peft.peft_tensors(tensors, manifest.scale), metadata),
    }


def _state_files(source: ExportSource, handle: Pinned) -> tuple[dict[str, bytes], dict[str, torch.Tensor]]:
    """initial_state.safetensors of the State read from ``handle``, and the State's tensors."""
    time_state = load_tensor_map(handle.stable)
    metadata = {
        "format": "pt",
        "source_sha256": source.sha256,
        "base_sha256": source.base.sha256,
        "export": "fla-rwkv7-state",
    }
    return {STATE_WEIGHTS_NAME: safetensors_bytes(fla_state.fla_state(time_state), metadata)}, time_state


def adapter_files(
    source: ExportSource, handle: Pinned, base_folder: str, base_config: dict[str, Any]
) -> dict[str, bytes]:
    """A MiSS adapter's PEFT folder or a State's initial state, checked against the base export
    (``base_folder``, whose config.json is ``base_config``)."""
    if source.entry is not None and source.entry.method == "state":
        data, time_state = _state_files(source, handle)
        with _written(data) as folder:
            check_state(folder, base_config, time_state)
        return data
    data = _peft_files(source, handle, base_folder)
    with _written(data) as folder:
        check_peft(folder, base_config)
    return data
