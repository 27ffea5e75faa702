"""The one part of README.md that people write: known problems, intended use, limitations.

Everything else in the card is rendered from index.json and overwritten on every change, so the
hand-written text lives between two HTML comment markers and is carried over byte for byte.  A
README whose markers are broken, or that has text but no markers at all, is refused rather than
re-rendered: re-rendering would silently throw that text away.
"""

from __future__ import annotations

from ..errors import RegistryError
from ..repo import CARD_NAME

START = "<!-- registry:handwritten:start -->"
END = "<!-- registry:handwritten:end -->"

# Shown until someone writes the section; both languages, like every other section.
DEFAULT = """
### 已知问题 · Known problems

- 尚未记录。这一段由人维护：写在两个标记之间的文字，`registry card` 重新生成本文件时原样保留。
- None recorded yet. This part is maintained by hand: text between the two markers is kept
  verbatim whenever `registry card` re-renders this file.

### 用途与局限 · Intended use and limitations

- 尚未填写：适合做什么、不适合做什么、已知的风险。
- Not filled in yet: what these weights are for, what they are not for, and known risks.
"""


def marker_in(text: str) -> str | None:
    """The hand-written-section marker ``text`` holds, if any: index text that the card shows
    must not, or the rendered card would hold a second marker and could not be rendered again."""
    return next((marker for marker in (START, END) if marker in text), None)


_FIX_PAIR = f"keep exactly one `{START}` … `{END}` pair in {CARD_NAME}, around the hand-written text"


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _refuse(message: str, fix: str = _FIX_PAIR) -> RegistryError:
    return RegistryError("card.markers", CARD_NAME, message, fix)


def extract(existing: str | None) -> str:
    """The hand-written text of an existing README.md (without the markers), or the default.

    A missing or blank README gets the default placeholder; anything else must hold exactly one
    start marker followed by exactly one end marker.
    """
    if existing is None or not existing.strip():
        return DEFAULT
    starts, ends = existing.count(START), existing.count(END)
    if (starts, ends) == (0, 0):
        raise _refuse(
            "README.md has text but no hand-written section, so re-rendering would discard it",
            f"move the text to keep between `{START}` and `{END}` lines, or delete {CARD_NAME} to start from the default card",
        )
    if (starts, ends) == (1, 0):
        line = _line_of(existing, existing.index(START))
        raise _refuse(f"the hand-written section starts at line {line} but has no end marker", f"add a `{END}` line after the hand-written text")
    if (starts, ends) == (0, 1):
        line = _line_of(existing, existing.index(END))
        raise _refuse(f"the hand-written section ends at line {line} but has no start marker", f"add a `{START}` line before the hand-written text")
    if (starts, ends) != (1, 1):
        raise _refuse(f"found {starts} start and {ends} end markers of the hand-written section; exactly one of each is allowed")
    start, end = existing.index(START), existing.index(END)
    if end < start:
        raise _refuse(f"the end marker (line {_line_of(existing, end)}) comes before the start marker (line {_line_of(existing, start)})")
    return existing[start + len(START) : end]
