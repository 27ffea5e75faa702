"""``registry validate`` on a tree unchanged since its last clean run: clean again, at the cost of
a walk of the tree (registry.core.verdict), without importing the models, the JSON Schemas and the
templates that :mod:`registry.ops.validate` checks with.  Anything changed: the full validate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.names import NOT_COVERED
from ..core.validation_result import Validation
from ..core.verdict import vouching

if TYPE_CHECKING:
    from ..core.hashing.engine import Progress


def validate_report(
    root: Path,
    progress: Progress | None = None,
    linked: Path | None = None,
    linked_hub: bool = False,
    hub_progress: bool = True,
    require_bytes: bool = False,
    public_key: Path | None = None,
) -> Validation:
    """:func:`registry.ops.validate.validate_report`, remembered while the tree stays as it was.  Only
    the plain run is remembered: ``linked``/``linked_hub`` read another registry or the Hub,
    ``require_bytes`` and ``public_key`` ask for more than it checked."""
    plain = linked is None and not linked_hub and not require_bytes and public_key is None
    verdicts = vouching(root) if plain else None
    kept = Validation.from_verdict(verdicts.recall("validate")) if verdicts is not None else None
    if kept is not None:
        return kept
    from . import validate as full  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)

    report = full.validate_report(
        root, progress, linked, linked_hub, hub_progress, require_bytes=require_bytes, public_key=public_key
    )
    if verdicts is not None and not report.problems:
        verdicts.remember("validate", report.verdict())
    return report


def not_covered(root: Path) -> list[str]:
    """What sits in the registry folder that validate does not check and publish never uploads:
    git's files (``.github/`` workflows included) and the pre-commit configuration."""
    return [f"{name}/" if (root / name).is_dir() else name for name in NOT_COVERED if os.path.lexists(root / name)]
