"""``registry export-gguf``: GGUF files (llama.cpp, Ollama) of a base, a full fine-tune, or a MiSS
adapter merged into its base, each gated against our fp32 reference before it is registered.

The files go in the same repository, in a ``gguf/`` folder beside ``hf/``: ``<base>/gguf/`` for a
base, ``gguf/`` beside a full entry or a MiSS adapter (docs/formats.md says why not a sibling
``-GGUF`` repository).  Each is written tensor by tensor from the memory-mapped ``.pth``
(:mod:`registry.gguf.inputs`, :mod:`registry.gguf.writer`; f16, bf16 and q8_0 with the ``gguf``
package, k-quants by llama.cpp's quantizer from a lossless GGUF), hashed, run through llama.cpp
and compared with our runtime (:mod:`registry.gguf.files`, :mod:`registry.gguf.gate`); a file that
fails its gate is refused and nothing changes.  Passing files are moved into place, listed in
index.json (``ggufs``: lineage, tools, sha256, size, gate) and SHA256SUMS, in one transaction;
their receipts go to ``.registry/gates/`` like every gate's.  A State is an initial recurrent
state, not a model, and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..artifacts.signature import public_pem
from ..core.atomic import Transaction, transaction
from ..core.errors import RegistryError
from ..core.files import atomic_write
from ..core.gitfiles import stage_git_files
from ..core.hashing.engine import Progress
from ..core.layout import gguf_path
from ..core.models import GgufFile, Index
from ..core.names import INDEX_NAME
from ..core.repo import Repo, render_index
from ..gate.receipt import gate_summary, receipt_path
from ..gate.seal import sealed_json, signed
from ..gguf import mapping, writer
from ..gguf.files import Made, check_place, gate_files, write_type
from ..gguf.inputs import Inputs, open_inputs
from ..hf.source import ExportSource, export_source
from ..hf.tokenizer import check_vocab
from ..index.derived import stage_derived
from ..index.rules import index_to_change

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
    sign_key: Path | None = None  # also sign each receipt, for a publish elsewhere (publish --trust-gate-key)


def _refuse_state(source: ExportSource) -> None:
    if source.entry is not None and source.entry.method == "state":
        raise RegistryError(
            "gguf.state", source.entry.path, "is a State (an initial recurrent state, not a model), and a GGUF file holds a model",
            f"export the base as GGUF (`registry export-gguf --base {source.base.name} --base-file {source.base.filename}`) and start it from the State with the rwkv runtime or the Transformers export",
        )  # fmt: skip


def _record(
    repo: Repo, txn: Transaction, index: Index, inputs: Inputs, made: list[Made], progress: Progress | None
) -> list[GgufFile]:
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
    stage_git_files(repo, txn)  # a registry made before GGUFs: its .gitattributes gains the `*.gguf` rule
    stage_derived(repo, txn, index, progress)
    return records


def _write_receipts(repo: Repo, made: list[Made], sign_key: Path | None) -> None:
    """Receipts before the commit: one for bytes that never land is harmless (keyed by sha256)."""
    repo.gates_dir.mkdir(parents=True, exist_ok=True)
    for item in made:
        if item.receipt is not None:
            atomic_write(
                receipt_path(repo.gates_dir, item.sha256),
                sealed_json(signed(item.receipt, sign_key) if sign_key else item.receipt),
            )


def export_gguf(root: Path, request: GgufRequest, progress: Progress | None = None) -> list[GgufFile]:
    """Write, gate and register the GGUF files of one source; nothing changes unless all succeed."""
    writer.require_gguf()
    if request.sign_key:
        public_pem(request.sign_key)  # a bad key is refused before anything is written, not after
    unknown = [t for t in request.types if t not in (*mapping.DIRECT_TYPES, *mapping.QUANTIZER_TYPES)]
    if unknown:
        raise RegistryError(
            "args.bad-type",
            "--type",
            f"{unknown[0]!r} is not a GGUF type export-gguf makes",
            f"pass one of {', '.join((*mapping.DIRECT_TYPES, *mapping.QUANTIZER_TYPES))}",
        )
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        source = export_source(index, repo, request.entry, request.base)
        _refuse_state(source)
        entry_path = source.entry.path if source.entry else None
        made: list[Made] = []
        try:
            with open_inputs(repo, source, request.base_file) as inputs:
                plan = mapping.gguf_plan({name: tuple(t.shape) for name, t in inputs.tensors.items()}, source.label)
                check_vocab(source.base, plan.config["vocab_size"], source.label)
                for gguf_type in dict.fromkeys(request.types):
                    made.append(
                        write_type(
                            inputs,
                            plan,
                            gguf_type,
                            gguf_path(
                                source.base.name,
                                entry_path,
                                gguf_type,
                                source.entry.data.version if source.entry else None,
                            ),
                            txn.staging,
                            progress,
                        )
                    )
                for item in made:
                    check_place(repo, index, item, request.force)
                if request.gate:
                    gate_files(inputs, plan, made)
                for item in made:
                    item.discard(keep_file=True)
            _write_receipts(repo, made, request.sign_key)
            return _record(repo, txn, index, inputs, made, progress)
        except BaseException:
            for item in made:
                item.discard()
            raise
