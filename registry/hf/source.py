"""The entry or base an export is made from, resolved in index.json and pinned (export-hf's and
export-gguf's): a full, MiSS or State entry of the registry, or a base by name with its ``.pth``
(the registry does not hold bases; the file given is checked against the base's sha256)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import RegistryError
from ..core.hashing import StatCache, hash_file
from ..core.layout import export_path
from ..core.models import Base, Entry, Index
from ..core.pinned import Pinned, pinned, registered
from ..core.repo import INDEX_NAME, Repo, resolve_entry


@dataclass(frozen=True)
class ExportSource:
    label: str  # the entry's path or the base's name
    base: Base
    entry: Entry | None
    sha256: str
    folder: str  # the export's path


def export_source(index: Index, repo: Repo, entry: str | None, base: str | None) -> ExportSource:
    """The entry (by path) or else the base (by name) an export is made from."""
    if entry is not None:
        found = resolve_entry(repo, index, entry)
        if found.format != "pth":
            raise RegistryError(
                "export.not-pth",
                found.path,
                "is a safetensors twin; the export reads the .pth it was converted from",
                f"pass {found.derived_from or 'the .pth entry'}",
            )
        its_base = index.base_by_sha(found.base_sha256)
        assert its_base is not None  # index_to_change refused an entry with an unknown base
        return ExportSource(
            found.path,
            its_base,
            found,
            found.sha256,
            export_path(its_base.name, found.path, found.method, found.data.version),
        )
    named = index.base_by_name(base or "")
    if named is None:
        raise RegistryError(
            "export.unknown-base", INDEX_NAME, f"no base named {base!r}", "pass a base listed by `registry list`"
        )
    return ExportSource(named.name, named, None, named.sha256, export_path(named.name))


@contextmanager
def pinned_source(repo: Repo, source: ExportSource, base_file: Path | None) -> Iterator[Pinned]:
    if source.entry is not None:
        with registered(repo.root, source.entry.path, source.sha256, StatCache(repo.stat_cache_path)) as handle:
            yield handle
        return
    if base_file is None:
        raise RegistryError(
            "args.missing-file",
            source.base.filename,
            f"exporting base {source.label} needs its .pth (the registry does not hold bases)",
            f"pass --base-file {source.base.filename}",
        )
    with pinned(base_file, "base checkpoint") as handle:
        actual = hash_file(handle.stable)
        if actual != source.sha256:
            raise RegistryError(
                "export.wrong-base-file",
                base_file,
                f"sha256 is {actual[:12]}… but base {source.label} is {source.sha256[:12]}…",
                f"pass the file registered as {source.base.filename}",
            )
        yield handle
