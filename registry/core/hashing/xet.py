"""The Xet file hash of local files: the content id the Hub lists as ``xetHash`` for a Xet-stored file.

hf_xet (a dependency of huggingface_hub on the platforms it supports) chunks and hashes offline,
with no token.  Hashes are cached like sha256s, by a :class:`StatCache` of their own
(``.registry/xetcache.json``), so an unchanged file is chunked once.  Without hf_xet,
:func:`xet_digests` returns None and callers say that the content was not compared.
"""

from __future__ import annotations

from pathlib import Path

from .cache import StatCache
from .engine import Progress
from .tree import digest_tree


def xet_available() -> bool:
    try:
        import hf_xet  # noqa: F401, PLC0415 optional dependency: hf_xet (is it installed?)
    except ImportError:
        return False
    return True


def hash_xet_files(paths: list[Path], progress: Progress | None = None) -> dict[Path, str]:
    """Xet file hash of each path (hf_xet chunks several files in parallel); reports whole files to ``progress``."""
    import hf_xet  # noqa: PLC0415 start-up: hf_xet (55 ms, -X importtime) loads only to hash for Xet

    if not paths:
        return {}
    infos = hf_xet.hash_files([str(p) for p in paths])
    if progress:
        progress(sum(info.file_size for info in infos))
    return {path: info.hash for path, info in zip(paths, infos, strict=True)}


def xet_digests(root: Path, relpaths: list[str], cache_path: Path | None) -> dict[str, str] | None:
    """Xet file hash of each relpath under ``root``, chunking only files the cache cannot vouch for;
    None without hf_xet."""
    if not xet_available():
        return None
    return digest_tree(root, relpaths, StatCache(cache_path), hasher=hash_xet_files)
