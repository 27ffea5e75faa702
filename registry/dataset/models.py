"""The typed model of a dataset registry's index.json (``"kind": "dataset"``).

Like the model registry's :class:`registry.core.models.Index`, it is the one truth the card and the
checks are derived from; ``schemas/dataset-index.schema.json`` is generated from it.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from ..core.hashing.digest import sha256_hex
from ..core.models import (
    ACCESS_DESCRIPTION,
    BILINGUAL,
    DATA_VERSION_PATTERN,
    DATASET_KIND,
    GIT_COMMIT_PATTERN,
    PROFILES,
    SHA256_PATTERN,
    Access,
    Language,
    Localized,
    Method,
    _Strict,
    distinct_languages,
    path_problem,
)

Thinking = Literal["off", "full"]
# How a version's validation split was chosen: the rows whose family hashes to the remainder (seed 002).
SPLIT_RULE = re.compile(
    r"^sha256\((?P<key>[A-Za-z_][A-Za-z0-9_]*)\) mod (?P<modulus>[1-9][0-9]{0,5}) == (?P<remainder>[0-9]{1,6})$"
)
META_KEY = r"^[A-Za-z_][A-Za-z0-9_]*$"
VOCABULARY_FILE = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"  # a file name the rwkv package ships (.txt may be left out)
# The wire canonical's thinking field (seed 002: "format=xml;…;thinking=off;…").
_THINKING_FIELD = re.compile(r"(?:^|;)thinking=([^;]*)")


def wire_hash(canonical: str) -> str:
    """What ``meta.wire_hash`` is a hash of: the sha256 of ``meta.wire_canonical``'s UTF-8 bytes."""
    return sha256_hex(canonical.encode("utf-8"))


def wire_thinking(canonical: str) -> str | None:
    """The ``thinking=`` value a wire canonical states, or None when it states none."""
    match = _THINKING_FIELD.search(canonical)
    return match.group(1) if match else None


def _version_path(value: str) -> str:
    problem = path_problem(value)
    if problem:
        raise ValueError(problem)
    return value


class VersionFile(_Strict):
    """A file of a version, by its path relative to the version folder."""

    path: Annotated[str, AfterValidator(_version_path)] = Field(
        description="Relative to the version folder, e.g. dataset/train/segments-1-41.jsonl"
    )
    sha256: str = Field(pattern=SHA256_PATTERN)
    size: int = Field(ge=0)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class Wire(_Strict):
    """The conversation format the rows were rendered in (every row's meta.wire_canonical / wire_hash)."""

    canonical: str = Field(min_length=1, max_length=64 * 1024, description="meta.wire_canonical of every row")
    hash: str = Field(
        pattern=SHA256_PATTERN, description="meta.wire_hash of every row: sha256 of canonical's UTF-8 bytes"
    )

    @field_validator("hash")
    @classmethod
    def _hash_of_canonical(cls, value: str, info: ValidationInfo) -> str:
        canonical = info.data.get("canonical")
        if canonical is not None and wire_hash(canonical) != value:
            raise ValueError(f"is not the sha256 of the wire canonical ({wire_hash(canonical)[:12]}…)")
        return value


class DataVersion(_Strict):
    """One data version: the folder ``<version>/`` and what it was, as the card's versions table shows it."""

    version: str = Field(pattern=DATA_VERSION_PATTERN)
    date: date
    thinking: Thinking = Field(
        description="off: no thinking (g1k); full: with thinking (g1k-think); the wire canonical's thinking= agrees"
    )
    profile: str | None = Field(default=None, description="The chat format profile, e.g. g1k or g1k-think")
    teachers: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(min_length=1)
    trained_file: VersionFile = Field(
        description="The file the trainer read: its sha256 is the data sha256 weights cite"
    )
    train_rows: int = Field(ge=0)
    validation_rows: int = Field(ge=0)
    wire: Wire
    vocabulary: str = Field(
        pattern=VOCABULARY_FILE,
        max_length=200,
        description="The vocabulary the rows were checked against, e.g. rwkv_vocab_v20230424.txt: the rwkv package's file of that name tokenizes them",
    )
    stop_text: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="Every row's text ends with it: the profile's stop text (seed 002: \\n\\nUser:)",
    )
    context: int | None = Field(
        default=None,
        ge=1,
        description="The most tokens a row holds (seed 002: 8128; longer rows were dropped at packing)",
    )
    family_key: str | None = Field(
        default=None, pattern=META_KEY, description="The meta key naming a row's family: no family is in both splits"
    )
    split_rule: str | None = Field(
        default=None,
        pattern=SPLIT_RULE.pattern,
        description="How the validation split was chosen, e.g. sha256(family) mod 32 == 0 (recomputed for every row)",
    )
    flag_key: str | None = Field(
        default=None,
        pattern=META_KEY,
        description="A meta flag marking rows the card warns about, e.g. seeded_from_test",
    )
    flagged_rows: int | None = Field(
        default=None,
        ge=0,
        description="How many rows (both splits) have the flag true: counted, and shown in the card's known issues",
    )
    summary: Localized = Field(
        default_factory=Localized, description="What the folder is (seed 002: 原目录 final-20261013 原样)"
    )
    composition: Localized = Field(default_factory=Localized)
    known_issues: Localized = Field(default_factory=Localized)

    @model_validator(mode="after")
    def _facts_agree(self) -> DataVersion:
        profile = PROFILES.get(self.profile or "")
        if profile and profile.thinking != self.thinking:
            raise ValueError(f"profile {self.profile} is thinking={profile.thinking}, not {self.thinking}")
        if profile and self.stop_text is not None and self.stop_text != profile.stop_text:
            raise ValueError(f"profile {self.profile} stops at {profile.stop_text!r}, not {self.stop_text!r}")
        rule = SPLIT_RULE.match(self.split_rule or "")
        if rule and rule["key"] != self.family_key:
            raise ValueError(f"the split rule hashes meta.{rule['key']} but the family key is {self.family_key}")
        if rule and int(rule["remainder"]) >= int(rule["modulus"]):
            raise ValueError(
                f"the split rule's remainder {rule['remainder']} is not below its modulus {rule['modulus']}"
            )
        if (self.flag_key is None) != (self.flagged_rows is None):
            raise ValueError("a flag key and its flagged row count go together")
        return self

    @property
    def stop(self) -> str | None:
        """The text every row ends with: stated, or the known profile's."""
        profile = PROFILES.get(self.profile or "")
        return self.stop_text or (profile.stop_text if profile else None)


class TrainedWeight(_Strict):
    """A weight trained on one of the versions, read from a model registry's index.json (never typed in)."""

    path: str = Field(description="The entry's path in the model registry")
    method: Method
    base: str = Field(description="The base's name (the model registry's first directory level)")
    base_sha256: str = Field(pattern=SHA256_PATTERN)
    sha256: str = Field(pattern=SHA256_PATTERN)
    data_version: str = Field(pattern=DATA_VERSION_PATTERN)
    data_sha256: str = Field(pattern=SHA256_PATTERN)
    recommended: bool = False


class ModelSource(_Strict):
    """The model registry the weights table was derived from: a Hub repo at a commit, or a local folder."""

    repo_id: str | None = Field(default=None, description="The model repo on the Hub; null: a local registry only")
    revision: str | None = Field(
        default=None, pattern=GIT_COMMIT_PATTERN, description="The model repo's commit the weights were read at"
    )
    weights: list[TrainedWeight] = Field(default_factory=list)


class DatasetInfo(_Strict):
    title: str = "RWKV-7 training data"
    license: str | None = None
    repo_id: str | None = None
    access: Access | None = Field(default=None, description=ACCESS_DESCRIPTION)
    languages: Annotated[list[Language], AfterValidator(distinct_languages)] = Field(
        default_factory=lambda: list(BILINGUAL),
        min_length=1,
        max_length=2,
        description="The card's languages, in order",
    )
    data_languages: list[Annotated[str, Field(pattern=r"^[a-z]{2,3}$")]] = Field(
        default_factory=lambda: ["zh", "en"], description="Languages of the rows (the Hub's language metadata)"
    )
    task_categories: list[str] = Field(default_factory=lambda: ["text-generation"])
    tags: list[str] = Field(default_factory=lambda: ["rwkv", "rwkv-7", "agent", "distillation"])
    summary: Localized = Field(default_factory=Localized)
    attribution: Localized = Field(default_factory=Localized)
    front_matter: dict[str, Any] = Field(
        default_factory=dict,
        description="The author's own card metadata (a hand-written README's front matter, as written): every key stays in the card's; the author's values stand, lists the registry writes are merged in; size_categories and configs are the registry's",
    )


class DatasetIndex(_Strict):
    """index.json of a dataset registry: its versions and the weights trained on them."""

    SCHEMA_KIND: ClassVar[str] = "dataset-index"  # its checked-in schema: schemas/dataset-index.schema.json

    kind: Literal["dataset"] = DATASET_KIND
    format_version: Literal[1] = 1
    dataset: DatasetInfo = Field(default_factory=DatasetInfo)
    versions: list[DataVersion] = Field(default_factory=list)
    models: list[ModelSource] = Field(
        default_factory=list,
        description="Derived by `registry dataset link`: the weights each model registry trained on these versions",
    )

    def version(self, name: str) -> DataVersion | None:
        return next((v for v in self.versions if v.version == name), None)

    def by_data_sha(self) -> dict[str, DataVersion]:
        """Each version by the sha256 weights cite (its trained file's)."""
        return {v.trained_file.sha256: v for v in self.versions}
