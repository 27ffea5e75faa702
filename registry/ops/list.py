"""What ``registry list`` does: the bases and entries index.json holds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.verdict import vouching


@dataclass(frozen=True)
class Listing:
    """The bases and entries as index.json's JSON form (what ``--json`` prints)."""

    bases: list[dict[str, Any]]
    entries: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {"bases": self.bases, "entries": self.entries}


def list_registry(root: Path) -> Listing:
    """The bases and entries of the registry at (or above) ``root``; on a tree unchanged since the
    last list, the listing it printed, without parsing index.json again (registry.core.verdict)."""
    verdicts = vouching(root)
    kept = verdicts.recall("list") if verdicts is not None else None
    if isinstance(kept, dict) and isinstance(kept.get("bases"), list) and isinstance(kept.get("entries"), list):
        return Listing(kept["bases"], kept["entries"])
    from ..core.repo import Repo  # the index's models: only for a tree that changed

    index = Repo.open(root).load_index()
    listing = Listing([b.model_dump(mode="json") for b in index.bases], [e.model_dump(mode="json") for e in index.entries])
    if verdicts is not None:
        verdicts.remember("list", listing.as_dict())
    return listing
