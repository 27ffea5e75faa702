"""What ``registry list`` does: the bases, entries and Transformers checkpoints index.json holds; in
a dataset registry, its versions, the file each trained weight read, and the weights linked to each
version."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.verdict import vouching

if TYPE_CHECKING:
    from ..dataset.models import DataVersion, ModelSource


@dataclass(frozen=True)
class Listing:
    """The bases, entries and checkpoints as index.json's JSON form (what ``--json`` prints)."""

    bases: list[dict[str, Any]]
    entries: list[dict[str, Any]]
    checkpoints: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {"bases": self.bases, "entries": self.entries, "checkpoints": self.checkpoints}


@dataclass(frozen=True)
class LinkedWeight:
    """A weight of a linked model registry trained on one version (``dataset link``'s record)."""

    repo_id: str | None
    revision: str | None
    path: str
    method: str
    base: str
    sha256: str
    recommended: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "revision": self.revision,
            "path": self.path,
            "method": self.method,
            "base": self.base,
            "sha256": self.sha256,
            "recommended": self.recommended,
        }


@dataclass(frozen=True)
class VersionListing:
    version: DataVersion
    weights: list[LinkedWeight]

    @property
    def trained_path(self) -> str:
        """The trained file's path in the registry (index.json records it inside the version folder)."""
        return f"{self.version.version}/{self.version.trained_file.path}"

    def as_dict(self) -> dict[str, Any]:
        v = self.version
        return {
            "version": v.version,
            "date": v.date.isoformat(),
            "thinking": v.thinking,
            "profile": v.profile,
            "teachers": list(v.teachers),
            "trained_file": {"path": self.trained_path, "sha256": v.trained_file.sha256, "size": v.trained_file.size},
            "train_rows": v.train_rows,
            "validation_rows": v.validation_rows,
            "weights": [w.as_dict() for w in self.weights],
        }


@dataclass(frozen=True)
class DatasetListing:
    versions: list[VersionListing]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "dataset", "versions": [v.as_dict() for v in self.versions]}


def _linked(version: DataVersion, models: list[ModelSource]) -> list[LinkedWeight]:
    return [
        LinkedWeight(m.repo_id, m.revision, w.path, w.method, w.base, w.sha256, w.recommended)
        for m in models
        for w in m.weights
        if w.data_sha256 == version.trained_file.sha256
    ]


def list_registry(root: Path) -> Listing | DatasetListing:
    """The bases, entries and checkpoints of the registry at (or above) ``root``, or a dataset registry's
    versions; on a model registry unchanged since the last list, the listing it printed, without
    parsing index.json again (registry.core.verdict)."""
    verdicts = vouching(root)
    kept = verdicts.recall("list") if verdicts is not None else None
    if isinstance(kept, dict) and all(isinstance(kept.get(k), list) for k in ("bases", "entries", "checkpoints")):
        return Listing(kept["bases"], kept["entries"], kept["checkpoints"])
    from ..core.repo import Repo, is_dataset  # the index's models: only for a tree that changed  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)

    repo = Repo.open(root)
    if is_dataset(repo.root):
        from ..dataset.store import load  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)

        dataset = load(repo)
        return DatasetListing([VersionListing(v, _linked(v, dataset.models)) for v in dataset.versions])
    index = repo.load_index()
    listing = Listing(
        [b.model_dump(mode="json") for b in index.bases],
        [e.model_dump(mode="json") for e in index.entries],
        [c.model_dump(mode="json") for c in index.checkpoints],
    )
    if verdicts is not None:
        verdicts.remember("list", listing.as_dict())
    return listing
