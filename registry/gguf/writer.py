"""Write a GGUF file from x070 tensors, one tensor at a time, with the ``gguf`` package.

The header (metadata and every tensor's name, shape, type and offset) is planned from the shapes
before any data is written; then each tensor is made (a view of the memory-mapped source,
transformed by :mod:`.mapping`'s rule, a MiSS block merged in where the adapter has one), cast to
float32 as llama.cpp's converter does, stored as its type, written, and its pages dropped.  So the
process holds a few copies of one tensor at a time, whatever the model's size.  k-quants are made
from such a file in a lossless type by llama.cpp's own quantizer (``llama_model_quantize``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from .. import __version__
from ..artifacts.miss import merge_delta
from ..convert.source import unmap_touched
from ..core.errors import RegistryError
from ..core.hashing.engine import Progress
from . import llama, mapping


def require_gguf() -> None:
    """Import what export-gguf needs first, so a missing extra is said before any work."""
    try:
        import gguf  # noqa: F401, PLC0415 optional dependency: gguf
        import llama_cpp  # noqa: F401, PLC0415 optional dependency: llama_cpp
    except ImportError as exc:
        raise RegistryError(
            "args.missing-extra",
            None,
            f"export-gguf needs the gguf and llama-cpp-python packages ({exc.name} is missing)",
            "pip install 'rwkv-registry[gguf]'",
        ) from exc


def tool_versions() -> dict[str, str]:
    return {"rwkv-registry": __version__, "gguf": version("gguf"), "llama-cpp-python": version("llama-cpp-python")}


@dataclass(frozen=True)
class Source:
    """The tensors a GGUF is made from: ``tensors`` (memory-mapped x070), ``mapped`` (addresses of
    the storages that are the file's mapping, whose pages are dropped after use) and, for a merged
    MiSS adapter, its blocks and scale."""

    tensors: Mapping[str, torch.Tensor]
    mapped: frozenset[int]
    adapter: Mapping[str, torch.Tensor] | None = None
    scale: float = 1.0

    def tensor(self, name: str) -> torch.Tensor:
        tensor = self.tensors[name]
        if self.adapter is not None and name in self.adapter:
            return merge_delta(tensor, self.adapter[name], self.scale)  # bit-exact, as the gate merges it
        return tensor

    def done(self, name: str) -> None:
        tensor = self.tensors[name]
        if tensor.untyped_storage().data_ptr() in self.mapped:
            unmap_touched(tensor)


def _made(rule: mapping.Rule, source: Source) -> torch.Tensor:
    parts = [source.tensor(name) for name in rule.sources]
    first = parts[0]
    if rule.transform == "transpose":
        return first.t()
    if rule.transform in ("squeeze", "flatten"):
        return first.reshape(-1)
    if rule.transform == "stack":
        return torch.stack(parts)
    return first


CHUNK_VALUES = 1 << 22  # values converted at once: 16 MiB as float32


@dataclass(frozen=True)
class _Rows:
    """A tensor as the writer sees it (``nbytes``, ``tofile``), converted and written a block of
    rows at a time: every ggml type stores rows independently, so memory stays at one block
    whatever the tensor's size (the embedding of a 7B model is 512 MiB in bf16, 1 GiB as float32)."""

    made: torch.Tensor
    type_name: str
    nbytes: int

    def tofile(self, out: BinaryIO) -> None:
        rows = self.made.reshape(-1, self.made.shape[-1]) if self.made.dim() > 1 else self.made.reshape(1, -1)
        step = max(1, CHUNK_VALUES // max(1, rows.shape[1]))
        for start in range(0, rows.shape[0], step):
            block = (
                rows[start : start + step].to(torch.float32).contiguous().numpy()
            )  # the converter's cast: every dtype via float32
            _stored(block, self.type_name).tofile(out)


def _stored(data: np.ndarray, type_name: str) -> np.ndarray:
    import gguf  # noqa: PLC0415 optional dependency: gguf

    if type_name == "F32":
        return data
    if type_name == "F16":
        return data.astype(np.float16)
    return gguf.quants.quantize(data, gguf.GGMLQuantizationType[type_name])


def _nbytes(shape: tuple[int, ...], type_name: str) -> int:
    import gguf  # noqa: PLC0415 optional dependency: gguf

    qtype = gguf.GGMLQuantizationType[type_name]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    return int(np.prod(shape[:-1], dtype=np.int64)) * (shape[-1] // block) * size


def write_gguf(
    path: Path,
    plan: mapping.GgufPlan,
    source: Source,
    types: Callable[[str, tuple[int, ...]], str],
    kv: Mapping[str, Any],
    tokens: tuple[list[str], list[int]],
    name: str,
    progress: Progress | None = None,
) -> None:
    """Write the GGUF of ``plan`` to ``path`` (fsynced): each tensor stored as ``types(target,
    shape)`` names it (a ggml type name), the rwkv7 metadata ``kv``, the ``rwkv`` tokenizer."""
    import gguf  # noqa: PLC0415 optional dependency: gguf

    shapes = {name: tuple(t.shape) for name, t in source.tensors.items()}
    writer = gguf.GGUFWriter(None, mapping.ARCH)
    writer.add_name(name)
    for key, value in kv.items():
        if isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        else:
            writer.add_uint32(key, value)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_tokenizer_model("rwkv")
    writer.add_token_list(tokens[0])
    writer.add_token_types(tokens[1])
    writer.add_type("model")
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(0)
    writer.add_add_bos_token(False)  # the rwkv runtimes start a prompt with no token before it
    writer.add_add_eos_token(False)
    writer.add_eot_token_id(mapping.EOT_TOKEN)
    writer.add_chat_template("rwkv-world")
    planned = []
    for rule in plan.rules:
        shape = mapping.target_shape(rule, shapes)
        type_name = types(rule.target, shape)
        writer.add_tensor_info(
            rule.target,
            shape,
            np.dtype(np.float32),
            _nbytes(shape, type_name),
            raw_dtype=gguf.GGMLQuantizationType[type_name],
        )
        planned.append((rule, type_name))
    try:
        writer.write_header_to_file(path)
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for rule, type_name in planned:
            shape = mapping.target_shape(rule, shapes)
            writer.write_tensor_data(_Rows(_made(rule, source), type_name, _nbytes(shape, type_name)))  # type: ignore[arg-type]  # nbytes + tofile is all it uses
            for used in rule.sources:
                source.done(used)
            if progress is not None:
                progress(sum(source.tensors[n].numel() * source.tensors[n].element_size() for n in rule.sources))
        writer.flush()
        assert writer.fout is not None
        for out in writer.fout:
            os.fsync(out.fileno())
    finally:
        writer.close()


def quantize(lossless: Path, out: Path, ftype: int) -> None:
    """``out``: llama.cpp's quantizer's file of type ``ftype`` (llama.h's LLAMA_FTYPE_*) made from
    the ``lossless`` GGUF (in a child process: :mod:`registry.gguf.llama`), fsynced."""
    try:
        llama.quantize(lossless, out, ftype)
    except llama.LlamaFailed as exc:
        raise RegistryError(
            "gguf.quantize-failed", out, str(exc), "check free disk space and run export-gguf again"
        ) from exc
    fd = os.open(out, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
