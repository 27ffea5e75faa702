"""An export's folder in a registry: refused when it holds something else (a stale file of an
earlier export goes with a forced one), and the base export that a MiSS adapter's PEFT folder
loads onto and a State starts from."""

from __future__ import annotations

from typing import Any

from ..core.atomic import Transaction
from ..core.errors import RegistryError
from ..core.hashing.digest import sha256_hex
from ..core.layout import export_path
from ..core.models import Index
from ..core.names import CONFIG_NAME
from ..core.repo import Repo
from ..core.safepath import check_dir
from ..core.schemas import parse_json
from .source import ExportSource


def check_folder(
    repo: Repo,
    txn: Transaction,
    index: Index,
    source: ExportSource,
    written: set[str],
    data: dict[str, bytes],
    force: bool,
) -> None:
    """Refuse (unless forced) an export folder that holds something else. Forced, the files of its
    earlier export that this one does not write are removed with the commit (a stale shard would
    contradict the index); anything in it that no export lists is always refused."""
    check_dir(repo.root, source.folder)  # a linked folder is refused before anything in it is read
    folder = repo.root / source.folder
    previous = next((e for e in index.exports if e.path == source.folder), None)
    if previous is not None and previous.source_sha256 != source.sha256 and not force:
        raise RegistryError(
            "export.exists",
            source.folder,
            f"holds the export of {previous.source}, not of {source.label}",
            "pass --force to replace it",
        )
    for name in sorted(written):  # forced or not, a link is never replaced (nor followed)
        path = folder / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise RegistryError(
                "export.not-a-file",
                repo.rel(path),
                "is a link or not a regular file, and an export never replaces one",
                f"move it out of {source.folder}/",
            )
    for name, content in data.items():
        path = folder / name
        if path.is_file() and not force and sha256_hex(repo.read_bytes(path)) != sha256_hex(content):
            raise RegistryError(
                "export.exists",
                repo.rel(path),
                "an export file with different content already exists",
                "pass --force to replace it",
            )
    listed = {f.path for f in previous.files} if previous else set()
    stale = (
        sorted((p for p in folder.iterdir() if p.name not in written), key=lambda p: p.name) if folder.is_dir() else []
    )
    foreign = [p for p in stale if repo.rel(p) not in listed or p.is_symlink() or not p.is_file()]
    if foreign:
        raise RegistryError(
            "export.stale-files",
            repo.rel(foreign[0]),
            "is in the export folder, but no export lists it",
            f"move it out of {source.folder}/",
        )
    if stale and not force:
        raise RegistryError(
            "export.stale-files",
            repo.rel(stale[0]),
            f"is a file of the earlier export that the new one does not write ({len(stale)} such file(s))",
            "pass --force to replace the earlier export's files",
        )
    for path in stale:
        txn.remove(repo.rel(path))


def base_export(index: Index, source: ExportSource) -> str:
    """The folder of the base's export that a PEFT adapter loads onto (a State starts its
    generation); refused when there is none."""
    folder = export_path(source.base.name)
    if not any(e.path == folder and e.source_sha256 == source.base.sha256 for e in index.exports):
        used = (
            "a PEFT adapter loads onto"
            if source.entry is not None and source.entry.method == "miss"
            else "a State is used with"
        )
        raise RegistryError(
            "export.no-base-export",
            source.label,
            f"{used} its base's export, and base {source.base.name} has none at {folder}/",
            f"export the base first: `registry export-hf --base {source.base.name} --base-file {source.base.filename}`",
        )
    return folder


def base_config(repo: Repo, index: Index, source: ExportSource, base_folder: str) -> dict[str, Any]:
    """The base export's config.json, refused unless it is the one index.json records."""
    rel = f"{base_folder}/{CONFIG_NAME}"
    raw = repo.read_bytes(repo.root / rel)
    recorded = {f.path: f.sha256 for e in index.exports if e.path == base_folder for f in e.files}
    if recorded.get(rel) != sha256_hex(raw):
        raise RegistryError(
            "export.base-export-changed",
            rel,
            "differs from the base export's record in index.json",
            f"export the base again: `registry export-hf --base {source.base.name} "
            f"--base-file {source.base.filename} --force`",
        )
    return parse_json(raw, rel)
