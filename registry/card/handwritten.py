"""The one part of README.md that people write: anything the structured fields do not cover.

Everything else in the card is rendered from index.json and overwritten on every change, so the
hand-written text lives between two HTML comment markers and is carried over byte for byte.  A
README whose markers are broken, or that has text but no markers at all, is refused rather than
re-rendered: re-rendering would silently throw that text away.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..core.errors import RegistryError
from ..core.models import Language
from ..core.names import CARD_NAME

START = "<!-- registry:handwritten:start -->"
END = "<!-- registry:handwritten:end -->"

# Shown until someone writes the section, in the card's languages like every other section.
DEFAULTS = {
    "zh": "- 这一段由人维护：写在两个标记之间的文字，`registry card` 重新生成本文件时原样保留。已知问题、用途与局限有各自的字段（`registry describe`、`registry set`）。\n",
    "en": "- This part is maintained by hand: text between the two markers is kept verbatim whenever\n  `registry card` re-renders this file. Known issues, intended use and limitations have fields\n  of their own (`registry describe`, `registry set`).\n",
}


def default(languages: Sequence[str]) -> str:
    return "\n" + "".join(DEFAULTS[lang] for lang in languages)


def marker_in(text: str) -> str | None:
    """The hand-written-section marker ``text`` holds, if any: index text that the card shows
    must not, or the rendered card would hold a second marker and could not be rendered again."""
    return next((marker for marker in (START, END) if marker in text), None)


_FIX_PAIR = f"keep exactly one `{START}` … `{END}` pair in {CARD_NAME}, around the hand-written text"


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _refuse(message: str, fix: str = _FIX_PAIR) -> RegistryError:
    return RegistryError("card.markers", CARD_NAME, message, fix)


def extract(existing: str | None, languages: Sequence[str] = ("zh", "en")) -> str:
    """The hand-written text of an existing README.md (without the markers), or the default.

    A missing or blank README gets the default placeholder (in ``languages``); anything else must
    hold exactly one start marker followed by exactly one end marker.
    """
    if existing is None or not existing.strip():
        return default(languages)
    text = _between_markers(existing)
    # The placeholder follows the card's languages until someone writes the section.
    return default(languages) if text in {default(combo) for combo in LANGUAGE_CHOICES} else text


LANGUAGE_CHOICES = (("zh", "en"), ("en", "zh"), ("zh",), ("en",))


def _between_markers(existing: str) -> str:
    starts, ends = existing.count(START), existing.count(END)
    if (starts, ends) == (0, 0):
        raise _refuse(
            "README.md has text but no hand-written section, so re-rendering would discard it",
            f"move the text to keep between `{START}` and `{END}` lines, or delete {CARD_NAME} to start from the default card",
        )
    if (starts, ends) == (1, 0):
        line = _line_of(existing, existing.index(START))
        raise _refuse(
            f"the hand-written section starts at line {line} but has no end marker",
            f"add a `{END}` line after the hand-written text",
        )
    if (starts, ends) == (0, 1):
        line = _line_of(existing, existing.index(END))
        raise _refuse(
            f"the hand-written section ends at line {line} but has no start marker",
            f"add a `{START}` line before the hand-written text",
        )
    if (starts, ends) != (1, 1):
        raise _refuse(
            f"found {starts} start and {ends} end markers of the hand-written section; exactly one of each is allowed"
        )
    start, end = existing.index(START), existing.index(END)
    if end < start:
        raise _refuse(
            f"the end marker (line {_line_of(existing, end)}) comes before the start marker (line {_line_of(existing, start)})"
        )
    return existing[start + len(START) : end]


def keep_whole(existing: str | None) -> str | None:
    """A README written by hand (text, no markers) as a card to render from: the whole text becomes
    the hand-written section, so nothing of it is lost; None when the README renders as it is
    (blank, or already a registry card).  A YAML front matter block is kept inside the section as
    an HTML comment, since the card's front matter is rendered from index.json."""
    if existing is None or not existing.strip() or marker_in(existing):
        return None
    front, body = split_front_matter(existing)
    kept = f"<!-- front matter of the hand-written README:\n{front}-->\n" if front else ""
    text = kept + body
    return f"{START}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{END}\n"


def split_front_matter(text: str) -> tuple[str, str]:
    """(the YAML between a leading ``---`` pair, the rest); ("", text) when there is none."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 3)
        if end != -1:
            return text[4 : end + 1], text[end + 5 :]
    return "", text


_CJK = re.compile("[\u3400-\u9fff]")
_LATIN = re.compile("[A-Za-z]")
_CODE = re.compile(r"^(```|~~~).*?^\1[^\n]*$|`[^`\n]*`", re.MULTILINE | re.DOTALL)


def prose_languages(body: str) -> list[Language]:
    """The card's language, as the author wrote it: the prose outside code, where Chinese
    characters are at least a quarter as many as Latin letters (a character is about a word), is
    Chinese; otherwise English (an English card that quotes a Chinese prompt stays English)."""
    prose = _CODE.sub("", body)
    return ["zh"] if len(_CJK.findall(prose)) * 4 >= len(_LATIN.findall(prose)) else ["en"]
