"""``registry export-hf``: a folder Transformers loads (flash-linear-attention's RWKV-7), exported
from a base checkpoint or a full fine-tune, through the convert pipeline, in one transaction; or,
for a MiSS adapter, a PEFT adapter folder that loads onto its base's export; or, for a State, its
initial recurrent state in fla's layout, to start the base export's generation from.

The folder (``<base>/hf/`` for a base, ``hf/`` beside a full entry) holds fla-named safetensors
shards and their index, config.json from the checkpoint's shapes, generation_config.json from the
weight's stop rules (greedy), and the world tokenizer.  Before anything is committed, fla's model
built from the config must have exactly the exported tensors and ``AutoTokenizer`` must give the
``rwkv`` package's ids on the seeds' prompts (:mod:`registry.hf.verify`).  A MiSS adapter's folder
(``hf/`` beside it) holds ``adapter_config.json`` and ``adapter_model.safetensors``
(:mod:`registry.hf.peft`), checked with PEFT and against fla's shapes the same way.  A State's
folder (``hf/<state-stem>/`` beside it) holds ``initial_state.safetensors`` (:mod:`registry.hf.state`).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from ..artifacts.inspect import load_tensor_map
from ..artifacts.miss import read_miss_json, verify_adapter
from ..atomic import Transaction, transaction
from ..convert.pipeline import ConversionResult, Opener, convert_file
from ..convert.writer import SAFETENSORS_DTYPES, OutputFile, safetensors_bytes
from ..derived import stage_derived
from ..errors import RegistryError
from ..hashing import StatCache, hash_file
from ..hashing.engine import Progress
from ..hf import files as hf_files
from ..hf import peft
from ..hf import state as fla_state
from ..hf.mapping import FlaPlan, fla_plan
from ..hf.tensors import to_fla
from ..hf.tokenizer import WORLD_VOCAB, check_vocab, read_vocab, tokenizer_config_json, tokenizer_json, world_vocab_file
from ..hf.verify import check_model, check_peft, check_state, check_tokenizer, fla_notices_hidden
from ..index_rules import index_to_change
from ..layout import export_path
from ..models import Base, Entry, FileRef, HfExport, Index, StopRules
from ..names import (
    ADAPTER_CONFIG_NAME,
    ADAPTER_WEIGHTS_NAME,
    CONFIG_NAME,
    GENERATION_CONFIG_NAME,
    INDEX_NAME,
    STATE_WEIGHTS_NAME,
    TOKENIZER_CONFIG_NAME,
    TOKENIZER_NAME,
    VOCAB_NAME,
)
from ..pinned import Pinned, pinned, registered
from ..repo import Repo, render_index, resolve_entry
from ..safepath import check_dir
from ..schemas import parse_json

DEFAULT_SHARD_SIZE = 5 * 10**9


@dataclass(frozen=True)
class ExportRequest:
    """A full entry (``entry``), or a base by name with its ``.pth`` (``base`` + ``base_file``)."""

    entry: str | None = None
    base: str | None = None
    base_file: Path | None = None
    shard_size: int = DEFAULT_SHARD_SIZE
    force: bool = False


@dataclass(frozen=True)
class ExportSource:
    label: str  # the entry's path or the base's name
    base: Base
    entry: Entry | None
    sha256: str
    folder: str  # the export's path


def require_hf() -> None:
    """Import what the export's checks need first, so a missing extra is said before any work."""
    with fla_notices_hidden():
        import fla  # noqa: F401
    import peft  # noqa: F401
    import tokenizers  # noqa: F401
    import transformers  # noqa: F401


def export_source(index: Index, repo: Repo, request: ExportRequest) -> ExportSource:
    """The entry or base an export is made from (export-gguf resolves its sources the same way)."""
    if request.entry is not None:
        entry = resolve_entry(repo, index, request.entry)
        if entry.format != "pth":
            raise RegistryError("export.not-pth", entry.path, "is a safetensors twin; the export reads the .pth it was converted from", f"pass {entry.derived_from or 'the .pth entry'}")
        base = index.base_by_sha(entry.base_sha256)
        assert base is not None  # index_to_change refused an entry with an unknown base
        return ExportSource(entry.path, base, entry, entry.sha256, export_path(base.name, entry.path, entry.method))
    base = index.base_by_name(request.base or "")
    if base is None:
        raise RegistryError("export.unknown-base", INDEX_NAME, f"no base named {request.base!r}", "pass a base listed by `registry list`")
    return ExportSource(base.name, base, None, base.sha256, export_path(base.name))


@contextmanager
def pinned_source(repo: Repo, source: ExportSource, base_file: Path | None) -> Iterator[Pinned]:
    if source.entry is not None:
        with registered(repo.root, source.entry.path, source.sha256, StatCache(repo.stat_cache_path)) as handle:
            yield handle
        return
    if base_file is None:
        raise RegistryError("args.missing-file", None, f"exporting base {source.label} needs its .pth (the registry does not hold bases)", f"pass --base-file {source.base.filename}")
    with pinned(base_file, "base checkpoint") as handle:
        actual = hash_file(handle.stable)
        if actual != source.sha256:
            raise RegistryError(
                "export.wrong-base-file", base_file, f"sha256 is {actual[:12]}… but base {source.label} is {source.sha256[:12]}…",
                f"pass the file registered as {source.base.filename}",
            )  # fmt: skip
        yield handle


def _dtype_name(tensors: dict[str, torch.Tensor]) -> str:
    dtypes = {SAFETENSORS_DTYPES.get(t.dtype, "F32") for t in tensors.values()}
    return dtypes.pop() if len(dtypes) == 1 else "F32"


@dataclass
class _Converted:
    result: ConversionResult
    plan: FlaPlan
    shapes: dict[str, tuple[int, ...]]
    dtype: str


def _convert(repo: Repo, source: ExportSource, handle: Pinned, request: ExportRequest, staging: Path, opener: Opener, progress: Progress | None) -> _Converted:
    found: dict[str, object] = {}

    def remap(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        plan = fla_plan({name: tuple(t.shape) for name, t in tensors.items()}, handle.path)
        check_vocab(source.base, plan.config["vocab_size"], handle.path)
        fla = to_fla(plan, tensors)
        found.update(plan=plan, dtype=_dtype_name(fla), shapes={name: tuple(t.shape) for name, t in fla.items()})
        return fla

    metadata = {"base_sha256": source.base.sha256, "export": "fla-rwkv7"}
    named = repo.root / source.entry.path if source.entry else handle.path
    result = convert_file(
        named, "checkpoint", metadata, source.sha256, request.shard_size, staging, request.force, opener, progress,
        read_from=handle.stable, remap=remap, into=repo.root / source.folder,
    )  # fmt: skip
    return _Converted(result, found["plan"], found["shapes"], found["dtype"])  # type: ignore[arg-type]


def _json_files(converted: _Converted, stop: StopRules | None) -> dict[str, bytes]:
    return {
        CONFIG_NAME: hf_files.render(hf_files.config_json(converted.plan.config, converted.dtype)),
        GENERATION_CONFIG_NAME: hf_files.render(hf_files.generation_config_json(stop)),
        TOKENIZER_NAME: tokenizer_json(read_vocab(world_vocab_file())),
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


def _verify(data: dict[str, bytes], shapes: dict[str, tuple[int, ...]]) -> None:
    with _written(data) as folder:
        check_model(folder, shapes)
        check_tokenizer(folder)


def _check_folder(repo: Repo, txn: Transaction, index: Index, source: ExportSource, written: set[str], data: dict[str, bytes], force: bool) -> None:
    """Refuse (unless forced) an export folder that holds something else. Forced, the files of its
    earlier export that this one does not write are removed with the commit (a stale shard would
    contradict the index); anything in it that no export lists is always refused."""
    check_dir(repo.root, source.folder)  # a linked folder is refused before anything in it is read
    folder = repo.root / source.folder
    previous = next((e for e in index.exports if e.path == source.folder), None)
    if previous is not None and previous.source_sha256 != source.sha256 and not force:
        raise RegistryError("export.exists", source.folder, f"holds the export of {previous.source}, not of {source.label}", "pass --force to replace it")
    for name, content in data.items():
        path = folder / name
        if path.is_file() and not force and hashlib.sha256(repo.read_bytes(path)).hexdigest() != hashlib.sha256(content).hexdigest():
            raise RegistryError("export.exists", repo.rel(path), "an export file with different content already exists", "pass --force to replace it")
    listed = {f.path for f in previous.files} if previous else set()
    stale = sorted((p for p in folder.iterdir() if p.name not in written), key=lambda p: p.name) if folder.is_dir() else []
    foreign = [p for p in stale if repo.rel(p) not in listed or p.is_symlink() or not p.is_file()]
    if foreign:
        raise RegistryError("export.stale-files", repo.rel(foreign[0]), "is in the export folder, but no export lists it", f"move it out of {source.folder}/")
    if stale and not force:
        raise RegistryError(
            "export.stale-files", repo.rel(stale[0]), f"is a file of the earlier export that the new one does not write ({len(stale)} such file(s))",
            "pass --force to replace the earlier export's files",
        )  # fmt: skip
    for path in stale:
        txn.remove(repo.rel(path))


def _base_export(index: Index, source: ExportSource) -> str:
    """The folder of the base's export that a PEFT adapter loads onto (a State starts its
    generation); refused when there is none."""
    folder = export_path(source.base.name)
    if not any(e.path == folder and e.source_sha256 == source.base.sha256 for e in index.exports):
        used = "a PEFT adapter loads onto" if source.entry is not None and source.entry.method == "miss" else "a State is used with"
        raise RegistryError(
            "export.no-base-export", source.label, f"{used} its base's export, and base {source.base.name} has none at {folder}/",
            f"export the base first: `registry export-hf --base {source.base.name} --base-file {source.base.filename}`",
        )  # fmt: skip
    return folder


def _peft_files(source: ExportSource, handle: Pinned, base_folder: str) -> dict[str, bytes]:
    """adapter_config.json and adapter_model.safetensors of the MiSS adapter read from ``handle``."""
    manifest = read_miss_json(handle.stable)
    tensors = load_tensor_map(handle.stable)
    verify_adapter(handle.path, tensors, manifest)
    metadata = {"format": "pt", "source_sha256": source.sha256, "base_sha256": source.base.sha256, "export": "peft-miss"}
    return {
        ADAPTER_CONFIG_NAME: hf_files.render(peft.adapter_config(manifest.rank, [peft.fla_module(t) for t in tensors], base_folder)),
        ADAPTER_WEIGHTS_NAME: safetensors_bytes(peft.peft_tensors(tensors, manifest.scale), metadata),
    }


def _state_files(source: ExportSource, handle: Pinned) -> tuple[dict[str, bytes], dict[str, torch.Tensor]]:
    """initial_state.safetensors of the State read from ``handle``, and the State's tensors."""
    time_state = load_tensor_map(handle.stable)
    metadata = {"format": "pt", "source_sha256": source.sha256, "base_sha256": source.base.sha256, "export": "fla-rwkv7-state"}
    return {STATE_WEIGHTS_NAME: safetensors_bytes(fla_state.fla_state(time_state), metadata)}, time_state


def _base_config(repo: Repo, index: Index, source: ExportSource, base_folder: str) -> dict:
    """The base export's config.json, refused unless it is the one index.json records."""
    rel = f"{base_folder}/{CONFIG_NAME}"
    raw = repo.read_bytes(repo.root / rel)
    recorded = {f.path: f.sha256 for e in index.exports if e.path == base_folder for f in e.files}
    if recorded.get(rel) != hashlib.sha256(raw).hexdigest():
        raise RegistryError(
            "export.base-export-changed", rel, "differs from the base export's record in index.json",
            f"export the base again: `registry export-hf --base {source.base.name} --base-file {source.base.filename} --force`",
        )  # fmt: skip
    return parse_json(raw, rel)


def _adapter_files(repo: Repo, index: Index, source: ExportSource, handle: Pinned, base_folder: str) -> dict[str, bytes]:
    """A MiSS adapter's PEFT folder or a State's initial state, checked against the base export."""
    base_config = _base_config(repo, index, source, base_folder)
    if source.entry is not None and source.entry.method == "state":
        data, time_state = _state_files(source, handle)
        with _written(data) as folder:
            check_state(folder, base_config, time_state)
        return data
    data = _peft_files(source, handle, base_folder)
    with _written(data) as folder:
        check_peft(folder, base_config)
    return data


def _record(repo: Repo, txn: Transaction, index: Index, source: ExportSource, data: dict[str, bytes], converted: list[FileRef], progress: Progress | None) -> HfExport:
    """Write ``data`` into the export folder and list it, with the ``converted`` files, in index.json."""
    refs = list(converted)
    for name, content in data.items():
        rel = f"{source.folder}/{name}"
        txn.write(rel, content)
        refs.append(FileRef(path=rel, sha256=hashlib.sha256(content).hexdigest(), size=len(content)))
    export = HfExport(
        path=source.folder, source=source.label, source_sha256=source.sha256, base_sha256=source.base.sha256,
        vocab=WORLD_VOCAB, files=sorted(refs, key=lambda r: r.path),
    )  # fmt: skip
    earlier = [e.path for e in index.exports]
    if export.path in earlier:  # in place: exporting the same source again leaves index.json as it was
        index.exports[earlier.index(export.path)] = export
    else:
        index.exports.append(export)
    txn.write(INDEX_NAME, render_index(index))
    stage_derived(repo, txn, index, progress)
    return export


def export_hf(root: Path, request: ExportRequest, opener: Opener = OutputFile, progress: Progress | None = None) -> HfExport:
    """Export, verify and register one folder; nothing changes unless all of it succeeds."""
    require_hf()
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        source = export_source(index, repo, request)
        if source.entry is not None and source.entry.method in ("miss", "state"):
            base_folder = _base_export(index, source)
            with pinned_source(repo, source, None) as handle:
                data = _adapter_files(repo, index, source, handle, base_folder)
            _check_folder(repo, txn, index, source, set(data), data, request.force)
            return _record(repo, txn, index, source, data, [], progress)
        with pinned_source(repo, source, request.base_file) as handle:
            converted = _convert(repo, source, handle, request, txn.staging, opener, progress)
        result = converted.result
        try:
            data = _json_files(converted, source.entry.stop if source.entry else None)
            _verify(data, converted.shapes)
            _check_folder(repo, txn, index, source, {f.final.name for f in result.files} | set(data), data, request.force)
            for f in result.files:
                txn.move(f.temp, repo.rel(f.final), f.sha256)
            return _record(repo, txn, index, source, data, [FileRef(path=repo.rel(f.final), sha256=f.sha256, size=f.size) for f in result.files], progress)
        except BaseException:
            result.discard()
            raise
