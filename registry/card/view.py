"""What the card shows, computed from the index before any template sees it.

Templates only lay text out; every decision (ordering, grouping scores into comparable tables,
which file a usage example names, how a value is printed) is made here, in plain Python, so it
is tested once and the output is deterministic: bases by name, entries by path, score tables by
(date, backend).  Entries whose base is missing from ``bases`` still get a section (``validate``
reports them) so a broken index never makes the card lose a file.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..models import METHODS, Base, Entry, Index, Score

METHOD_LABELS = {"state": "State", "miss": "MiSS", "full": "Full"}
# The rwkv package's PIPELINE takes the vocab by name; shown when a base records none, as it
# is the vocab of the RWKV-7 G1 bases (seeds 000 and 001).
DEFAULT_VOCAB = "rwkv_vocab_v20230424"


def short_sha(sha256: str) -> str:
    """The 8-hex prefix seed 001 uses in prose and tables; the full hash is in index.json."""
    return sha256[:8] + "…"


def format_value(value: float, unit: str) -> str:
    """``46.9%``, ``296.5 题``: the shortest exact form of the number, ``52`` rather than ``52.0``."""
    number = repr(value).removesuffix(".0")
    return f"{number}{unit}" if unit == "%" else f"{number} {unit}".rstrip()


@dataclass(frozen=True)
class EntryView:
    entry: Entry
    rel_path: str  # relative to the base directory when the entry lives under it

    @property
    def method_label(self) -> str:
        return METHOD_LABELS[self.entry.method]

    @property
    def data_sha(self) -> str:
        return short_sha(self.entry.data.sha256)

    @property
    def model_path(self) -> str:
        """What the rwkv package's ``RWKV(model=...)`` wants: the path without ``.pth``."""
        return self.entry.path.removesuffix(".pth")

    @property
    def adapter_id(self) -> str:
        """A suggested id for ``rwkv-cli adapter register``: data version and run, ``v21-r16-lr2e-5-e2``.

        The run is the directory the adapter sits in (``miss/<version>/<run>/adapter.pth``); a file
        outside that layout falls back to its own name.
        """
        parts = self.entry.path.split("/")
        run = parts[-2] if len(parts) >= 5 else parts[-1].rsplit(".", 1)[0]
        return f"{self.entry.data.version.replace('.', '')}-{run}"


@dataclass(frozen=True)
class ScoreRow:
    entry: EntryView
    score: Score

    @property
    def value(self) -> str:
        return format_value(self.score.value, self.score.unit)


@dataclass(frozen=True)
class ScoreGroup:
    """Scores measured on one day with one backend: the only ones that compare directly."""

    date: str
    backend: str
    rows: list[ScoreRow]


@dataclass(frozen=True)
class BaseView:
    name: str
    base: Base | None  # None when entries name a base sha256 that ``bases`` lacks
    sha256: str
    entries: list[EntryView]
    score_groups: list[ScoreGroup]

    @property
    def vocab_name(self) -> str:
        vocab = self.base.vocab if self.base and self.base.vocab else DEFAULT_VOCAB
        return vocab.removesuffix(".txt")

    def of_method(self, method: str) -> list[EntryView]:
        return [e for e in self.entries if e.entry.method == method]

    def examples(self, method: str) -> list[EntryView]:
        """The files a usage example names: the recommended ones, else the first by path.

        Only .pth files count: rwkv-cli and the rwkv package load those, and a safetensors twin
        made by ``registry convert`` always sits next to its .pth.
        """
        candidates = [e for e in self.of_method(method) if e.entry.format == "pth"]
        return [e for e in candidates if e.entry.recommended] or candidates[:1]


@dataclass(frozen=True)
class CardView:
    """Everything the templates may use (StrictUndefined makes any other name an error)."""

    index: Index
    bases: list[BaseView]
    handwritten: str

    @property
    def known_bases(self) -> list[Base]:
        return [b.base for b in self.bases if b.base is not None]

    @property
    def methods(self) -> list[str]:
        """Methods with at least one entry, in the fixed order state, miss, full."""
        present = {e.entry.method for b in self.bases for e in b.entries}
        return [m for m in METHODS if m in present]

    def count(self, method: str) -> int:
        return sum(len(b.of_method(method)) for b in self.bases)

    @property
    def dataset_repos(self) -> list[str]:
        return sorted({e.data.dataset_repo for e in self.index.entries if e.data.dataset_repo})

    def first_example(self, method: str) -> tuple[BaseView, EntryView] | None:
        """The (base, file) of the one example a long snippet (the full-checkpoint code) shows;
        None when the method has no .pth file to show."""
        return next(((b, e) for b in self.bases for e in b.examples(method)), None)


def _relative(path: str, base_name: str | None) -> str:
    return path.removeprefix(f"{base_name}/") if base_name else path


def _score_groups(entries: list[EntryView]) -> list[ScoreGroup]:
    groups: dict[tuple[str, str], list[ScoreRow]] = defaultdict(list)
    for view in entries:  # already sorted by path, so rows come out by path
        for score in sorted(view.entry.scores, key=lambda s: s.benchmark):
            groups[(score.date.isoformat(), score.backend)].append(ScoreRow(view, score))
    return [ScoreGroup(day, backend, groups[(day, backend)]) for day, backend in sorted(groups)]


def _base_view(name: str, base: Base | None, sha256: str, entries: list[Entry]) -> BaseView:
    views = [EntryView(e, _relative(e.path, base.name if base else None)) for e in sorted(entries, key=lambda e: e.path)]
    return BaseView(name=name, base=base, sha256=sha256, entries=views, score_groups=_score_groups(views))


def base_views(index: Index) -> list[BaseView]:
    """One view per base (sorted by name), then one per unknown base sha256 (sorted)."""
    by_sha: dict[str, list[Entry]] = defaultdict(list)
    for entry in index.entries:
        by_sha[entry.base_sha256].append(entry)
    views = []
    seen: set[str] = set()
    for base in sorted(index.bases, key=lambda b: (b.name, b.sha256)):
        entries = [] if base.sha256 in seen else by_sha.get(base.sha256, [])
        seen.add(base.sha256)
        views.append(_base_view(base.name, base, base.sha256, entries))
    for sha in sorted(set(by_sha) - seen):
        views.append(_base_view(short_sha(sha), None, sha, by_sha[sha]))
    return views


def build_view(index: Index, handwritten: str) -> CardView:
    return CardView(index=index, bases=base_views(index), handwritten=handwritten)
