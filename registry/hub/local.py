"""The local side of a publish: which files a registry puts on the Hub, and their ids.

SHA256SUMS is the list (``validate`` has just checked it against the bytes on disk), plus the
files it cannot cover: itself and the signature ``model.sig`` (which publish checks against
SHA256SUMS).  Nothing else is sent (``.github/``, ``.gitignore``, ``.pre-commit-config.yaml`` and
anything under ``.registry/`` stay local).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from ..core.hashing.digest import sha256_hex
from ..core.hashing.engine import git_blob_sha1
from ..core.names import UNLISTED_OK
from ..core.repo import Repo
from ..core.sums import parse_sums
from .plan import LocalFile


def local_sums(repo: Repo) -> dict[str, str]:
    return parse_sums(repo.read_bytes(repo.sums_path), repo.sums_path)


def source(root: Path, rel: str, staged: Mapping[str, Path] | None = None) -> Path:
    """Where the bytes publish sends for ``rel`` are: a file staged by a transaction not yet
    committed (``staged``: relpath -> staged file), or the registry's own."""
    return (staged or {}).get(rel, root / rel)


def local_files(repo: Repo, sums: dict[str, str], staged: Mapping[str, Path] | None = None) -> dict[str, LocalFile]:
    """Every file publish would put on the Hub, by path, with its sha256 and size."""
    files = {path: LocalFile(path, sha, source(repo.root, path, staged).stat().st_size) for path, sha in sums.items()}
    for name in sorted(UNLISTED_OK):  # SHA256SUMS, model.sig
        path = source(repo.root, name, staged)
        if path.is_file():
            data = path.read_bytes()
            files[name] = LocalFile(name, sha256_hex(data), len(data))
    return files


def with_git_sha1(
    root: Path, files: dict[str, LocalFile], paths: Iterable[str], staged: Mapping[str, Path] | None = None
) -> dict[str, LocalFile]:
    """``files`` with the git blob sha1 filled in for ``paths`` (see :func:`registry.hub.plan.plain_paths`)."""
    paths = set(paths)
    return {
        p: replace(f, git_sha1=git_blob_sha1(source(root, p, staged))) if p in paths and f.git_sha1 is None else f
        for p, f in files.items()
    }
