"""Names that read or land as something else elsewhere.

A registry is checked out on macOS and Windows too, and read by people in a browser:

* Characters that show nothing or reorder what is shown (bidi controls such as U+202E, zero-width
  spaces and joiners, the byte-order mark) make a path read as another one ("exe.pth" shown for
  "htp.exe").  :func:`invisible_character` finds them.
* Paths that differ only in case (``a.pth``, ``A.pth``) or in Unicode normalization (``café`` as
  NFC or NFD) are one file on the default macOS and Windows file systems: one checkout silently
  holds the other's bytes.  :func:`collisions` finds them, for directories as well as files.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator

from .errors import Problem

INVISIBLE = re.compile("[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


NAME_MAX_BYTES = 255  # one file or directory name on ext4, XFS, APFS and NTFS (255 UTF-16 units there)


def too_long(name: str) -> str | None:
    """Why one path component is longer than a file system holds, else None."""
    size = len(name.encode("utf-8", "surrogateescape"))
    return (
        f"is {size} bytes long; a file or directory name holds at most {NAME_MAX_BYTES}"
        if size > NAME_MAX_BYTES
        else None
    )


def invisible_character(name: str) -> str | None:
    """``U+XXXX`` of the first bidi control or zero-width character in ``name``, else None."""
    found = INVISIBLE.search(name)
    return f"U+{ord(found.group()):04X}" if found else None


def folded(path: str) -> str:
    """The path as a case-insensitive, normalizing file system compares it."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", path).casefold())


def collisions(paths: Iterable[str]) -> list[tuple[str, ...]]:
    """Groups of distinct paths (or their parent directories) that are one path on macOS and Windows."""
    seen: dict[str, set[str]] = {}
    for path in paths:
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            seen.setdefault(folded(prefix), set()).add(prefix)
    groups = [tuple(sorted(names)) for names in seen.values() if len(names) > 1]
    # A colliding directory makes every path under it collide too: report the shortest only.
    return sorted(g for g in groups if not any(g != other and g[0].startswith(other[0] + "/") for other in groups))


def shown(name: str) -> str:
    """``name`` quoted, with escapes where it is not ASCII (so NFC and NFD twins read differently)."""
    return repr(name) if name.isascii() else ascii(name)


def collision_problems(paths: Iterable[str]) -> Iterator[Problem]:
    for group in collisions(paths):
        names = " and ".join(map(shown, group))
        yield Problem(
            "layout.name-collision",
            group[0],
            f"{names} differ only in case or Unicode normalization: one file on macOS and Windows checkouts",
            "rename all but one of them (keep names ASCII where you can)",
        )
