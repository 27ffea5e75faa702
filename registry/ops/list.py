"""What ``registry list`` does: the bases and entries index.json holds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.models import Base, Entry
from ..core.repo import Repo


@dataclass(frozen=True)
class Listing:
    bases: list[Base]
    entries: list[Entry]

    def as_dict(self) -> dict[str, Any]:
        return {"bases": [b.model_dump(mode="json") for b in self.bases], "entries": [e.model_dump(mode="json") for e in self.entries]}


def list_registry(root: Path) -> Listing:
    """The bases and entries of the registry at (or above) ``root``."""
    index = Repo.open(root).load_index()
    return Listing(list(index.bases), list(index.entries))
