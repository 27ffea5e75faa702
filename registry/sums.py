"""SHA256SUMS in coreutils format: ``<64 hex>  <path>``, sorted, LF, UTF-8.

The file lets anyone check a downloaded registry with ``sha256sum -c SHA256SUMS`` and no other
tool.  It covers every file except itself, ``.git*`` and the tool's private ``.registry/``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from .errors import RegistryError
from .hashing import StatCache, hash_files
from .hashing.engine import Progress

SUMS_NAME = "SHA256SUMS"
_LINE = re.compile(r"^([0-9a-f]{64})  (\S(?:.*\S)?)$")


def render_sums(digests: dict[str, str]) -> bytes:
    """The file's bytes for ``{relpath: sha256}``, sorted by path."""
    return "".join(f"{digests[p]}  {p}\n" for p in sorted(digests)).encode("utf-8")


def parse_sums(data: bytes, file: Path | str = SUMS_NAME) -> dict[str, str]:
    """``{relpath: sha256}``; any deviation from the strict format is an error naming the line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RegistryError("sums.malformed", file, "not UTF-8", "regenerate it with `registry sums`") from exc
    if text and not text.endswith("\n"):
        raise RegistryError("sums.malformed", file, "last line has no LF", "regenerate it with `registry sums`")
    digests: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _LINE.match(line)
        if not match:
            raise RegistryError(
                "sums.malformed",
                f"{file}:{number}",
                f"malformed line {line[:80]!r} (expected '<64 lowercase hex>  <path>')",
                "regenerate it with `registry sums`",
            )
        sha, path = match.groups()
        if path in digests:
            raise RegistryError("sums.duplicate", f"{file}:{number}", f"{path} listed twice", "regenerate it with `registry sums`")
        digests[path] = sha
    return digests


def digest_tree(
    root: Path,
    relpaths: list[str],
    cache: StatCache | None = None,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
) -> dict[str, str]:
    """sha256 of each relpath under root, hashing only files the stat cache cannot vouch for."""
    digests: dict[str, str] = {}
    stats = {}
    todo: list[Path] = []
    for rel in relpaths:
        st = (root / rel).stat()
        cached = cache.lookup(rel, st) if cache else None
        if cached:
            digests[rel] = cached
        else:
            stats[rel] = st
            todo.append(root / rel)
    if on_total:
        on_total(sum(stats[rel].st_size for rel in stats))
    hashed = hash_files(todo, progress)
    for path, sha in hashed.items():
        rel = path.relative_to(root).as_posix()
        digests[rel] = sha
        if cache:
            cache.store(rel, stats[rel], sha)
    if cache:
        cache.prune(set(relpaths))
        cache.save()
    return digests
