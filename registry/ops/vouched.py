"""``registry validate`` on a tree unchanged since its last clean run: clean again, at the cost of
a walk of the tree (registry.core.verdict), without importing the models, the JSON Schemas and the
templates that :mod:`registry.ops.validate` checks with.  Anything changed: the full validate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.names import NOT_COVERED
from ..core.verdict import vouching

if TYPE_CHECKING:
    from ..core.errors import Problem
    from ..core.hashing.engine import Progress


def validate(root: Path, progress: Progress | None = None, linked: Path | None = None, linked_hub: bool = False, hub_progress: bool = True) -> list[Problem]:
    """:func:`registry.ops.validate.validate`, remembered while the tree stays as it was (a run with
    ``linked``/``linked_hub`` reads another registry or the Hub: never remembered)."""
    verdicts = vouching(root) if linked is None and not linked_hub else None
    if verdicts is not None and verdicts.recall("validate") == []:
        return []
    from . import validate as full

    problems = full.validate(root, progress=progress, linked=linked, linked_hub=linked_hub, hub_progress=hub_progress)
    if verdicts is not None and not problems:
        verdicts.remember("validate", [])
    return problems


def not_covered(root: Path) -> list[str]:
    """What sits in the registry folder that validate does not check and publish never uploads:
    git's files (``.github/`` workflows included) and the pre-commit configuration."""
    return [f"{name}/" if (root / name).is_dir() else name for name in NOT_COVERED if os.path.lexists(root / name)]
