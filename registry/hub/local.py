"""The local side of a publish: which files a registry puts on the Hub, and their ids.

SHA256SUMS is the list (``validate`` has just checked it against the bytes on disk), plus the
files it cannot cover: itself, ``.gitattributes``, ``.gitignore`` (so a clone from the Hub keeps
the private folder out of its commits) and the signature ``model.sig``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from ..gitfiles import GITIGNORE_NAME
from ..hashing.engine import CHUNK
from ..layout import SIGNATURE_NAME
from ..repo import GITATTRIBUTES_NAME, Repo
from ..sums import SUMS_NAME, parse_sums
from .plan import LocalFile


def git_blob_sha1(path: Path) -> str:
    """The id git gives the file's bytes: ``sha1(b"blob <size>\\0" + content)``, streamed."""
    digest = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def local_sums(repo: Repo) -> dict[str, str]:
    return parse_sums(repo.read_bytes(repo.sums_path), repo.sums_path)


def local_files(repo: Repo, sums: dict[str, str]) -> dict[str, LocalFile]:
    """Every file publish would put on the Hub, by path, with its sha256 and size."""
    files = {path: LocalFile(path, sha, (repo.root / path).stat().st_size) for path, sha in sums.items()}
    for name in (SUMS_NAME, GITATTRIBUTES_NAME, GITIGNORE_NAME, SIGNATURE_NAME):
        path = repo.root / name
        if path.is_file():
            data = path.read_bytes()
            files[name] = LocalFile(name, hashlib.sha256(data).hexdigest(), len(data))
    return files


def with_git_sha1(root: Path, files: dict[str, LocalFile], paths: Iterable[str]) -> dict[str, LocalFile]:
    """``files`` with the git blob sha1 filled in for ``paths`` (see :func:`registry.hub.plan.plain_paths`)."""
    paths = set(paths)
    return {p: replace(f, git_sha1=git_blob_sha1(root / p)) if p in paths and f.git_sha1 is None else f for p, f in files.items()}
