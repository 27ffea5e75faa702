"""A hand-written index.json (seed 001's kind), read for what maps onto a registry's index.

Pure: a parsed JSON document in, the facts it states out, each with where it stood (``$.entries[2].sha256``).
What maps: the title and licence, each base's name, file name, source, sha256 and vocabulary,
each entry's path, method, base, data version and sha256, dataset repo, file sha256 and size,
recommended flag, content_version, notes and scores.  Everything else, and every value of the
wrong type, is listed in :attr:`HandIndex.unmapped`, so ``registry adopt`` can report it; nothing
is dropped silently.  The facts are claims: ``adopt`` compares them with the files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..core.errors import RegistryError
from ..core.evaluation import split_value
from ..core.models import Score
from ..core.names import INDEX_NAME

# The keys people use, by the fact they state (aliases seen in hand-made indexes first).
TOP = {"title": "title", "license": "license", "licence": "license", "repo_id": "repo_id", "repo": "repo_id"}
BASE = {
    "name": "name",
    "dir": "name",
    "directory": "name",
    "filename": "filename",
    "file": "filename",
    "source": "source",
    "repo": "source",
    "sha256": "sha256",
    "vocab": "vocab",
}
ENTRY = {
    "path": "path", "file": "path", "method": "method", "base_sha256": "base_sha256", "base": "base",
    "data_version": "data_version", "data_sha256": "data_sha256", "dataset_repo": "dataset_repo", "sha256": "sha256",
    "size": "size", "recommended": "recommended", "content_version": "content_version", "notes": "notes",
    "adapter_id": "adapter_id", "profile": "profile", "sampling": "sampling",
}  # fmt: skip
REFERENCE = {
    "name": "name",
    "method": "method",
    "base_sha256": "base_sha256",
    "base": "base",
    "location": "location",
    "uploaded": "uploaded",
    "notes": "notes",
}
DATA = {"version": "data_version", "sha256": "data_sha256", "dataset_repo": "dataset_repo", "repo": "dataset_repo"}
SCORE = {
    "benchmark": "benchmark",
    "name": "benchmark",
    "value": "value",
    "score": "value",
    "unit": "unit",
    "date": "date",
    "backend": "backend",
    "runs": "runs",
    "count": "count",
    "notes": "notes",
}
ENTRY_LISTS = ("entries", "weights", "files")
TYPES: dict[str, type | tuple[type, ...]] = {"size": int, "recommended": bool, "uploaded": bool}


@dataclass
class HandScore:
    """A result as written: a Score where it maps, else the fields it has (for a `registry score` line)."""

    where: str
    fields: dict[str, Any]
    score: Score | None


@dataclass
class HandEntry:
    where: str
    facts: dict[str, Any]
    scores: list[HandScore] = field(default_factory=list)

    @property
    def path(self) -> str:
        return str(self.facts["path"])


@dataclass
class HandBase:
    where: str
    facts: dict[str, Any]
    scores: list[HandScore] = field(default_factory=list)


@dataclass
class HandReference:
    """Weights the author compared against but did not upload (an item with a name and no file)."""

    where: str
    facts: dict[str, Any]
    scores: list[HandScore] = field(default_factory=list)


@dataclass
class HandIndex:
    facts: dict[str, Any] = field(default_factory=dict)
    bases: list[HandBase] = field(default_factory=list)
    entries: list[HandEntry] = field(default_factory=list)
    references: list[HandReference] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)  # "$.where: what it held"
    kept: dict[str, Any] = field(default_factory=dict)  # the unmapped facts themselves, by JSON path, as written

    def leave(self, where: str, value: Any, why: str = "") -> None:
        """A fact no field holds: listed in the report and kept, as written, for index.json's kept_facts."""
        self.unmapped.append(f"{where}: {_shown(value)}{f' ({why})' if why else ''}")
        self.kept[where] = value

    def entry(self, path: str) -> HandEntry | None:
        return next((e for e in self.entries if e.path == path), None)

    def base(self, name: str, filename: str) -> HandBase | None:
        return next(
            (b for b in self.bases if b.facts.get("name") == name or b.facts.get("filename") in (filename, name)), None
        )


def _shown(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _fits(key: str, value: Any) -> bool:
    expected = TYPES.get(key, str)
    return isinstance(value, expected) and not (expected is int and isinstance(value, bool))


def _take(obj: dict, keys: dict[str, str], where: str, out: HandIndex, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The mapped facts of ``obj``; the rest goes to ``out.unmapped``."""
    facts: dict[str, Any] = {}
    for key, value in obj.items():
        fact = keys.get(key)
        if key in skip:
            continue
        if fact is None or fact in facts:
            out.leave(f"{where}.{key}", value)
        elif not _fits(fact, value):
            out.leave(f"{where}.{key}", value, f"not a {getattr(TYPES.get(fact, str), '__name__', 'value')}")
        else:
            facts[fact] = value
    return facts


def _score(item: Any, where: str, out: HandIndex) -> HandScore:
    if not isinstance(item, dict):
        out.leave(where, item)
        return HandScore(where, {}, None)
    fields = {SCORE[k]: v for k, v in item.items() if k in SCORE}
    for key in sorted(set(item) - set(SCORE)):
        out.leave(f"{where}.{key}", item[key])
    if isinstance(fields.get("value"), str) and (parsed := split_value(fields["value"])):  # "41.0/60", "52.2%"
        fields["value"] = parsed[0]
        if parsed[1] is not None:
            fields.setdefault("unit", parsed[1])
    missing = [key for key in ("benchmark", "value", "date", "backend") if key not in fields]
    try:
        score = Score.model_validate(fields) if not missing else None
    except ValidationError as exc:
        missing, score = [f"{'.'.join(map(str, exc.errors()[0]['loc']))} ({exc.errors()[0]['msg']})"], None
    if score is None:
        for key in item:
            out.kept.pop(f"{where}.{key}", None)  # kept whole, below
        out.leave(
            where, item, f"a result needs benchmark, value, date and backend; this one lacks {', '.join(missing)}"
        )
    return HandScore(where, fields, score)


def _scores(item: dict, where: str, out: HandIndex) -> list[HandScore]:
    scores = item.get("scores", [])
    if isinstance(scores, list):
        return [_score(s, f"{where}.scores[{i}]", out) for i, s in enumerate(scores)]
    out.leave(f"{where}.scores", scores)
    return []


def _entry(item: Any, where: str, out: HandIndex) -> None:
    if isinstance(item, dict) and item.get("path", item.get("file")) is None and isinstance(item.get("name"), str):
        out.references.append(
            HandReference(
                where, _take(item, REFERENCE, where, out, skip=("scores", "path", "file")), _scores(item, where, out)
            )
        )
        return
    if not isinstance(item, dict) or not isinstance(item.get("path", item.get("file")), str):
        out.leave(where, item, "no path")
        return
    facts = _take(item, ENTRY, where, out, skip=("data", "scores"))
    data = item.get("data")
    if isinstance(data, dict):
        facts.update(_take(data, DATA, f"{where}.data", out))
    elif data is not None:
        out.leave(f"{where}.data", data)
    out.entries.append(HandEntry(where, facts, _scores(item, where, out)))


def read_hand_index(data: Any) -> HandIndex:
    """Every fact of a hand-written index.json that maps, and every field that does not."""
    if not isinstance(data, dict):
        raise RegistryError(
            "adopt.index-not-object",
            INDEX_NAME,
            f"holds a JSON {type(data).__name__}, not an object",
            "fix index.json, or move it out of the folder to adopt without it",
        )
    out = HandIndex()
    lists = [k for k in ENTRY_LISTS if k in data]
    out.facts = _take(data, TOP, "$", out, skip=("bases", *lists))
    bases = data.get("bases", [])
    for i, item in enumerate(bases if isinstance(bases, list) else []):
        if isinstance(item, dict):
            out.bases.append(
                HandBase(
                    f"$.bases[{i}]",
                    _take(item, BASE, f"$.bases[{i}]", out, skip=("scores",)),
                    _scores(item, f"$.bases[{i}]", out),
                )
            )
        else:
            out.leave(f"$.bases[{i}]", item)
    if not isinstance(bases, list):
        out.leave("$.bases", bases)
    for key in lists:
        items = data[key]
        if not isinstance(items, list):
            out.leave(f"$.{key}", items)
            continue
        for i, item in enumerate(items):
            _entry(item, f"$.{key}[{i}]", out)
    return out
