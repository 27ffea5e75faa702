"""Checks of the names, hashes, numbers, dates and text users pass on the command line, before anything is staged.

Every name a command turns into a path (a base, a run, the weight's file name) passes through
:func:`require_name` or :func:`require_file_name`;
free text that the card shows passes through :func:`require_text`.
"""

from __future__ import annotations

import math
import re
from datetime import date

from ..core.collisions import invisible_character, too_long
from ..core.errors import RegistryError
from ..core.evaluation import split_value
from ..core.models import CONTROL_CHARACTERS, MAX_NOTES_CHARS, NAME_PATTERN, SHA256_PATTERN, path_problem

SURROGATES = re.compile("[\ud800-\udfff]")


def _shown(value: str) -> str:
    """``value`` as the file of a refusal: quoted when it holds characters a terminal would act on."""
    return value if value.isprintable() and value == value.strip() else repr(value)


def _name_defect(value: str) -> str:
    long = too_long(value)
    if long:
        return long
    if CONTROL_CHARACTERS.search(value):
        return "contains a control character (newline, tab?)"
    if "\\" in value:
        return "contains a backslash"
    invisible = invisible_character(value)
    if invisible:
        return f"contains {invisible}, a bidi control or zero-width character that makes it read as another name"
    if value != value.strip():
        return "starts or ends with white space"
    return ""


def require_name(value: str, what: str, option: str) -> None:
    """A plain name: letters, digits, ``.``, ``_``, ``+``, ``-``; it becomes a directory in the registry."""
    defect = _name_defect(value) or (
        ""
        if re.fullmatch(NAME_PATTERN, value)
        else "is not a plain name (letters, digits, '.', '_', '+', '-'; no path separators, no leading dot)"
    )
    if defect:
        raise RegistryError(
            "args.bad-name", _shown(value), f"{what} {value!r} {defect}", f"pass a plain name to {option}"
        )


def require_file_name(value: str, what: str, option: str) -> None:
    """A file name that can be a registry path component and a SHA256SUMS line's path."""
    defect = _name_defect(value)
    if not defect and ("/" in value or path_problem(value)):
        defect = "is not a file name"
    if defect:
        raise RegistryError(
            "args.bad-name",
            _shown(value),
            f"{what} {value!r} {defect}",
            f"rename the file (no control, bidi or zero-width characters, backslashes or surrounding spaces) and pass it to {option}",
        )


def require_sha(value: str, option: str) -> str:
    value = value.lower()
    if not re.fullmatch(SHA256_PATTERN, value):
        raise RegistryError(
            "args.bad-sha256", _shown(value), "not a 64-hex sha256", f"pass the full sha256 to {option}"
        )
    return value


def require_finite(value: float, option: str) -> float:
    """A number JSON can hold: NaN and ±Infinity (``nan``, ``inf``, ``1e309``) have no JSON form."""
    if not math.isfinite(value):
        raise RegistryError(
            "args.not-finite",
            option,
            f"{value} is not a finite number, and JSON has no NaN or Infinity",
            f"pass a finite number to {option}",
        )
    return value


def require_text(value: str, option: str, limit: int = MAX_NOTES_CHARS) -> str:
    """Free text the card shows: valid UTF-8, bounded, and free of the card's hand-written-section markers."""
    from ..card.handwritten import (
        marker_in,
    )  # the card package (Jinja2, the Hub's card data) is heavy; load it only here

    if SURROGATES.search(value):  # how Python hands over command-line bytes that are not UTF-8
        raise RegistryError(
            "args.not-utf8",
            option,
            "the text is not valid UTF-8",
            f"pass {option} as UTF-8 text (check the terminal's or the file's encoding)",
        )
    if len(value) > limit:
        raise RegistryError(
            "args.too-long",
            option,
            f"the text is {len(value)} characters; at most {limit} are kept",
            f"shorten {option} (long notes belong in the card's hand-written section)",
        )
    marker = marker_in(value)
    if marker:
        raise RegistryError(
            "args.card-marker",
            option,
            f"the text contains the card's hand-written-section marker {marker}, which would leave README.md unrenderable",
            f"remove that marker from {option}",
        )
    return value


def parse_date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise RegistryError("args.bad-date", _shown(value), "not a YYYY-MM-DD date", "pass --date YYYY-MM-DD") from exc


def parse_value(text: str, unit: str | None, option: str = "--value") -> tuple[float, str]:
    """``--value`` (and ``--unit``, None when not given) as a value and a unit (``%`` by default);
    the value is checked finite by the caller (:func:`require_finite`)."""
    parsed = split_value(text)
    if parsed is None and text.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
        parsed = float(text), None  # a number JSON cannot hold: require_finite names it
    if parsed is None:
        raise RegistryError(
            "args.bad-value",
            option,
            f"{text!r} is not a number, a percentage (52.2%) or a score out of a total (41.0/60)",
            f"pass {option} as 52.2, 52.2% or 41.0/60",
        )
    value, written = parsed
    if written is not None and unit is not None and written != unit:
        raise RegistryError(
            "args.bad-value",
            option,
            f"{text!r} carries the unit {written} but --unit says {unit}",
            "give the unit once: in --value or with --unit",
        )
    return value, written or unit or "%"


REPO_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*"


def check_repo_id(value: str, option: str) -> str:
    if not re.fullmatch(REPO_ID_PATTERN, value):
        raise RegistryError(
            "args.bad-repo-id",
            option,
            f"{value!r} is not a Hub repo id",
            f"pass NAMESPACE/NAME to {option}, e.g. No-22/rwkv-agent-weights",
        )
    return value
