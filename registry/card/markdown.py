"""Escaping for the places the card puts index text: paragraphs, table cells, code spans and
blocks, headings, shells.

Notes, benchmark names and backends are free text from index.json; a ``|`` or a newline in one
would otherwise split a table row or end a heading, a ``<`` would open raw HTML (``<script>``, an
``onerror=``, or an unterminated ``<!--`` that hides the rest of the card from a renderer), and a
line starting with ``#`` or a code fence would add a heading or swallow the card's own.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from typing import Any

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# What makes a line a block of its own: a heading, a list item, a quote, a code fence, a table
# row, a setext underline or a thematic break.
_BLOCK_START = re.compile(r"#{1,6}(?=\s|$)|[-+*](?=\s|$)|>|`{3,}|~{3,}|[=|]|([-*_])(\s*\1){2,}\s*$")
_ORDERED_ITEM = re.compile(r"(\d{1,9})([.)])(?=\s|$)")


def no_html(value: Any) -> str:
    """Text in which no raw HTML starts: every ``<`` written as ``&lt;``."""
    return str(value).replace("<", "&lt;")


def md_text(value: Any) -> str:
    """User text as Markdown inline text: no raw HTML, and no line that starts a block of its own
    (the marker is backslash-escaped, so it shows as typed).  Idempotent."""
    lines = []
    for line in _LINE_BREAK.split(no_html(value)):
        line = line.lstrip(" \t")  # four spaces after a blank line would open a code block
        if _ORDERED_ITEM.match(line):
            line = _ORDERED_ITEM.sub(r"\1\\\2", line, count=1)
        elif _BLOCK_START.match(line):
            line = "\\" + line
        lines.append(line)
    return "\n".join(lines)


def md_fenced(value: Any, language: str = "") -> str:
    """A fenced code block holding ``value`` as it is: the fence is longer than any run of
    backticks in it, so no line of it can close the block early."""
    text = str(value)
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def md_cell(value: Any) -> str:
    """Text that stays inside one GFM table cell: ``\\`` and ``|`` escaped, no raw HTML, newlines as ``<br>``."""
    text = no_html(value).replace("\\", "\\\\").replace("|", "\\|")
    return "<br>".join(_LINE_BREAK.split(text))


def md_code(value: Any) -> str:
    """An inline code span that survives backticks in the text (fence longer than any run)."""
    text = str(value)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_inline(value: Any) -> str:
    """One line of text for a heading or a sentence: any run of whitespace becomes one space, no raw HTML."""
    return " ".join(no_html(value).split())


def escaped(value: Any) -> str:
    """Text with newlines and other control characters written as escapes: ``\\n\\nUser:``."""
    return json.dumps(str(value), ensure_ascii=False)[1:-1]


def py_str(value: Any) -> str:
    """A Python string literal for a snippet: triple-quoted when it spans lines and can be, else
    double-quoted with escapes (a JSON string is a valid Python literal)."""
    text = str(value)
    lines = text.split("\n")
    if (
        len(lines) > 1
        and lines[0]
        and all(line.isprintable() for line in lines)
        and '"""' not in text
        and "\\" not in text
        and not text.endswith('"')
    ):
        return f'"""{text}"""'
    return json.dumps(text, ensure_ascii=False)


def thousands(value: Any) -> str:
    """``413,123,655``: counts the way seed 000 prints them."""
    return f"{int(value):,}"


FILTERS: dict[str, Callable[[Any], str]] = {
    "md_cell": md_cell, "md_code": md_code, "md_inline": md_inline, "md_text": md_text, "md_fenced": md_fenced,
    "sh_quote": shlex.quote, "escaped": escaped, "py_str": py_str, "thousands": thousands,
}  # fmt: skip
