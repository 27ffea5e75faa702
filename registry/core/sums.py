"""SHA256SUMS in coreutils format: ``<64 hex>  <path>``, sorted, LF, UTF-8.

The file lets anyone check a downloaded registry with ``sha256sum -c SHA256SUMS`` and no other
tool.  It covers every file except itself, git's files (``.git/``, ``.gitignore``, ``.gitmodules``,
``.github/``; ``.gitattributes`` is covered), ``.pre-commit-config.yaml`` and the tool's private
``.registry/`` (:func:`registry.core.layout.is_excluded`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from .errors import Problem, RegistryError
from .layout import is_excluded
from .names import SUMS_NAME

# The most of a SHA256SUMS from outside the registry (a dataset's) that is read: ~100,000 lines.
MAX_SUMS_BYTES = 16 << 20
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
    if "\r" in text:
        number = text.count("\n", 0, text.index("\r")) + 1
        raise RegistryError(
            "sums.malformed",
            f"{file}:{number}",
            "line holds a CR byte (Windows CRLF line ends?), which `sha256sum -c` rejects",
            "convert it to LF line ends (dos2unix) or regenerate it with `registry sums`",
        )
    digests: dict[str, str] = {}
    # Split on LF only: str.splitlines would also split on CR, form feeds and Unicode separators.
    for number, line in enumerate(text[:-1].split("\n") if text else [], start=1):
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
            raise RegistryError(
                "sums.duplicate", f"{file}:{number}", f"{path} listed twice", "regenerate it with `registry sums`"
            )
        digests[path] = sha
    return digests


def sums_problems(listed: Mapping[str, str], actual: Mapping[str, str]) -> list[Problem]:
    """How the files on disk (``actual``: relpath → sha256) differ from SHA256SUMS (``listed``)."""
    problems = [
        Problem("sums.unlisted-file", rel, "file is not in SHA256SUMS", "run `registry sums`")
        for rel in sorted(set(actual) - set(listed))
    ]
    problems += [
        Problem(
            "sums.excluded-file",
            rel,
            "listed in SHA256SUMS, but the registry never checks nor publishes this file (git's, the hooks' "
            "or the tool's own)",
            "run `registry sums` to drop its line",
        )
        if is_excluded(rel)
        else Problem(
            "sums.missing-file", rel, "listed in SHA256SUMS but not on disk", "restore the file or run `registry sums`"
        )
        for rel in sorted(set(listed) - set(actual))
    ]
    problems += [
        Problem(
            "sums.mismatch",
            rel,
            f"sha256 is {actual[rel][:12]}… but SHA256SUMS says {listed[rel][:12]}…",
            "restore the original file, or run `registry sums` if the change is intended",
        )
        for rel in sorted(set(listed) & set(actual))
        if listed[rel] != actual[rel]
    ]
    return problems
