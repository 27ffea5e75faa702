"""Escaping for the places the card puts index text: table cells, code spans, headings, shells.

Notes, benchmark names and backends are free text from index.json; a ``|`` or a newline in one
would otherwise split a table row or end a heading.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from typing import Any


def md_cell(value: Any) -> str:
    """Text that stays inside one GFM table cell: ``\\`` and ``|`` escaped, newlines as ``<br>``."""
    text = str(value).replace("\\", "\\\\").replace("|", "\\|")
    return "<br>".join(re.split(r"\r\n|\r|\n", text))


def md_code(value: Any) -> str:
    """An inline code span that survives backticks in the text (fence longer than any run)."""
    text = str(value)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_inline(value: Any) -> str:
    """One line of text for a heading or a sentence: any run of whitespace becomes one space."""
    return " ".join(str(value).split())


def escaped(value: Any) -> str:
    """Text with newlines and other control characters written as escapes: ``\\n\\nUser:``."""
    return json.dumps(str(value), ensure_ascii=False)[1:-1]


def py_str(value: Any) -> str:
    """A Python string literal for a snippet: triple-quoted when it spans lines and can be, else
    double-quoted with escapes (a JSON string is a valid Python literal)."""
    text = str(value)
    lines = text.split("\n")
    if len(lines) > 1 and lines[0] and all(line.isprintable() for line in lines) and '"""' not in text and "\\" not in text and not text.endswith('"'):
        return f'"""{text}"""'
    return json.dumps(text, ensure_ascii=False)


def thousands(value: Any) -> str:
    """``413,123,655``: counts the way seed 000 prints them."""
    return f"{int(value):,}"


FILTERS: dict[str, Callable[[Any], str]] = {
    "md_cell": md_cell, "md_code": md_code, "md_inline": md_inline, "sh_quote": shlex.quote,
    "escaped": escaped, "py_str": py_str, "thousands": thousands,
}  # fmt: skip
