"""``registry convert``: safetensors twins of registered weights, recorded as derived entries."""

from __future__ import annotations

import os
from concurrent.futures import Future
from pathlib import Path

from ..artifacts.inspect import inspect_weights
from ..artifacts.miss import MissManifest, manifest_metadata
from ..convert.pipeline import ConversionResult, Opener, convert_file
from ..convert.writer import OutputFile
from ..core.atomic import ensure_writable, transaction
from ..core.errors import RegistryError
from ..core.files import fsync_dir
from ..core.hashing import StatCache
from ..core.hashing.engine import Progress, hash_in_background
from ..core.models import Entry, FileRef, Index
from ..core.names import INDEX_NAME
from ..core.pinned import registered
from ..core.repo import Repo, render_index, resolve_entry
from ..core.sigbus import reading
from ..index.derived import stage_derived
from ..index.rules import index_to_change


def _metadata(entry: Entry | None, manifest: MissManifest | None) -> dict[str, str]:
    """safetensors ``__metadata__`` values (strings only): provenance, and miss.json's fields.
    (The source's sha256 is added by the conversion, which may still be computing it.)"""
    meta = {}
    if entry is not None:
        meta["base_sha256"] = entry.base_sha256
        if entry.content_version:
            meta["content_version"] = entry.content_version
    if manifest is not None:
        meta.update(manifest_metadata(manifest))
    return meta


def _derived_entry(repo: Repo, source: Entry, result: ConversionResult) -> Entry:
    main = result.main
    shards = (
        [FileRef(path=repo.rel(f.final), sha256=f.sha256, size=f.size) for f in result.files[:-1]]
        if result.sharded
        else []
    )
    return source.model_copy(
        update={
            "path": repo.rel(main.final),
            "sha256": main.sha256,
            "size": main.size,
            "format": "safetensors-sharded" if result.sharded else "safetensors",
            "recommended": False,
            # the card shows a twin on its source's row, with the source's notes and results
            "derived_from": source.path,
            "notes": "",
            "shards": shards,
            "gate": None,
            "scores": [],
        },
        deep=True,
    )


def convert_entry(
    root: Path,
    path: str,
    shard_size: int,
    force: bool = False,
    opener: Opener = OutputFile,
    progress: Progress | None = None,
) -> Entry:
    """Convert a registered .pth entry; the twins and the index change land in one transaction."""
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        source = resolve_entry(repo, index, path)
        if source.format != "pth":
            raise RegistryError(
                "convert.not-pth",
                source.path,
                "only .pth entries are converted",
                "pass the .pth entry this file was derived from",
            )
        # Read once, through one open file that holds the indexed bytes (checked first).
        with registered(repo.root, source.path, source.sha256, StatCache(repo.stat_cache_path)) as pinned_source:
            inspection = inspect_weights(pinned_source.stable)
            result = convert_file(
                repo.root / source.path,
                inspection.kind,
                _metadata(source, inspection.miss),
                source.sha256,
                shard_size,
                txn.staging,
                force,
                opener,
                progress,
                read_from=pinned_source.stable,
            )
        try:
            derived = _derived_entry(repo, source, result)
            _replace_derived(index, derived)
            for f in result.files:
                txn.move(f.temp, repo.rel(f.final), f.sha256)
            txn.write(INDEX_NAME, render_index(index))
            stage_derived(repo, txn, index, progress)
        except BaseException:
            result.discard()  # the transaction only removes temp files it wrote itself
            raise
    return derived


def _replace_derived(index: Index, derived: Entry) -> None:
    """A re-conversion (--force, or identical) replaces the earlier derived entry."""
    index.entries = [e for e in index.entries if e.path != derived.path]
    index.entries.append(derived)


def convert_standalone(
    path: Path,
    shard_size: int,
    force: bool = False,
    opener: Opener = OutputFile,
    progress: Progress | None = None,
    source_sha256: Future[str] | None = None,
) -> ConversionResult:
    """Convert a .pth that is not in a registry (e.g. a base checkpoint), next to itself.

    Its sha256 (for the metadata) is computed while the tensors are copied; pass
    ``source_sha256`` from :func:`hash_in_background` to start it even earlier.
    """
    digest = hash_in_background(path) if source_sha256 is None else source_sha256
    with reading(path):  # the source is mapped: if it shrinks, the SIGBUS message names it
        inspection = inspect_weights(path)
        ensure_writable(path.parent)
        result = convert_file(
            path,
            inspection.kind,
            _metadata(None, inspection.miss),
            digest,
            shard_size,
            path.parent,
            force,
            opener,
            progress,
        )
    for f in result.files:
        os.replace(f.temp, f.final)
    fsync_dir(path.parent)
    return result
