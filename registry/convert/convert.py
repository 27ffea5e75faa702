"""Convert one weight file to safetensors twins, verified bit-exact before anything is final.

The source is opened with ``torch.load(mmap=True, weights_only=True)`` and written tensor by
tensor, so memory does not grow with the checkpoint.  Outputs are written to temporary names;
only after every tensor was re-read through safetensors and compared byte for byte does the
caller rename them (inside a registry transaction, or directly for a standalone file).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch
from safetensors import safe_open

from .. import __version__
from ..artifacts.inspect import load_tensor_map
from ..errors import RegistryError
from ..hashing import hash_file
from .source import SourceBytes
from ..layout import SHARD_INDEX
from .shards import plan_shards
from .writer import SAFETENSORS_DTYPES, check_dtypes, read_offsets, write_safetensors

Opener = Callable[[Path], BinaryIO]


@dataclass
class ConvertedFile:
    """One output: where it goes, where its verified bytes wait, and their fingerprint."""

    final: Path
    temp: Path
    sha256: str
    size: int
    tensors: list[str] = field(default_factory=list)


@dataclass
class ConversionResult:
    source: Path
    files: list[ConvertedFile]  # safetensors files (and the shard index last, when sharded)
    sharded: bool
    unchanged: bool = False  # every output already existed with identical bytes

    @property
    def main(self) -> ConvertedFile:
        """The file a registry entry points at: the shard index, or the single output."""
        return self.files[-1]

    def discard(self) -> None:
        for f in self.files:
            f.temp.unlink(missing_ok=True)


def open_for_writing(path: Path) -> BinaryIO:
    return open(path, "wb")


def _temp_for(final: Path, staging: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".partial", dir=staging)
    os.close(fd)
    return Path(name)


def _write_one(final: Path, staging: Path, names: list[str], source: SourceBytes, metadata: dict[str, str], opener: Opener, progress) -> ConvertedFile:
    temp = _temp_for(final, staging)
    try:
        with opener(temp) as sink:
            sha, size = write_safetensors(sink, names, source, metadata, progress)
            sink.flush()
            os.fsync(sink.fileno())
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise RegistryError("convert.write-failed", final, f"writing failed: {exc.strerror or exc}", "free disk space (or fix the target) and run convert again") from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return ConvertedFile(final=final, temp=temp, sha256=sha, size=size, tensors=names)


def _write_index(final: Path, staging: Path, files: list[ConvertedFile], total: int, metadata: dict[str, str]) -> ConvertedFile:
    weight_map = {name: f.final.name for f in files for name in f.tensors}
    body = {"metadata": {"total_size": total, **{k: v for k, v in metadata.items() if k != "format"}}, "weight_map": weight_map}
    data = (json.dumps(body, indent=2, sort_keys=False) + "\n").encode()
    temp = _temp_for(final, staging)
    temp.write_bytes(data)
    return ConvertedFile(final=final, temp=temp, sha256=hashlib.sha256(data).hexdigest(), size=len(data))


VERIFY_CHUNK = 64 << 20


def _same_tensor(written: BinaryIO, data_start: int, span: tuple[int, int], name: str, source: SourceBytes, buffers: tuple[memoryview, memoryview]) -> bool:
    """Compare one written tensor's bytes with the source's, a block at a time.

    Both sides are read with pread into reused buffers (page cache, not process memory), so
    memory stays at two blocks whatever the checkpoint's size.
    """
    begin, end = span
    size = source.nbytes(name)
    if end - begin != size:
        return False
    out_view, src_view = buffers
    for offset in range(0, size, VERIFY_CHUNK):
        length = min(VERIFY_CHUNK, size - offset)
        if os.preadv(written.fileno(), [out_view[:length]], data_start + begin + offset) != length:
            return False
        expected = source.read_into(name, offset, src_view[:length])
        if not np.array_equal(np.frombuffer(out_view[:length], np.uint8), np.frombuffer(expected, np.uint8)):
            return False
    return True


def _rows_as_torch_loads_them(reader, name: str, tensor: torch.Tensor) -> bool:
    """Spot check independent of our byte offsets on either side: the first and last rows as
    safetensors reads them equal the same rows of the tensor torch loaded from the source."""
    if tensor.dim() == 0:
        return torch.equal(reader.get_tensor(name).reshape(1).view(torch.uint8), tensor.reshape(1).view(torch.uint8))
    block = reader.get_slice(name)
    last = tensor.shape[0] - 1
    for rows in (slice(0, 1), slice(last, last + 1)):
        got, want = block[rows].contiguous(), tensor[rows].contiguous()
        if got.numel() and not torch.equal(got.reshape(-1).view(torch.uint8), want.reshape(-1).view(torch.uint8)):
            return False
    return True


def verify(result: ConversionResult, source: SourceBytes) -> None:
    """Re-read every output through safetensors and compare each tensor's bytes to the source."""
    seen: set[str] = set()
    buffers = (memoryview(bytearray(VERIFY_CHUNK)), memoryview(bytearray(VERIFY_CHUNK)))
    for f in result.files:
        if not f.tensors:
            continue
        with safe_open(f.temp, framework="pt") as reader:  # the real loader accepts the file
            if (reader.metadata() or {}).get("format") != "pt":
                raise RegistryError("convert.verify-failed", f.final, "metadata lacks format=pt", "report this bug")
            if sorted(reader.keys()) != sorted(f.tensors):
                raise RegistryError("convert.verify-failed", f.final, "tensor names differ from the source", "report this bug")
            for name in f.tensors:
                block = reader.get_slice(name)
                tensor = source.tensors[name]
                if block.get_shape() != list(tensor.shape) or block.get_dtype() != SAFETENSORS_DTYPES[tensor.dtype]:
                    raise RegistryError("convert.verify-failed", f.final, f"tensor {name} has another shape or dtype", "report this bug")
                if not _rows_as_torch_loads_them(reader, name, tensor):
                    raise RegistryError("convert.verify-failed", f.final, f"tensor {name} differs from what torch loads from the source", "report this bug")
        data_start, spans = read_offsets(f.temp)
        with open(f.temp, "rb") as written:
            os.posix_fadvise(written.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            for name in f.tensors:
                if not _same_tensor(written, data_start, spans[name], name, source, buffers):
                    raise RegistryError("convert.verify-failed", f.final, f"tensor {name} differs from the source", "check the disk and run convert again")
                seen.add(name)
    missing = set(source.tensors) - seen
    if missing:
        raise RegistryError("convert.verify-failed", result.source, f"{len(missing)} tensors were not written", "report this bug")


def output_names(source: Path, kind: str) -> str:
    """State and adapter files keep their name; checkpoints become model(-0000i-of-0000N).safetensors."""
    return "model.safetensors" if kind == "checkpoint" else source.with_suffix(".safetensors").name


def convert_file(
    source: Path,
    kind: str,
    metadata: dict[str, str],
    shard_size: int,
    staging: Path,
    force: bool = False,
    opener: Opener = open_for_writing,
    progress: Callable[[int], None] | None = None,
) -> ConversionResult:
    """Write verified safetensors twins of ``source`` to temp files in ``staging``.

    The caller renames ``ConvertedFile.temp`` → ``final`` (or calls ``discard``).  An existing
    output with other bytes is refused unless ``force``.
    """
    tensors = load_tensor_map(source)
    check_dtypes(tensors, str(source))
    meta = {"format": "pt", "registry_version": __version__, **metadata}
    directory = source.parent
    sizes = {name: t.numel() * t.element_size() for name, t in tensors.items()}
    plan = plan_shards(sizes, shard_size if kind == "checkpoint" else max(sum(sizes.values()), 1), output_names(source, kind))
    result = ConversionResult(source=source, files=[], sharded=plan.sharded)
    try:
        with SourceBytes(source, tensors) as reader:
            for name, names in plan.files:
                result.files.append(_write_one(directory / name, staging, names, reader, meta, opener, progress))
            if plan.sharded:
                result.files.append(_write_index(directory / SHARD_INDEX, staging, result.files, sum(sizes.values()), meta))
            verify(result, reader)
        result.unchanged = _check_existing(result, force)
    except BaseException:
        result.discard()
        raise
    return result


def _check_existing(result: ConversionResult, force: bool) -> bool:
    """True when all outputs already exist byte-identical; refuse differing ones unless forced."""
    identical = True
    for f in result.files:
        if not f.final.exists():
            identical = False
            continue
        if hash_file(f.final) == f.sha256:
            continue
        identical = False
        if not force:
            raise RegistryError("convert.exists", f.final, "an output with different content already exists", "remove it or pass --force")
    return identical
