""".gitattributes as git reads it, for the one attribute the registry depends on: ``filter=lfs``.

A weight or GGUF file that no line sends through Git LFS would be committed as a plain git blob by a clone
(and a `git add` of a multi-GB file); a pull request that drops or overrides the lines is what
validate looks for.  Patterns follow gitattributes(5): without a slash a pattern matches the
file name at any depth, with one it matches the path from the root; ``*`` and ``?`` stay within
one path component, ``**`` crosses them; the last line that mentions ``filter`` wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import Problem
from .names import GITATTRIBUTES_NAME as NAME
from .names import LFS_SUFFIXES


def lfs_line(suffix: str) -> str:
    """The .gitattributes line that sends every file ending in ``suffix`` through Git LFS."""
    return f"*{suffix} filter=lfs diff=lfs merge=lfs -text"


def _fix(rel: str) -> str:
    suffix = next((s for s in LFS_SUFFIXES if rel.endswith(s)), "." + rel.rsplit(".", 1)[-1])
    return (
        f"add the line `{lfs_line(suffix)}` to {NAME} after every line that changes `filter` for it, then run "
        "`registry sums`"
    )


MISSING_FIX = (
    f"write {NAME} with the lines `registry init` writes "
    f"({'; '.join(f'`{lfs_line(s)}`' for s in LFS_SUFFIXES)}), then run `registry sums`"
)


@dataclass(frozen=True)
class Line:
    number: int
    pattern: re.Pattern[str]
    filter: str | None  # the value this line gives ``filter`` ("" when it unsets or unspecifies it)
    text: str


def _glob(pattern: str) -> re.Pattern[str]:
    anchored = "/" in pattern.rstrip("/")
    pattern = pattern.lstrip("/")
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
        elif pattern[i] == "*":
            out.append(".*" if pattern.startswith("**", i) else "[^/]*")
            i += 2 if pattern.startswith("**", i) else 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(prefix + "".join(out))


def parse(text: str) -> list[Line]:
    """The lines of a .gitattributes that say something about ``filter`` (macros and comments skipped)."""
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields or fields[0].startswith(("#", "[attr]")):
            continue
        value: str | None = None
        for attribute in fields[1:]:
            name, _, given = attribute.partition("=")
            if name == "filter":
                value = given if given else "set"
            elif name in ("-filter", "!filter"):
                value = ""
        if value is not None:
            lines.append(Line(number, _glob(fields[0]), value, raw.strip()))
    return lines


def lfs_problems(text: str | None, weights: list[str]) -> Iterator[Problem]:
    """One problem for each weight or GGUF file (registry-relative path, ``weights``) that ``text``
    does not send through Git LFS; ``text`` None: the file is missing."""
    if text is None:
        if weights:
            yield Problem(
                "gitattributes.missing",
                NAME,
                "is missing, so a git clone would commit the weights as plain blobs",
                MISSING_FIX,
            )
        return
    lines = parse(text)
    for rel in weights:
        last = next((line for line in reversed(lines) if line.pattern.fullmatch(rel)), None)
        if last is None:
            yield Problem(
                "gitattributes.no-lfs", rel, f"no line of {NAME} sends this weight through Git LFS", _fix(rel)
            )
        elif last.filter != "lfs":
            yield Problem(
                "gitattributes.no-lfs",
                rel,
                f"{NAME} line {last.number} ({last.text[:60]!r}) takes this weight out of Git LFS",
                _fix(rel),
            )
