"""``registry export-gguf``: GGUF files (llama.cpp, Ollama) of a base, a full fine-tune, or a MiSS
adapter merged into its base, each gated against our fp32 reference before it is registered.

The files go in the same repository, in a ``gguf/`` folder beside ``hf/``: ``<base>/gguf/`` for a
base, ``gguf/`` beside a full entry or a MiSS adapter (docs/formats.md says why not a sibling
``-GGUF`` repository).  Each is written tensor by tensor from the memory-mapped ``.pth``
(:mod:`registry.gguf.writer`; f16, bf16 and q8_0 with the ``gguf`` package, k-quants by llama.cpp's
quantizer from a lossless GGUF), hashed, run through llama.cpp and compared with our runtime
(:mod:`registry.gguf.gate`); a file that fails its gate is refused and nothing changes.  Passing
files are moved into place, listed in index.json (``ggufs``: lineage, tools, sha256, size, gate) and
SHA256SUMS, in one transaction; their receipts go to ``.registry/gates/`` like every gate's.
A State is an initial recurrent state, not a model, and is refused.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

from ..artifacts.inspect import load_tensor_map
from ..artifacts.miss import read_miss_json, verify_adapter
from ..atomic import FILE_MODE, Transaction, atomic_write, transaction
from ..convert.source import locate_tensors
from ..derived import stage_derived
from ..errors import Exit, RegistryError
from ..gate.prompts import tokenizer
from ..gate.receipt import CheckResult, Receipt, receipt_path
from ..gate.runtime import check_miss_fits
from ..gate.seal import sealed
from ..gguf import gate, mapping, writer
from ..hashing import hash_file
from ..hashing.engine import Progress
from ..hf.tokenizer import check_vocab, read_vocab, world_vocab_file
from ..index_rules import index_to_change
from ..layout import gguf_path
from ..models import GgufFile, Index
from ..names import INDEX_NAME
from ..pinned import Pinned
from ..repo import Repo, render_index
from ..safepath import check_dir
from .export_hf import ExportRequest as HfRequest
from .export_hf import ExportSource, export_source, pinned_source
from .smoke import gate_summary

DEFAULT_TYPES = ("q8_0",)


@dataclass(frozen=True)
class GgufRequest:
    """A base (``base`` + ``base_file``), a full entry, or a MiSS adapter (``entry``; its base's
    ``.pth`` in ``base_file``), to the GGUF ``types``."""

    entry: str | None = None
    base: str | None = None
    base_file: Path | None = None
    types: tuple[str, ...] = DEFAULT_TYPES
    force: bool = False
    gate: bool = True  # bench/bench_gguf.py measures the writing alone


@dataclass
class _Made:
    gguf_type: str
    rel: str
    temp: Path
    sha256: str
    size: int
    receipt: Receipt | None = None
    lossless: tuple[Path, str] | None = None  # a k-quant's lossless GGUF and the type whose bound it is held to

    def discard(self, keep_file: bool = False) -> None:
        if not keep_file:
            self.temp.unlink(missing_ok=True)
        if self.lossless is not None:
            self.lossless[0].unlink(missing_ok=True)


@dataclass
class _Inputs:
    source: ExportSource
    tensors: dict[str, torch.Tensor]
    mapped: frozenset[int]
    adapter: dict[str, torch.Tensor] | None = None
    scale: float = 1.0
    files: dict[str, str] = field(default_factory=dict)  # registered files the GGUF is made from


def _refuse_state(source: ExportSource) -> None:
    if source.entry is not None and source.entry.method == "state":
        raise RegistryError(
            "gguf.state", source.entry.path, "is a State (an initial recurrent state, not a model), and a GGUF file holds a model",
            f"export the base as GGUF (`registry export-gguf --base {source.base.name} --base-file {source.base.filename}`) and start it from the State with the rwkv runtime or the Transformers export",
        )  # fmt: skip


@contextmanager
def _inputs(repo: Repo, source: ExportSource, request: GgufRequest) -> Iterator[_Inputs]:
    """The source's tensors, memory-mapped from pinned, hash-checked files (for a MiSS adapter: its
    base's, with the adapter's blocks to merge)."""
    with ExitStack() as stack:
        if source.entry is not None and source.entry.method == "miss":
            if request.base_file is None:
                raise RegistryError(
                    "args.missing-file", source.entry.path, "is a MiSS adapter: its GGUF is the adapter merged into its base, and the registry does not hold bases",
                    f"pass --base-file {source.base.filename}",
                )  # fmt: skip
            adapter_pin: Pinned = stack.enter_context(pinned_source(repo, source, None))
            base = ExportSource(source.base.name, source.base, None, source.base.sha256, "")
            handle: Pinned = stack.enter_context(pinned_source(repo, base, request.base_file))
            manifest = read_miss_json(adapter_pin.stable)
            adapter = load_tensor_map(adapter_pin.stable)
            verify_adapter(adapter_pin.path, adapter, manifest)
            tensors = load_tensor_map(handle.stable)
            check_miss_fits(tensors, adapter, source=source.entry.path)
            yield _Inputs(source, tensors, locate_tensors(handle.stable, tensors).mapped, adapter, manifest.scale, {source.entry.path: source.sha256})
            return
        handle = stack.enter_context(pinned_source(repo, source, request.base_file))
        tensors = load_tensor_map(handle.stable)
        files = {source.entry.path: source.sha256} if source.entry is not None else {}
        yield _Inputs(source, tensors, locate_tensors(handle.stable, tensors).mapped, files=files)


def _reference_tensors(inputs: _Inputs) -> dict[str, torch.Tensor]:
    if inputs.adapter is None:
        return inputs.tensors
    source = writer.Source(inputs.tensors, inputs.mapped, inputs.adapter, inputs.scale)
    return {name: source.tensor(name) for name in inputs.tensors}


def _temp(staging: Path, rel: str) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{Path(rel).name}.", suffix=".partial", dir=staging)
    os.fchmod(fd, FILE_MODE)
    os.close(fd)
    return Path(name)


def _lossless(dtypes: set[torch.dtype]) -> str:
    """The type of the file a k-quant is made from: the source's own, so nothing is lost before the quantizer."""
    return {torch.bfloat16: "BF16", torch.float16: "F16"}.get(dtypes.pop(), "F32") if len(dtypes) == 1 else "F32"


def _write(inputs: _Inputs, plan: mapping.GgufPlan, gguf_type: str, rel: str, staging: Path, progress: Progress | None) -> _Made:
    source = inputs.source
    kv_common = mapping.lineage_metadata(source.sha256, source.base.sha256, gguf_type, inputs.adapter is not None)
    tokens = mapping.world_tokens(read_vocab(world_vocab_file()), plan.config["vocab_size"])
    stream = writer.Source(inputs.tensors, inputs.mapped, inputs.adapter, inputs.scale)
    name = Path(rel).stem
    temp = _temp(staging, rel)
    middle: Path | None = None
    try:
        if gguf_type in mapping.DIRECT_TYPES:
            kv = {**mapping.metadata(plan.config, mapping.DIRECT_TYPES[gguf_type]), **kv_common}
            writer.write_gguf(temp, plan, stream, lambda target, shape: mapping.storage_type(target, shape, gguf_type), kv, tokens, name, progress)
        else:
            lossless = _lossless({t.dtype for t in inputs.tensors.values()})
            kv = {**mapping.metadata(plan.config, mapping.LOSSLESS_FTYPE[lossless]), **kv_common}
            middle = _temp(staging, rel + ".lossless")
            forced = {"F16": "f16", "BF16": "bf16"}.get(lossless)
            writer.write_gguf(
                middle, plan, stream, lambda target, shape: mapping.storage_type(target, shape, forced) if forced else "F32", kv, tokens, name, progress,
            )  # fmt: skip
            writer.quantize(middle, temp, mapping.QUANTIZER_TYPES[gguf_type], gate._threads())
            # kept until the gate has run it: its tight bound is what catches a mapping error
            # that a k-quant's loose one would let through
            return _Made(gguf_type, rel, temp, hash_file(temp), temp.stat().st_size, lossless=(middle, forced or "f16"))
    except OSError as exc:
        _Made(gguf_type, rel, temp, "", 0, lossless=(middle, "") if middle else None).discard()
        raise RegistryError("gguf.write-failed", rel, f"writing failed: {exc.strerror or exc}", "free disk space and run export-gguf again") from exc
    except BaseException:
        _Made(gguf_type, rel, temp, "", 0, lossless=(middle, "") if middle else None).discard()
        raise
    return _Made(gguf_type, rel, temp, hash_file(temp), temp.stat().st_size)


def _check_place(repo: Repo, index: Index, made: _Made, force: bool) -> None:
    check_dir(repo.root, made.rel.rsplit("/", 1)[0])  # a linked folder is refused before anything in it is read
    target = repo.root / made.rel
    if target.is_file() and not force and hash_file(target) != made.sha256:
        raise RegistryError("gguf.exists", made.rel, "a GGUF file with different content already exists", "pass --force to replace it")
    if (target.exists() or target.is_symlink()) and not target.is_file():
        raise RegistryError("gguf.exists", made.rel, "is not a regular file", "move it out of the gguf folder")
    if target.is_file() and not any(g.path == made.rel for g in index.ggufs):
        raise RegistryError("gguf.exists", made.rel, "is in the gguf folder, but no GGUF record lists it", "move it out of the gguf folder")


def _record(repo: Repo, txn: Transaction, index: Index, inputs: _Inputs, made: list[_Made], progress: Progress | None) -> list[GgufFile]:
    source = inputs.source
    tools = writer.tool_versions()
    records = []
    for item in made:
        summary, figures = None, {}
        if item.receipt is not None:
            receipt = item.receipt
            summary = gate_summary(receipt)
            logits = next(c for c in receipt.checks if c.name == "gguf-logits")
            figures = {"nmse": logits.figures["nmse"], "top1_agreement": logits.figures["top1_agreement"]}
        record = GgufFile(
            path=item.rel, source=source.label, source_sha256=source.sha256, base_sha256=source.base.sha256, merged=inputs.adapter is not None,
            type=item.gguf_type, tools=tools, sha256=item.sha256, size=item.size, gate=summary, **figures,
        )  # fmt: skip
        txn.move(item.temp, item.rel, item.sha256)
        index.ggufs = [g for g in index.ggufs if g.path != item.rel] + [record]
        records.append(record)
    index.ggufs.sort(key=lambda g: g.path)
    txn.write(INDEX_NAME, render_index(index))
    stage_derived(repo, txn, index, progress)
    return records


def _write_receipts(repo: Repo, made: list[_Made]) -> None:
    """Receipts before the commit: one for bytes that never land is harmless (keyed by sha256)."""
    repo.gates_dir.mkdir(parents=True, exist_ok=True)
    for item in made:
        if item.receipt is not None:
            atomic_write(receipt_path(repo.gates_dir, item.sha256), (sealed(item.receipt).model_dump_json(indent=2) + "\n").encode())


def _said(check: CheckResult) -> str:
    if not check.name.endswith("-logits"):
        return check.name
    f, t = check.figures, check.thresholds
    return f"{check.name}: NMSE {float(f['nmse'] or 0):.2e} (at most {t['nmse_max']}), top-1 agreement {float(f['top1_agreement'] or 0):.3f} (at least {t['top1_min']})"


def _gate(inputs: _Inputs, made: list[_Made]) -> None:
    """Gate every file; refuse them all (exit 1, nothing changed) when one fails."""
    reference = gate.reference_logits(_reference_tensors(inputs), tokenizer().prompt_ids)
    method: Literal["full", "miss"] = "miss" if inputs.adapter is not None else "full"
    for item in made:
        files = {**inputs.files, item.rel: item.sha256}
        item.receipt = gate.gate_gguf(item.temp, item.rel, item.sha256, item.gguf_type, method, inputs.source.base.sha256, files, reference, item.lossless)
        item.discard(keep_file=True)
    failed = [item for item in made if item.receipt is not None and not item.receipt.passed]
    if failed:
        item = failed[0]
        assert item.receipt is not None
        checks = "; ".join(_said(c) for c in item.receipt.failed_checks())
        raise RegistryError(
            "gguf.gate-failed", item.rel, f"llama.cpp's run of the {item.gguf_type} file disagrees with our reference ({checks})",
            "report this bug with the receipt's figures (nothing was registered)", Exit.PROBLEMS,
        )  # fmt: skip


def export_gguf(root: Path, request: GgufRequest, progress: Progress | None = None) -> list[GgufFile]:
    """Write, gate and register the GGUF files of one source; nothing changes unless all succeed."""
    writer.require_gguf()
    unknown = [t for t in request.types if t not in (*mapping.DIRECT_TYPES, *mapping.QUANTIZER_TYPES)]
    if unknown:
        raise RegistryError("args.bad-type", "--type", f"{unknown[0]!r} is not a GGUF type export-gguf makes", f"pass one of {', '.join((*mapping.DIRECT_TYPES, *mapping.QUANTIZER_TYPES))}")
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        source = export_source(index, repo, HfRequest(entry=request.entry, base=request.base, base_file=request.base_file))
        _refuse_state(source)
        entry_path = source.entry.path if source.entry else None
        made: list[_Made] = []
        try:
            with _inputs(repo, source, request) as inputs:
                plan = mapping.gguf_plan({name: tuple(t.shape) for name, t in inputs.tensors.items()}, source.label)
                check_vocab(source.base, plan.config["vocab_size"], source.label)
                for gguf_type in dict.fromkeys(request.types):
                    made.append(_write(inputs, plan, gguf_type, gguf_path(source.base.name, entry_path, gguf_type), txn.staging, progress))
                for item in made:
                    _check_place(repo, index, item, request.force)
                if request.gate:
                    _gate(inputs, made)
                for item in made:
                    item.discard(keep_file=True)
            _write_receipts(repo, made)
            return _record(repo, txn, index, inputs, made, progress)
        except BaseException:
            for item in made:
                item.discard()
            raise
