"""Checks of the names, hashes and dates users pass on the command line, before anything is staged."""

from __future__ import annotations

import re
from datetime import date

from .errors import RegistryError
from .models import NAME_PATTERN, SHA256_PATTERN


def require_name(value: str, what: str, option: str) -> None:
    if not re.match(NAME_PATTERN, value):
        raise RegistryError(
            "args.bad-name", value, f"{what} {value!r} is not a plain name (no path separators, no leading dot)", f"pass a plain name to {option}"
        )


def require_sha(value: str, option: str) -> str:
    value = value.lower()
    if not re.match(SHA256_PATTERN, value):
        raise RegistryError("args.bad-sha256", value, "not a 64-hex sha256", f"pass the full sha256 to {option}")
    return value


def parse_date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise RegistryError("args.bad-date", value, "not a YYYY-MM-DD date", "pass --date YYYY-MM-DD") from exc
