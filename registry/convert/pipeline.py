"""Convert one weight file to safetensors twins, verified bit-exact before anything is final.

The source is opened with ``torch.load(mmap=True, weights_only=True)`` and written tensor by
tensor, so memory does not grow with the checkpoint.  Outputs are written to temporary names;
each tensor is read back from the file and compared byte for byte with the source as soon as
it is written, and each finished file is reopened through safetensors and spot-checked against
what torch loads.  Only then does the caller rename them (inside a registry transaction, or
directly for a standalone file).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open

from .. import __version__
from ..artifacts.inspect import load_tensor_map
from ..core.errors import Exit, RegistryError
from ..core.files import FILE_MODE, write_temp
from ..core.hashing import hash_file
from ..core.hashing.digest import sha256_hex
from ..core.hashing.engine import Progress
from ..core.names import SHARD_INDEX, SINGLE_SAFETENSORS
from .readback import ReadBack
from .shards import plan_shards
from .source import SourceBytes
from .writer import (
    SAFETENSORS_DTYPES,
    Layout,
    OutputFile,
    check_dtypes,
    copy_tensors,
    plan_layout,
)

Opener = Callable[[Path], OutputFile]
SHA256_PLACEHOLDER = "0" * 64  # a hex sha256 always has 64 digits, so the header keeps its size


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


def _temp_for(final: Path, staging: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".partial", dir=staging)
    os.fchmod(fd, FILE_MODE)  # mkstemp's 0600 would make the published twin private
    os.close(fd)
    return Path(name)


def _write_one(
    final: Path,
    staging: Path,
    names: list[str],
    source: SourceBytes,
    metadata: dict[str, str],
    source_sha256: Future[str],
    opener: Opener,
    progress: Progress | None,
) -> ConvertedFile:
    """Write one output to a temp file while it is read back, compared and hashed as it lands."""
    temp = _temp_for(final, staging)
    entries = [(name, source.tensors[name]) for name in names]
    draft = plan_layout(entries, {**metadata, "source_sha256": SHA256_PLACEHOLDER})
    try:
        with opener(temp) as out, ReadBack(temp) as readback:
            differing = _copy_then_header(
                out,
                readback,
                draft,
                lambda: plan_layout(entries, {**metadata, "source_sha256": source_sha256.result()}),
                source,
                progress,
            )
            out.sync()
            checked = readback.finish()
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise RegistryError(
            "convert.write-failed",
            final,
            f"writing failed: {exc.strerror or exc}",
            "free disk space (or fix the target) and run convert again",
            Exit.MACHINE,
        ) from exc
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    mismatch = differing or checked.mismatch
    if mismatch:
        temp.unlink(missing_ok=True)
        raise RegistryError("convert.verify-failed", final, mismatch, "check the disk and run convert again")
    return ConvertedFile(final=final, temp=temp, sha256=checked.sha256, size=checked.size, tensors=names)


def _copy_then_header(
    out: OutputFile,
    readback: ReadBack,
    draft: Layout,
    final_layout: Callable[[], Layout],
    source: SourceBytes,
    progress: Progress | None,
) -> str | None:
    """Copy the tensor bytes on a worker thread from the start, while this thread waits for the
    header's last value (the source's sha256: at once for a registered source) and writes the
    header.  Returns the first tensor that differs from the source, if any."""
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="copy") as copier:
        copying = copier.submit(copy_tensors, out, draft, source, readback.landed, progress, stop)
        try:
            layout = final_layout()
            if layout.spans != draft.spans or len(layout.header) != len(draft.header):
                raise AssertionError("the source sha256 changed the header's size")
            out.write_at(layout.header, 0)
            readback.header_written(layout.header)
            return copying.result()
        except BaseException:
            stop.set()  # the copier stops after its current piece; the caller removes the file
            raise


def _write_index(
    final: Path, staging: Path, files: list[ConvertedFile], total: int, metadata: dict[str, str]
) -> ConvertedFile:
    weight_map = {name: f.final.name for f in files for name in f.tensors}
    body = {
        "metadata": {"total_size": total, **{k: v for k, v in metadata.items() if k != "format"}},
        "weight_map": weight_map,
    }
    data = (json.dumps(body, indent=2, sort_keys=False) + "\n").encode()
    temp = write_temp(final, data, staging)
    return ConvertedFile(final=final, temp=temp, sha256=sha256_hex(data), size=len(data))


def _rows_as_torch_loads_them(reader: safe_open, name: str, tensor: torch.Tensor) -> bool:
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
    """Reopen every finished output through safetensors: names, shapes, dtypes and end rows agree
    with what torch loads from the source.  (Every tensor's bytes were already read back from
    the file and compared with the source as they were copied: see :func:`.writer.copy_tensors`.)"""
    seen: set[str] = set()
    for f in result.files:
        if not f.tensors:
            continue
        with safe_open(f.temp, framework="pt") as reader:  # the real loader accepts the file
            if (reader.metadata() or {}).get("format") != "pt":
                raise RegistryError("convert.verify-failed", f.final, "metadata lacks format=pt", "report this bug")
            if sorted(reader.keys()) != sorted(f.tensors):
                raise RegistryError(
                    "convert.verify-failed", f.final, "tensor names differ from the source", "report this bug"
                )
            for name in f.tensors:
                block = reader.get_slice(name)
                tensor = source.tensors[name]
                if block.get_shape() != list(tensor.shape) or block.get_dtype() != SAFETENSORS_DTYPES[tensor.dtype]:
                    raise RegistryError(
                        "convert.verify-failed", f.final, f"tensor {name} has another shape or dtype", "report this bug"
                    )
                same_rows = _rows_as_torch_loads_them(reader, name, tensor)
                source.drop_pages(name)
                if not same_rows:
                    raise RegistryError(
                        "convert.verify-failed",
                        f.final,
                        f"tensor {name} differs from what torch loads from the source",
                        "report this bug",
                    )
                seen.add(name)
    missing = set(source.tensors) - seen
    if missing:
        raise RegistryError(
            "convert.verify-failed", result.source, f"{len(missing)} tensors were not written", "report this bug"
        )


def output_names(source: Path, kind: str) -> str:
    """State and adapter files keep their name; checkpoints become model(-0000i-of-0000N).safetensors."""
    return SINGLE_SAFETENSORS if kind == "checkpoint" else source.with_suffix(".safetensors").name


def convert_file(
    source: Path,
    kind: str,
    metadata: dict[str, str],
    source_sha256: str | Future[str],
    shard_size: int,
    staging: Path,
    force: bool = False,
    opener: Opener = OutputFile,
    progress: Progress | None = None,
    read_from: Path | None = None,
    remap: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]] | None = None,
    into: Path | None = None,
) -> ConversionResult:
    """Write verified safetensors twins of ``source`` to temp files in ``staging``.

    The bytes are read from ``read_from`` when given (a pinned open file of ``source``, see
    :mod:`registry.core.pinned`); ``source`` names the outputs, which go beside it or ``into`` a folder.

    ``remap`` turns the loaded tensors into the ones to write, as views of them (the Transformers
    export: other names, ``[1, 1, C]`` viewed as ``[C]``, transposed matrices).  A contiguous view
    is still a byte range of the source and is copied as one; any other is made contiguous one
    tensor at a time, and every output byte is compared with the view it was written from.

    ``source_sha256`` goes into every header; a future (a hash still being computed) lets the
    tensor bytes be copied meanwhile.  The caller renames ``ConvertedFile.temp`` → ``final``
    (or calls ``discard``).  An existing output with other bytes is refused unless ``force``.
    """
    reading = read_from or source
    tensors = load_tensor_map(reading)
    if remap is not None:
        tensors = remap(tensors)
    check_dtypes(tensors, str(source))
    digest = source_sha256 if isinstance(source_sha256, Future) else _known(source_sha256)
    meta = {"format": "pt", "registry_version": __version__, **metadata}
    directory = into or source.parent
    sizes = {name: t.numel() * t.element_size() for name, t in tensors.items()}
    plan = plan_shards(
        sizes, shard_size if kind == "checkpoint" else max(sum(sizes.values()), 1), output_names(source, kind)
    )
    result = ConversionResult(source=source, files=[], sharded=plan.sharded)
    try:
        with SourceBytes(reading, tensors) as reader:
            for name, names in plan.files:
                result.files.append(
                    _write_one(directory / name, staging, names, reader, meta, digest, opener, progress)
                )
            if plan.sharded:
                meta["source_sha256"] = digest.result()
                result.files.append(
                    _write_index(directory / SHARD_INDEX, staging, result.files, sum(sizes.values()), meta)
                )
            verify(result, reader)
        result.unchanged = _check_existing(result, force)
    except BaseException:
        result.discard()
        raise
    return result


def _known(value: str) -> Future[str]:
    done: Future[str] = Future()
    done.set_result(value)
    return done


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
            raise RegistryError(
                "convert.exists",
                f.final,
                "an output with different content already exists",
                "remove it or pass --force",
            )
    return identical
