"""What ``registry list`` does: the bases and entries index.json holds; in a dataset registry, its
versions, the file each trained weight read, and the weights linked to each version."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.models import Base, Entry
from ..core.repo import Repo, is_dataset
from ..dataset.models import DataVersion, ModelSource
from ..dataset.store import load


@dataclass(frozen=True)
class Listing:
    bases: list[Base]
    entries: list[Entry]

    def as_dict(self) -> dict[str, Any]:
        return {"bases": [b.model_dump(mode="json") for b in self.bases], "entries": [e.model_dump(mode="json") for e in self.entries]}


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
        return {"repo_id": self.repo_id, "revision": self.revision, "path": self.path, "method": self.method, "base": self.base, "sha256": self.sha256, "recommended": self.recommended}


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
            "version": v.version, "date": v.date.isoformat(), "thinking": v.thinking, "profile": v.profile, "teachers": list(v.teachers),
            "trained_file": {"path": self.trained_path, "sha256": v.trained_file.sha256, "size": v.trained_file.size},
            "train_rows": v.train_rows, "validation_rows": v.validation_rows, "weights": [w.as_dict() for w in self.weights],
        }  # fmt: skip


@dataclass(frozen=True)
class DatasetListing:
    versions: list[VersionListing]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "dataset", "versions": [v.as_dict() for v in self.versions]}


def _linked(version: DataVersion, models: list[ModelSource]) -> list[LinkedWeight]:
    return [
        LinkedWeight(m.repo_id, m.revision, w.path, w.method, w.base, w.sha256, w.recommended)
        for m in models for w in m.weights if w.data_sha256 == version.trained_file.sha256
    ]  # fmt: skip


def list_registry(root: Path) -> Listing | DatasetListing:
    """The bases and entries of the registry at (or above) ``root``; of a dataset registry, its versions."""
    repo = Repo.open(root)
    if is_dataset(repo.root):
        index = load(repo)
        return DatasetListing([VersionListing(v, _linked(v, index.models)) for v in index.versions])
    index_ = repo.load_index()
    return Listing(list(index_.bases), list(index_.entries))
