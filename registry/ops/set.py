"""``registry set FIELD VALUE…``: the registry-level fields of index.json (title, license, repo id,
who may see the repo (access: as publish --private/--gated made it, or as changed on the Hub since), the card's languages, summary, intended use, limitations, attribution)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import get_args

from ..core.errors import RegistryError
from ..core.models import LANGUAGES, Access, Index, RegistryInfo
from ..core.schemas import build
from ..index.arguments import check_repo_id, require_text
from ..index.editing import card_language, edit_index, localized

LICENSE_PATTERN = r"[A-Za-z0-9][A-Za-z0-9.+\-]*"  # an SPDX-like id (apache-2.0, mit, cc-by-4.0) or the Hub's "other"
# FIELD on the command line -> RegistryInfo attribute
SCALARS = {"title": "title", "license": "license", "repo-id": "repo_id", "access": "access"}
TEXTS = {
    "summary": "summary",
    "intended-use": "intended_use",
    "limitations": "limitations",
    "attribution": "attribution",
}
FIELDS = (*SCALARS, "languages", "tags", *TEXTS)
FRONT_MATTER_KEYS = {
    "license": "license",
    "tags": "tags",
    "languages": "language",
}  # field -> the card metadata key it sets


def _scalar(field: str, values: Sequence[str]) -> str | None:
    if len(values) > 1:
        raise RegistryError(
            "args.too-many", field, f"{field} takes one value, got {len(values)}", f"quote the {field} as one argument"
        )
    if not values:
        if field == "title":
            raise RegistryError(
                "args.missing", field, "the card needs a title", "pass the title: registry set title TEXT"
            )
        return None
    value = require_text(values[0], field)
    if not value.strip() or "\n" in value:
        raise RegistryError(
            "args.invalid", field, f"{field} must be one non-empty line", f"pass {field} as one line of text"
        )
    if field == "license" and not re.fullmatch(LICENSE_PATTERN, value):
        raise RegistryError(
            "args.bad-license",
            field,
            f"{value!r} is not a license id",
            "pass an SPDX-like id as the Hub lists it (e.g. apache-2.0, mit, cc-by-4.0), or other",
        )
    if field == "access" and value not in get_args(Access):
        raise RegistryError(
            "args.invalid",
            field,
            f"{value!r} is not who may see a repo",
            f"pass one of {', '.join(get_args(Access))} (what the repo's settings on the Hub say), or nothing to unset it",
        )
    return check_repo_id(value, field) if field == "repo-id" else value


def _languages(values: Sequence[str]) -> list[str]:
    unknown = [v for v in values if v not in LANGUAGES]
    if unknown or not values:
        shown = repr(unknown[0]) if unknown else "nothing"
        raise RegistryError(
            "args.bad-language",
            "languages",
            f"{shown} is not a card language",
            "pass zh, en, or both (in the order the card shows them): registry set languages zh en",
        )
    return list(values)


def set_field(root: Path, field: str, values: Sequence[str], lang: str | None = None) -> RegistryInfo:
    """Set ``field`` to ``values`` (none: unset it) and re-render the card; the new registry info."""
    if field not in FIELDS:
        raise RegistryError(
            "args.unknown-field", field, f"{field!r} is not a registry field", f"pass one of: {', '.join(FIELDS)}"
        )
    if lang is not None and field not in TEXTS:
        raise RegistryError("args.invalid", "--lang", f"{field} is the same in every language", "drop --lang")

    def change(index: Index) -> RegistryInfo:
        info = index.registry
        info.front_matter.pop(
            FRONT_MATTER_KEYS.get(field, ""), None
        )  # a key a registry command set is the registry's from now on
        if field in SCALARS:
            setattr(info, SCALARS[field], _scalar(field, values))
        elif field == "languages":
            info.languages = build(
                RegistryInfo, {"languages": _languages(values)}, {"languages": "languages"}
            ).languages
        elif field == "tags":
            info.tags = [require_text(v, field) for v in values]
        else:
            which = card_language(index, lang, field)
            setattr(
                info,
                TEXTS[field],
                localized(getattr(info, TEXTS[field]), which, [require_text(v, field) for v in values]),
            )
        return info

    return edit_index(root, change)
