"""The dataset card, README.md, rendered from a dataset registry's index.json (seed 002's card).

Every decision is made here (version order, which weights a version trained, the size category,
the viewer's configs); ``templates/dataset_card.md.j2`` only lays the text out.  Front matter is
huggingface_hub's own DatasetCardData, so the Hub parses exactly what was written; ``configs``
gives the dataset viewer each version's ``train`` and ``validation`` rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from huggingface_hub import DatasetCardData

from ..card import handwritten
from ..card.metadata import with_author
from ..card.render import render_body, require_renderable
from ..card.sync import Rendered
from ..card.view import Languages
from ..core.errors import Problem, RegistryError
from ..core.evaluation import short_sha
from ..core.names import CARD_NAME, ROWS_NAME, SPLIT_PARENT, SPLITS
from .models import DatasetIndex, DataVersion, ModelSource, TrainedWeight

TEMPLATE = "dataset_card.md.j2"
METHOD_LABELS = {"state": "State", "miss": "MiSS", "full": "Full"}
KEY_ORDER = ["language", "license", "size_categories", "task_categories", "pretty_name", "tags", "configs"]
OWNED = (
    "size_categories",
    "configs",
)  # computed from the versions: an author's own values give way (card.metadata.with_author)
# The Hub's size categories, by row count (its dataset-card metadata).
SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
)


def size_category(rows: int) -> str:
    return next((label for bound, label in SIZE_CATEGORIES if rows < bound), "n>10M")


@dataclass(frozen=True)
class WeightView:
    weight: TrainedWeight
    source: ModelSource

    @property
    def label(self) -> str:
        """``MiSS r16-lr2e-5-e2``, ``State v141b-s1224``: the method and the run or file name."""
        parts = self.weight.path.split("/")
        name = parts[3] if self.weight.method != "state" and len(parts) >= 5 else parts[-1].rsplit(".", 1)[0]
        return f"{METHOD_LABELS[self.weight.method]} {name}"

    @property
    def where(self) -> str:
        return f"{self.source.repo_id}/{self.weight.path}" if self.source.repo_id else self.weight.path


@dataclass(frozen=True)
class VersionView:
    version: DataVersion
    weights: list[WeightView] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return self.version.train_rows + self.version.validation_rows

    @property
    def data_sha(self) -> str:
        return short_sha(self.version.trained_file.sha256)

    @property
    def bases(self) -> list[str]:
        return sorted({w.weight.base for w in self.weights})

    @property
    def headline(self) -> list[WeightView]:
        """The versions table's weights: the recommended ones (seed 002), all when none is."""
        return [w for w in self.weights if w.weight.recommended] or self.weights

    def split_path(self, split: str) -> str:
        return f"{self.version.version}/{SPLIT_PARENT}/{split}/{ROWS_NAME}"


@dataclass(frozen=True)
class DatasetCardView(Languages):
    index: DatasetIndex = field(default_factory=DatasetIndex)
    versions: list[VersionView] = field(default_factory=list)
    handwritten: str = ""

    @property
    def sources(self) -> list[ModelSource]:
        return self.index.models

    @property
    def bases(self) -> list[str]:
        return sorted({base for v in self.versions for base in v.bases})

    @property
    def total_rows(self) -> int:
        return sum(v.rows for v in self.versions)

    def issues(self, version: DataVersion) -> list[str]:
        """The version's known issues: the flagged rows first (counted by `dataset add` and
        `validate`, never typed in), then the stated ones."""
        counted = []
        if version.flag_key is not None and version.flagged_rows:
            key, n = f"meta.{version.flag_key}", version.flagged_rows  # an identifier (META_KEY)
            counted.append(
                self.t(
                    f"{n} 行的 {key} 为 true（注册表逐行统计）。",
                    f"{n} row(s) have {key} true (counted row by row by the registry).",
                    " / ",
                )
            )
        return counted + self.items(version.known_issues)

    def thinking(self, version: DataVersion) -> str:
        profile = f"（{version.profile}）" if version.profile else ""
        words = {"off": ("不带思考", "without thinking"), "full": ("带思考", "with thinking")}[version.thinking]
        return self.t(words[0] + profile, words[1] + (f" ({version.profile})" if version.profile else ""), " / ")


def build_view(index: DatasetIndex, existing: str | None) -> DatasetCardView:
    """Versions newest first; each with the weights trained on it, recommended first, then by path."""
    versions = []
    for version in sorted(index.versions, key=lambda v: (v.date, v.version), reverse=True):
        weights = [
            WeightView(w, s) for s in index.models for w in s.weights if w.data_sha256 == version.trained_file.sha256
        ]
        weights.sort(key=lambda w: (not w.weight.recommended, w.weight.base, w.weight.path))
        versions.append(VersionView(version, weights))
    languages = tuple(index.dataset.languages)
    return DatasetCardView(
        order=languages, index=index, versions=versions, handwritten=handwritten.extract(existing, languages)
    )


def card_data(view: DatasetCardView) -> DatasetCardData:
    info = view.index.dataset
    configs = [
        {
            "config_name": v.version.version,
            **({"default": True} if i == 0 else {}),
            "data_files": [{"split": split, "path": v.split_path(split)} for split in SPLITS],
        }
        for i, v in enumerate(view.versions)
    ]
    return DatasetCardData(
        language=list(info.data_languages) or None,
        license=info.license,
        size_categories=[size_category(view.total_rows)] if view.versions else None,
        task_categories=list(info.task_categories) or None,
        pretty_name=info.title,
        tags=list(info.tags) or None,
        configs=configs or None,
    )


def render_dataset_card(index: DatasetIndex, existing: str | None) -> str:
    """README.md for a dataset index, keeping the hand-written section of ``existing``."""
    require_renderable(index)
    view = build_view(index, existing)
    body = render_body(TEMPLATE, {"view": view, "index": index})
    data = card_data(view)
    with_author(data, index.dataset.front_matter, OWNED)
    return f"---\n{data.to_yaml(original_order=[*KEY_ORDER, *index.dataset.front_matter])}\n---\n\n{body}"


def card_problems(index: DatasetIndex, current: str | None) -> Iterator[Problem]:
    """README.md exists and equals what ``registry card`` renders from index.json."""
    try:
        yield from rendered(index, current).problems()
    except RegistryError as err:
        yield err.problem.about(CARD_NAME)


def rendered(index: DatasetIndex, current: str | None) -> Rendered:
    """README.md as it is and as index.json renders it (what ``card --check`` compares)."""
    return Rendered(CARD_NAME, current, render_dataset_card(index, current))
