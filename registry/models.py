"""Typed models of the registry's JSON files.

index.json is the one machine-readable truth of a registry: the card, the checksums and the
publish plan are all derived from it.  These models are the single definition of its shape;
``schemas/*.schema.json`` are generated from them (see :mod:`registry.schemas`) so that other
tools can validate a registry without importing this package.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SHA256_PATTERN = r"^[0-9a-f]{64}$"
DATA_VERSION_PATTERN = r"^v[0-9]+(\.[0-9]+)*$"
# A path component: no separators, no leading dot, no control characters or backslashes.
# Match it with re.fullmatch: re.match lets ``$`` match before a final newline.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+\-]*$"
# Control characters (C0, DEL, C1) and the Unicode line separators: in a name or path they would
# split a SHA256SUMS line or a card row.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Free text the card shows (notes): far above any real note, far below what would bloat index.json.
MAX_NOTES_CHARS = 64 * 1024

Sha256 = str
METHODS: tuple[str, ...] = ("state", "miss", "full")
Method = Literal["state", "miss", "full"]

INDEX_FORMAT_VERSION: Final = 1


class _Strict(BaseModel):
    # No NaN or Infinity in any float field: JSON has no such numbers (see docs/formats.md).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


class Architecture(_Strict):
    """Shape facts read from a checkpoint's tensors; they decide what State/MiSS files fit."""

    n_layer: int = Field(ge=1)
    n_embd: int = Field(ge=1)
    head_size: int = Field(ge=1)
    vocab_size: int = Field(ge=1)
    n_head: int | None = Field(default=None, ge=1)
    dim_ffn: int | None = Field(default=None, ge=1)


class Base(_Strict):
    """A base checkpoint that State/MiSS/full weights were trained on.

    The base file itself never lives in the registry (it is published upstream); its sha256 is
    the fingerprint every derived weight is checked against.
    """

    name: str = Field(pattern=NAME_PATTERN, description="Directory name: the file name without .pth")
    filename: str = Field(pattern=NAME_PATTERN)
    source: str | None = Field(default=None, description="Hub repo the base file comes from, e.g. BlinkDL/rwkv7-g1")
    sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    vocab: str | None = None
    architecture: Architecture | None = Field(
        default=None, description="Null when the base was declared by hash only (--metadata-only)"
    )
    size: int | None = Field(default=None, ge=0)


class DataRef(_Strict):
    """The training data an entry was trained on (seed 002's dataset versions)."""

    version: str = Field(pattern=DATA_VERSION_PATTERN)
    sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    dataset_repo: str | None = None


class Score(_Strict):
    """One evaluation result; only results with the same date and backend are comparable."""

    benchmark: str = Field(min_length=1)
    value: float
    unit: str = "%"
    date: date
    backend: str = Field(min_length=1)
    runs: int = Field(default=1, ge=1)
    notes: str = Field(default="", max_length=MAX_NOTES_CHARS)


class FileRef(_Strict):
    """A file that belongs to an entry without being its main path (e.g. a safetensors shard)."""

    path: str
    sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    size: int = Field(ge=0)


class GateSummary(_Strict):
    """What the smoke gate concluded for exactly these bytes (full receipt in .registry/gates/)."""

    passed: bool
    device: Literal["cuda", "cpu"]
    file_sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    receipt: str
    gpu: str | None = None
    date: str


class Entry(_Strict):
    """One weight file (or one sharded checkpoint) in the registry."""

    path: str = Field(description="POSIX path relative to the registry root")
    method: Method
    base_sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    data: DataRef
    sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    size: int = Field(ge=0)
    format: Literal["pth", "safetensors", "safetensors-sharded"] = "pth"
    content_version: Sha256 | None = Field(default=None, pattern=SHA256_PATTERN)
    recommended: bool = False
    notes: str = Field(default="", max_length=MAX_NOTES_CHARS)
    scores: list[Score] = Field(default_factory=list)
    derived_from: str | None = Field(default=None, description="Path of the entry this one was converted from")
    shards: list[FileRef] = Field(default_factory=list)
    gate: GateSummary | None = None

    @field_validator("path")
    @classmethod
    def _relative_posix(cls, value: str) -> str:
        problem = path_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class Rewrite(_Strict):
    """A recorded, deliberate change to a file that had already been published."""

    path: str
    old_sha256: Sha256 | None = Field(default=None, pattern=SHA256_PATTERN)
    new_sha256: Sha256 | None = Field(default=None, pattern=SHA256_PATTERN)
    reason: str = Field(min_length=1)
    date: str


class RegistryInfo(_Strict):
    """Registry-wide settings that the card needs."""

    title: str = "RWKV-7 weights"
    license: str | None = None
    tags: list[str] = Field(default_factory=lambda: ["rwkv", "rwkv-7"])
    repo_id: str | None = None


class Index(_Strict):
    """index.json: bases and one entry per weight file."""

    format_version: Literal[1] = INDEX_FORMAT_VERSION
    registry: RegistryInfo = Field(default_factory=RegistryInfo)
    bases: list[Base] = Field(default_factory=list)
    entries: list[Entry] = Field(default_factory=list)
    rewrites: list[Rewrite] = Field(default_factory=list)

    def base_by_name(self, name: str) -> Base | None:
        return next((b for b in self.bases if b.name == name), None)

    def base_by_sha(self, sha256: str) -> Base | None:
        return next((b for b in self.bases if b.sha256 == sha256), None)

    def entry_by_path(self, path: str) -> Entry | None:
        return next((e for e in self.entries if e.path == path), None)


class Trainer(_Strict):
    name: str = Field(min_length=1, description="e.g. rwkv_state_tune, rwkv_miss_tune")
    version: str = Field(min_length=1)
    commit: str | None = None


class TrainRun(_Strict):
    """Per-run overrides inside one data-version directory (seed 001: three MiSS learning rates)."""

    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    command: str | None = None
    started: str | None = None
    finished: str | None = None


class TrainJson(_Strict):
    """train.json next to the weights: how they were trained, reproducibly."""

    trainer: Trainer
    hyperparameters: dict[str, Any]
    command: str = Field(min_length=1, description="Equivalent command line")
    data_sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    runs: dict[str, TrainRun] = Field(default_factory=dict)
    notes: str = Field(default="", max_length=MAX_NOTES_CHARS)


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a registry path, or None when it can.

    Registry paths are relative POSIX paths that stay under the root; they end up in
    SHA256SUMS and on the Hub, where a newline or backslash would corrupt the line format.
    """
    if not path:
        return "empty path"
    if "\\" in path:
        return f"path {path!r} contains a backslash"
    if CONTROL_CHARACTERS.search(path):
        return f"path {path!r} contains a control character (newline?)"
    if path.startswith("/"):
        return f"path {path!r} is absolute"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return f"path {path!r} has an empty, '.' or '..' component"
    if any(p != p.strip() for p in parts):
        return f"path {path!r} has a name that starts or ends with white space"
    return None


MODELS: dict[str, type[BaseModel]] = {"index": Index, "train": TrainJson}
