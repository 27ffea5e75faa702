"""Where files may live in a dataset registry, as pure functions of relative paths (seed 002).

```
<version>/dataset/train/rows.jsonl | segments*.jsonl | train.jsonl | manifest.json
<version>/dataset/validation/…      (the same)
<version>/train-rows.jsonl  validation-rows.jsonl  final-stats.json  release-manifest.json  *.log
```
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import Problem
from ..core.models import DATA_VERSION_PATTERN
from ..core.names import DATASET_ROOT_FILES, ROWS_NAME, SPLIT_MANIFEST, SPLIT_PARENT, SPLITS, TEXT_NAME

GITATTRIBUTES = "*.jsonl filter=lfs diff=lfs merge=lfs -text\n*.log filter=lfs diff=lfs merge=lfs -text\n"


def is_segments(name: str) -> bool:
    return name.startswith("segments") and name.endswith(".jsonl")


@dataclass(frozen=True)
class VersionPath:
    """A file of a version: the version and its path inside the version folder."""

    version: str
    rel: str  # inside <version>/

    @property
    def split(self) -> str | None:
        parts = self.rel.split("/")
        return parts[1] if len(parts) == 3 else None

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]


def place_in_version(rel: str) -> str | None:
    """Why ``rel`` (inside a version folder) is not a place for a file, or None when it is."""
    parts = rel.split("/")
    if len(parts) == 1:
        name = parts[0]
        if name.endswith((".log", ".json", ".jsonl")):
            return None
        return "only *.jsonl, *.json and *.log files belong at a version's top level"
    if len(parts) == 3 and parts[0] == SPLIT_PARENT and parts[1] in SPLITS:
        name = parts[2]
        if name in (ROWS_NAME, TEXT_NAME, SPLIT_MANIFEST) or is_segments(name):
            return None
        return f"a split folder holds {ROWS_NAME}, segments*.jsonl, {TEXT_NAME} and {SPLIT_MANIFEST} only"
    return "not a place in a version folder (<version>/dataset/{train,validation}/<file> or <version>/<file>)"


def place(rel: str, versions: set[str]) -> VersionPath | Problem | None:
    """Classify a file of the registry: a VersionPath, None for an allowed root file, or a Problem."""
    parts = rel.split("/", 1)
    if len(parts) == 1:
        if rel in DATASET_ROOT_FILES:
            return None
        return Problem(
            "layout.stray-file",
            rel,
            "unexpected file at the dataset registry's root",
            "move it into a version folder or delete it",
        )
    version, inner = parts
    if not re.fullmatch(DATA_VERSION_PATTERN, version):
        return Problem(
            "layout.bad-data-version",
            rel,
            f"folder {version!r} does not look like a data version (v1.41, v2.1)",
            "rename the folder or delete it",
        )
    if version not in versions:
        return Problem(
            "layout.unknown-version-dir",
            rel,
            f"folder {version!r} is not a version in index.json",
            f"add it with `registry dataset add {version}/ --version {version} …` or delete it",
        )
    why = place_in_version(inner)
    if why:
        return Problem("layout.stray-file", rel, why, "move the file to its place or delete it")
    return VersionPath(version, inner)


# Front matter keys only the Hub's dataset cards have: a README holding one is a dataset repo's.
DATASET_CARD_KEYS = frozenset(
    {
        "task_categories",
        "task_ids",
        "size_categories",
        "configs",
        "dataset_info",
        "pretty_name",
        "annotations_creators",
        "source_datasets",
        "multilinguality",
    }
)


def version_folders(files: list[str]) -> list[str]:
    """The top-level folders of ``files`` laid out as data versions (``v1.41/dataset/train/…``):
    what tells a hand-made dataset repo (seed 002) from a model repo."""
    return sorted(
        {
            rel.split("/")[0]
            for rel in files
            if re.fullmatch(DATA_VERSION_PATTERN, rel.split("/")[0]) and rel.split("/")[1:2] == [SPLIT_PARENT]
        }
    )


def dataset_repo_signs(files: list[str], front_matter: Mapping[str, Any], has_weights: bool) -> str | None:
    """Why a hand-made folder is a dataset repo (its version folders; with no weight, its README's
    dataset-card keys), or None."""
    folders = version_folders(files)
    if folders:
        return f"holds data version folders ({', '.join(folders)})"
    keys = sorted(DATASET_CARD_KEYS & set(front_matter))
    if keys and not has_weights:
        return f"holds no weight and its README's front matter has dataset-card keys ({', '.join(keys)})"
    return None
