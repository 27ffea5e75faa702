"""Escaping for the places the card puts index text: table cells, code spans, headings, shells.

Notes, benchmark names and backends are free text from index.json; a ``|`` or a newline in one
would otherwise split a table row or end a heading.
"""

from __future__ import annotations

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


FILTERS: dict[str, Callable[[Any], str]] = {"md_cell": md_cell, "md_code": md_code, "md_inline": md_inline, "sh_quote": shlex.quote}
