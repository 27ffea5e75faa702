"""The GGUF files of one export: each type written to staging (a k-quant through a lossless file
and llama.cpp's quantizer), checked against what is already in place, and gated against our
reference; one failing file refuses them all."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from ..core.errors import Exit, RegistryError
from ..core.files import FILE_MODE
from ..core.hashing import hash_file
from ..core.hashing.engine import Progress
from ..core.models import Index
from ..core.repo import Repo
from ..core.safepath import check_dir
from ..gate.prompts import tokenizer
from ..gate.receipt import CheckResult, Receipt
from ..hf.tokenizer import world_vocab
from . import gate, mapping, writer
from .inputs import Inputs, reference_tensors


@dataclass
class Made:
    """One GGUF file written to staging, with its hash and (once gated) its receipt."""

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


def _temp(staging: Path, rel: str) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{Path(rel).name}.", suffix=".partial", dir=staging)
    os.fchmod(fd, FILE_MODE)
    os.close(fd)
    return Path(name)


def _lossless(dtypes: set[torch.dtype]) -> str:
    """The type of the file a k-quant is made from: the source's own, so nothing is lost before the quantizer."""
    return {torch.bfloat16: "BF16", torch.float16: "F16"}.get(dtypes.pop(), "F32") if len(dtypes) == 1 else "F32"


def write_type(
    inputs: Inputs, plan: mapping.GgufPlan, gguf_type: str, rel: str, staging: Path, progress: Progress | None
) -> Made:
    """The GGUF file of ``gguf_type`` bound for ``rel``, written to ``staging`` and hashed."""
    source = inputs.source
    kv_common = mapping.lineage_metadata(source.sha256, source.base.sha256, gguf_type, inputs.adapter is not None)
    tokens = mapping.world_tokens(world_vocab(), plan.config["vocab_size"])
    stream = writer.Source(inputs.tensors, inputs.mapped, inputs.adapter, inputs.scale)
    name = Path(rel).stem
    temp = _temp(staging, rel)
    middle: Path | None = None
    try:
        if gguf_type in mapping.DIRECT_TYPES:
            kv = {**mapping.metadata(plan.config, mapping.DIRECT_TYPES[gguf_type]), **kv_common}
            writer.write_gguf(
                temp,
                plan,
                stream,
                lambda target, shape: mapping.storage_type(target, shape, gguf_type),
                kv,
                tokens,
                name,
                progress,
            )
        else:
            lossless = _lossless({t.dtype for t in inputs.tensors.values()})
            kv = {**mapping.metadata(plan.config, mapping.LOSSLESS_FTYPE[lossless]), **kv_common}
            middle = _temp(staging, rel + ".lossless")
            forced = {"F16": "f16", "BF16": "bf16"}.get(lossless)
            writer.write_gguf(
                middle,
                plan,
                stream,
                lambda target, shape: mapping.storage_type(target, shape, forced) if forced else "F32",
                kv,
                tokens,
                name,
                progress,
            )
            writer.quantize(middle, temp, mapping.QUANTIZER_TYPES[gguf_type])
            # kept until the gate has run it: its tight bound is what catches a mapping error
            # that a k-quant's loose one would let through
            return Made(gguf_type, rel, temp, hash_file(temp), temp.stat().st_size, lossless=(middle, forced or "f16"))
    except OSError as exc:
        Made(gguf_type, rel, temp, "", 0, lossless=(middle, "") if middle else None).discard()
        raise RegistryError(
            "gguf.write-failed",
            rel,
            f"writing failed: {exc.strerror or exc}",
            "free disk space and run export-gguf again",
        ) from exc
    except BaseException:
        Made(gguf_type, rel, temp, "", 0, lossless=(middle, "") if middle else None).discard()
        raise
    return Made(gguf_type, rel, temp, hash_file(temp), temp.stat().st_size)


def check_place(repo: Repo, index: Index, made: Made, force: bool) -> None:
    """Refuse a file in the way: another GGUF's content (unless forced), or one no record lists."""
    check_dir(repo.root, made.rel.rsplit("/", 1)[0])  # a linked folder is refused before anything in it is read
    target = repo.root / made.rel
    if target.is_file() and not force and hash_file(target) != made.sha256:
        raise RegistryError(
            "gguf.exists", made.rel, "a GGUF file with different content already exists", "pass --force to replace it"
        )
    if (target.exists() or target.is_symlink()) and not target.is_file():
        raise RegistryError("gguf.exists", made.rel, "is not a regular file", "move it out of the gguf folder")
    if target.is_file() and not any(g.path == made.rel for g in index.ggufs):
        raise RegistryError(
            "gguf.exists",
            made.rel,
            "is in the gguf folder, but no GGUF record lists it",
            "move it out of the gguf folder",
        )


def _said(check: CheckResult) -> str:
    if check.name == "gguf-load":
        return f"{check.name}: {check.detail}"
    if not check.name.endswith("-logits"):
        return check.name
    f, t = check.figures, check.thresholds
    return (
        f"{check.name}: NMSE {float(f['nmse'] or 0):.2e} (at most {t['nmse_max']}), top-1 "
        f"agreement {float(f['top1_agreement'] or 0):.3f} (at least {t['top1_min']})"
    )


def gate_files(inputs: Inputs, plan: mapping.GgufPlan, made: list[Made]) -> None:
    """Gate every file (of ``plan``'s model); refuse them all (exit 1, nothing changed) when one fails."""
    reference = gate.reference_logits(reference_tensors(inputs), tokenizer().prompt_ids)
    n_layer = int(plan.config["num_hidden_layers"])
    method: Literal["full", "miss"] = "miss" if inputs.adapter is not None else "full"
    for item in made:
        files = {**inputs.files, item.rel: item.sha256}
        item.receipt = gate.gate_gguf(
            item.temp,
            item.rel,
            item.sha256,
            item.gguf_type,
            method,
            inputs.source.base.sha256,
            files,
            reference,
            n_layer,
            item.lossless,
        )
        item.discard(keep_file=True)
    failed = [item for item in made if item.receipt is not None and not item.receipt.passed]
    if failed:
        item = failed[0]
        assert item.receipt is not None
        checks = "; ".join(_said(c) for c in item.receipt.failed_checks())
        verdict = (
            "could not run"
            if any(c.name == "gguf-load" for c in item.receipt.failed_checks())
            else "disagrees with our reference on"
        )
        raise RegistryError(
            "gguf.gate-failed",
            item.rel,
            f"llama.cpp {verdict} the {item.gguf_type} file ({checks})",
            "report this bug with the receipt's figures (nothing was registered)",
            Exit.PROBLEMS,
        )
