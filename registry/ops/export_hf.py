"""``registry export-hf``: a folder Transformers loads (flash-linear-attention's RWKV-7), exported
from a base checkpoint or a full fine-tune, through the convert pipeline, in one transaction; or,
for a MiSS adapter, a PEFT adapter folder that loads onto its base's export; or, for a State, its
initial recurrent state in fla's layout, to start the base export's generation from.

The folder (``<base>/hf/`` for a base, ``hf/`` beside a full entry) holds fla-named safetensors
shards and their index, config.json from the checkpoint's shapes, generation_config.json from the
weight's stop rules (greedy), and the world tokenizer (:mod:`registry.hf.build`).  Before anything
is committed, fla's model built from the config must have exactly the exported tensors and
``AutoTokenizer`` must give the ``rwkv`` package's ids on the seeds' prompts
(:mod:`registry.hf.verify`).  A MiSS adapter's folder (``hf/`` beside it) holds
``adapter_config.json`` and ``adapter_model.safetensors`` (:mod:`registry.hf.peft`), checked with
PEFT and against fla's shapes the same way.  A State's folder (``hf/<state-stem>/`` beside it)
holds ``initial_state.safetensors`` (:mod:`registry.hf.state`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..convert.pipeline import Opener
from ..convert.writer import OutputFile
from ..core.atomic import Transaction, transaction
from ..core.hashing.digest import sha256_hex
from ..core.hashing.engine import Progress
from ..core.models import FileRef, HfExport, Index
from ..core.names import INDEX_NAME
from ..core.repo import Repo, render_index
from ..hf.build import adapter_files, convert_to_fla, json_files, verify_model_files
from ..hf.folder import base_config, base_export, check_folder
from ..hf.source import ExportSource, export_source, pinned_source
from ..hf.tokenizer import WORLD_VOCAB
from ..hf.verify import require_hf
from ..index.derived import stage_derived
from ..index.rules import index_to_change

DEFAULT_SHARD_SIZE = 5 * 10**9


@dataclass(frozen=True)
class ExportRequest:
    """A full entry (``entry``), or a base by name with its ``.pth`` (``base`` + ``base_file``)."""

    entry: str | None = None
    base: str | None = None
    base_file: Path | None = None
    shard_size: int = DEFAULT_SHARD_SIZE
    force: bool = False


def _record(
    repo: Repo,
    txn: Transaction,
    index: Index,
    source: ExportSource,
    data: dict[str, bytes],
    converted: list[FileRef],
    progress: Progress | None,
) -> HfExport:
    """Write ``data`` into the export folder and list it, with the ``converted`` files, in index.json."""
    refs = list(converted)
    for name, content in data.items():
        rel = f"{source.folder}/{name}"
        txn.write(rel, content)
        refs.append(FileRef(path=rel, sha256=sha256_hex(content), size=len(content)))
    export = HfExport(
        path=source.folder,
        source=source.label,
        source_sha256=source.sha256,
        base_sha256=source.base.sha256,
        vocab=WORLD_VOCAB,
        files=sorted(refs, key=lambda r: r.path),
    )
    earlier = [e.path for e in index.exports]
    if export.path in earlier:  # in place: exporting the same source again leaves index.json as it was
        index.exports[earlier.index(export.path)] = export
    else:
        index.exports.append(export)
    txn.write(INDEX_NAME, render_index(index))
    stage_derived(repo, txn, index, progress)
    return export


def export_hf(
    root: Path, request: ExportRequest, opener: Opener = OutputFile, progress: Progress | None = None
) -> HfExport:
    """Export, verify and register one folder; nothing changes unless all of it succeeds."""
    require_hf()
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        source = export_source(index, repo, request.entry, request.base)
        if source.entry is not None and source.entry.method in ("miss", "state"):
            base_folder = base_export(index, source)
            with pinned_source(repo, source, None) as handle:
                data = adapter_files(source, handle, base_folder, base_config(repo, index, source, base_folder))
            check_folder(repo, txn, index, source, set(data), data, request.force)
            return _record(repo, txn, index, source, data, [], progress)
        with pinned_source(repo, source, request.base_file) as handle:
            converted = convert_to_fla(
                repo.root, source, handle, request.shard_size, request.force, txn.staging, opener, progress
            )
        result = converted.result
        try:
            data = json_files(converted, source.entry.stop if source.entry else None)
            verify_model_files(data, converted.shapes)
            check_folder(
                repo, txn, index, source, {f.final.name for f in result.files} | set(data), data, request.force
            )
            for f in result.files:
                txn.move(f.temp, repo.rel(f.final), f.sha256)
            return _record(
                repo,
                txn,
                index,
                source,
                data,
                [FileRef(path=repo.rel(f.final), sha256=f.sha256, size=f.size) for f in result.files],
                progress,
            )
        except BaseException:
            result.discard()
            raise
