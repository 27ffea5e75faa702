"""An author's evaluation.json as people write it: the one reader of the file beside the weights.

Seed 004 ships ``evaluation.json`` beside its checkpoint "for exact definitions and counts": each
metric's value for the checkpoint and for the checkpoint it was initialized from, the metric's
definition, the number of items it was measured on.  The file is the author's document: the
registry never rewrites it.  An entry declares it (``Entry.evaluation``); the card shows it,
attributed to its file; ``registry score`` records later results in index.json beside it
(docs/formats.md, "An author's evaluation.json").  Accepted shapes, which may be mixed:

- ``metrics`` (or ``results``, ``scores``): an object ``{name: value | {…}}`` or a list of objects
  naming themselves (``name`` / ``metric``);
- ``benchmarks`` (or ``tasks``, ``evaluations``): an object ``{benchmark: {…, "metrics": …}}`` or a
  list of objects naming themselves (``name`` / ``benchmark``), each with its count of items
  (``questions``, ``count``, ``n``, ``items``, ``examples``, ``samples``, ``total``) and any other facts;
- a metric: ``value`` (or ``score``, ``result``, ``this``, ``checkpoint``, ``current``), its value
  at the initialization ``initialization`` (or ``init``, ``initial``, ``baseline``, ``before``),
  ``definition`` (or ``description``), a count as above, ``unit``; a value is a number or a result
  as people write one (``57.81``, ``"57.81%"``, ``"41/60"``);
- at the top: the model evaluated (``model``, ``checkpoint``, ``repo_id``), the initialization
  (``initialization``, ``initialized_from``, ``init``: a repo id, or an object naming it by
  ``model`` / ``repo`` / ``repo_id`` / ``name`` / ``label``, whose ``metrics`` may give its values by
  metric name), ``definitions`` (``{metric: text}``).

Every other field, at any level, is kept as written (``extra``: shown on the card), never an
error.  Only what cannot be read as a result is refused, once per file, naming the file and the
JSON path: not an object, no metric at all, a value that is not a number, a definition that is not
text, a count that is not a non-negative number.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import Problem, RegistryError
from .evaluation import split_value
from .models import Checkpoint, Entry, Index
from .names import DOCS_DIR, EVALUATION_NAME, INDEX_NAME
from .schemas import MAX_JSON_BYTES, read_json

METRICS_KEYS = ("metrics", "results", "scores")
BENCHMARKS_KEYS = ("benchmarks", "tasks", "evaluations")
VALUE_KEYS = ("value", "score", "result", "this", "checkpoint", "current")
INIT_VALUE_KEYS = ("initialization", "init", "initial", "baseline", "before")
DEFINITION_KEYS = ("definition", "description")
COUNT_KEYS = ("count", "questions", "n", "items", "examples", "samples", "total")
MODEL_KEYS = ("model", "checkpoint", "repo_id")
INITIALIZATION_KEYS = ("initialization", "initialized_from", "init")
INIT_NAME_KEYS = ("model", "repo", "repo_id", "name", "label")
FORMAT_HELP = 'docs/formats.md, "An author\'s evaluation.json"'


@dataclass(frozen=True)
class WrittenValue:
    """A result as its author wrote it, and the number it is."""

    number: float
    unit: str  # "%", "/60", or "" for a bare number
    written: str  # the text shown: the string as written, or the JSON number with the ``unit`` field

    @property
    def decimals(self) -> int:
        digits = self.written.rstrip("%").split("/")[0].strip()
        return len(digits.split(".")[1]) if "." in digits and "e" not in digits.lower() else 0


@dataclass(frozen=True)
class AuthorMetric:
    name: str
    benchmark: str | None  # the benchmark it belongs to, where the file groups metrics by benchmark
    value: WrittenValue
    initialization: WrittenValue | None = None  # the same metric for the checkpoint it was initialized from
    definition: str | None = None
    count: float | None = None  # items it was measured on (the benchmark's where the metric gives none)
    extra: dict[str, Any] = field(default_factory=dict)  # its other fields, as written

    @property
    def full_name(self) -> str:
        return f"{self.benchmark} {self.name}" if self.benchmark else self.name

    @property
    def change(self) -> str | None:
        """This checkpoint's value minus the initialization's, in the precision written (``+1.04 pp``
        for percentages); None where there is no initialization value or the units differ."""
        init = self.initialization
        if init is None or init.unit != self.value.unit:
            return None
        digits = max(self.value.decimals, init.decimals)
        delta = round(self.value.number - init.number, digits) + 0.0  # no "-0.00"
        return f"{delta:+.{digits}f}" + (" pp" if init.unit == "%" else "")


@dataclass(frozen=True)
class AuthorBenchmark:
    name: str
    count: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # its other facts (error events, subsets, …), as written


@dataclass(frozen=True)
class AuthorEvaluation:
    """What an author's evaluation.json says, read without changing a byte of it."""

    path: str
    metrics: tuple[AuthorMetric, ...]
    benchmarks: tuple[AuthorBenchmark, ...] = ()
    model: str | None = None
    initialization: str | None = None  # the checkpoint it was initialized from, as the file names it
    definitions: dict[str, str] = field(default_factory=dict)  # the top-level definitions
    extra: dict[str, Any] = field(default_factory=dict)  # every other field, by its JSON path, as written

    @property
    def has_initialization(self) -> bool:
        return any(m.initialization is not None for m in self.metrics)

    @property
    def all_definitions(self) -> list[tuple[str, str]]:
        """Each metric's definition (by its full name), then the top-level ones no metric repeats."""
        shown = [(m.full_name, m.definition) for m in self.metrics if m.definition]
        said = {text for _, text in shown}
        return shown + [(name, text) for name, text in self.definitions.items() if text not in said]

    def count_of(self, metric: AuthorMetric) -> float | None:
        if metric.count is not None:
            return metric.count
        return next((b.count for b in self.benchmarks if b.name == metric.benchmark), None)

    @property
    def shown_extra(self) -> list[tuple[str, str]]:
        """Every other field as ``(path, value)``, the benchmarks' facts included, for the card."""
        kept = [(f"{b.name}: {key}", value) for b in self.benchmarks for key, value in b.extra.items()]
        kept += [(f"{m.full_name}: {key}", value) for m in self.metrics for key, value in m.extra.items()]
        kept += list(self.extra.items())
        return [(k, v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)) for k, v in kept]


class _Reader:
    def __init__(self, rel: str):
        self.rel = rel
        self.problems: list[Problem] = []

    def refuse(self, code: str, where: str, what: str, fix: str) -> None:
        self.problems.append(Problem(code, self.rel, f"{where}: {what}", f"{fix} in {self.rel} ({FORMAT_HELP})"))

    def value(self, raw: Any, where: str, unit: Any = None) -> WrittenValue | None:
        unit = unit if isinstance(unit, str) else ""
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return WrittenValue(float(raw), unit, json.dumps(raw) + unit)
        if isinstance(raw, str) and (parsed := split_value(raw)) is not None and math.isfinite(parsed[0]):
            return WrittenValue(parsed[0], parsed[1] or unit, raw.strip() + ("" if parsed[1] else unit))
        shown = json.dumps(raw, ensure_ascii=False)
        self.refuse(
            "evaluation.bad-value",
            where,
            f"{shown[:60]} is not a result",
            f"write {where} as a number, a percentage (57.81%) or a score out of a total (41/60)",
        )
        return None

    def text(self, raw: Any, where: str) -> str | None:
        if raw is None or isinstance(raw, str):
            return raw
        self.refuse("evaluation.invalid", where, f"holds a JSON {_kind(raw)}, not text", f"write {where} as a string")
        return None

    def count(self, raw: Any, where: str, extra: dict[str, Any]) -> float | None:
        if isinstance(raw, dict | list):  # a breakdown (items per subset): kept as written
            extra[where.rsplit(".", 1)[-1]] = raw
            return None
        if isinstance(raw, int | float) and not isinstance(raw, bool) and raw >= 0:
            return raw  # an int stays one: "128 questions"
        self.refuse(
            "evaluation.bad-count",
            where,
            f"{json.dumps(raw, ensure_ascii=False)[:60]} is not a count",
            f"write {where} as the number of items measured (0 or more)",
        )
        return None


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _first(data: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, Any] | None:
    return next(((key, data[key]) for key in keys if key in data), None)


def _named(r: _Reader, items: Any, where: str, names: tuple[str, ...]) -> list[tuple[str, str, Any]]:
    """``(name, json path, item)`` of an object's members, or of a list of objects naming themselves."""
    if isinstance(items, dict):
        return [(str(name), f"{where}.{name}", item) for name, item in items.items()]
    if isinstance(items, list):
        found = []
        for number, item in enumerate(items):
            name = _first(item, names) if isinstance(item, dict) else None
            if name is None or not isinstance(name[1], str) or not name[1].strip():
                r.refuse(
                    "evaluation.invalid",
                    f"{where}[{number}]",
                    "a list item that names itself by no " + " / ".join(names),
                    f'give it a "{names[0]}"',
                )
                continue
            rest = {key: value for key, value in item.items() if key != name[0]}
            found.append((name[1], f"{where}[{number}]", rest))
        return found
    r.refuse("evaluation.invalid", where, f"holds a JSON {_kind(items)}", "write it as an object or a list of objects")
    return []


def _metric(
    r: _Reader, name: str, where: str, raw: Any, benchmark: str | None, init_values: dict[str, Any]
) -> AuthorMetric | None:
    given = init_values.get(f"{benchmark} {name}" if benchmark else name, init_values.get(name))
    if not isinstance(raw, dict):
        value = r.value(raw, where)
        init = None if given is None else r.value(given, f"initialization.metrics.{name}")
        return None if value is None else AuthorMetric(name, benchmark, value, init)
    unit = raw.get("unit")
    extra: dict[str, Any] = {}
    found = _first(raw, VALUE_KEYS)
    if found is None:
        r.refuse(
            "evaluation.bad-value",
            where,
            "a metric with no value",
            f'give it a "value" (or {", ".join(VALUE_KEYS[1:])})',
        )
        return None
    value = r.value(found[1], f"{where}.{found[0]}", unit)
    init_found = _first(raw, INIT_VALUE_KEYS)
    init_raw, init_where = (init_found[1], f"{where}.{init_found[0]}") if init_found else (given, "initialization")
    init = None if init_raw is None else r.value(init_raw, init_where, unit)
    definition_found = _first(raw, DEFINITION_KEYS)
    definition = r.text(definition_found[1], f"{where}.{definition_found[0]}") if definition_found else None
    count_found = _first(raw, COUNT_KEYS)
    count = r.count(count_found[1], f"{where}.{count_found[0]}", extra) if count_found else None
    used = {k for k in (found[0], init_found and init_found[0], definition_found and definition_found[0]) if k}
    used |= {count_found[0]} if count_found else set()
    used |= {"unit"} if isinstance(unit, str) else set()
    extra.update({key: item for key, item in raw.items() if key not in used})
    if value is None:
        return None
    return AuthorMetric(name, benchmark, value, init, definition, count, extra)


def _metrics(
    r: _Reader, container: dict[str, Any], where: str, benchmark: str | None, init_values: dict[str, Any]
) -> tuple[list[AuthorMetric], set[str]]:
    """The metrics a container (the file, a benchmark) lists, and the keys it read them from."""
    found = _first(container, METRICS_KEYS)
    if found is None:
        return [], set()
    prefix = f"{where}.{found[0]}" if where else found[0]
    metrics = [
        metric
        for name, at, item in _named(r, found[1], prefix, ("name", "metric"))
        if (metric := _metric(r, name, at, item, benchmark, init_values))
    ]
    return metrics, {found[0]}


def _initialization(r: _Reader, data: dict[str, Any], extra: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The initialization's name, and its values by metric name where the file gives them there."""
    found = _first(data, INITIALIZATION_KEYS)
    if found is None:
        return None, {}
    key, raw = found
    if isinstance(raw, str):
        return raw, {}
    if not isinstance(raw, dict):
        extra[key] = raw
        return None, {}
    name = _first(raw, INIT_NAME_KEYS)
    values = _first(raw, METRICS_KEYS)
    for other, item in raw.items():
        if other not in {name and name[0], values and values[0]}:
            extra[f"{key}.{other}"] = item
    by_name = values[1] if values and isinstance(values[1], dict) else {}
    if values and not isinstance(values[1], dict):
        extra[f"{key}.{values[0]}"] = values[1]
    return (str(name[1]) if name else None), by_name


def parse_author_evaluation(data: Any, rel: str) -> AuthorEvaluation:
    """The results of a parsed evaluation.json (``rel`` names it in errors); see the module docstring."""
    r = _Reader(rel)
    if not isinstance(data, dict):
        raise RegistryError(
            "evaluation.invalid",
            rel,
            f"holds a JSON {_kind(data)}, not an object",
            f"write {rel} as a JSON object with its metrics ({FORMAT_HELP})",
        )
    extra: dict[str, Any] = {}
    initialization, init_values = _initialization(r, data, extra)
    init_found = _first(data, INITIALIZATION_KEYS)
    metrics, used = _metrics(r, data, "", None, init_values)
    used |= {init_found[0]} if init_found else set()
    benchmarks = []
    group = _first(data, BENCHMARKS_KEYS)
    if group is not None:
        used.add(group[0])
        for name, where, raw in _named(r, group[1], group[0], ("name", "benchmark")):
            if not isinstance(raw, dict):
                r.refuse(
                    "evaluation.invalid", where, f"holds a JSON {_kind(raw)}", 'write it as an object with "metrics"'
                )
                continue
            own, keys = _metrics(r, raw, where, name, init_values)
            benchmark_extra: dict[str, Any] = {}
            count_found = _first(raw, COUNT_KEYS)
            count = r.count(count_found[1], f"{where}.{count_found[0]}", benchmark_extra) if count_found else None
            skip = keys | ({count_found[0]} if count_found else set())
            benchmark_extra.update({key: item for key, item in raw.items() if key not in skip})
            benchmarks.append(AuthorBenchmark(name, count, benchmark_extra))
            metrics += own
    model_found = _first(data, MODEL_KEYS)  # a name; an object (the model's facts) is kept as written
    model = model_found[1] if model_found and isinstance(model_found[1], str) else None
    definitions: dict[str, str] = {}
    if isinstance(data.get("definitions"), dict):  # {metric: text}; any other shape is kept as written
        for name, text in data["definitions"].items():
            if (shown := r.text(text, f"definitions.{name}")) is not None:
                definitions[str(name)] = shown
        used.add("definitions")
    metrics = [  # a metric the file defines at the top, by its full name or its own
        m if m.definition else replace(m, definition=definitions.get(m.full_name, definitions.get(m.name)))
        for m in metrics
    ]
    used |= {model_found[0]} if model is not None and model_found else set()
    extra.update({key: item for key, item in data.items() if key not in used})
    if not metrics and not r.problems:
        r.problems.append(
            Problem(
                "evaluation.no-metrics",
                rel,
                "holds no result: no metrics (or results, scores), nor benchmarks with metrics",
                f'write each result under "metrics" ({{"name": {{"value": …, "initialization": …, '
                f'"definition": …, "count": …}}}}) in {rel} ({FORMAT_HELP})',
            )
        )
    if r.problems:
        raise RegistryError.of(r.problems)
    return AuthorEvaluation(rel, tuple(metrics), tuple(benchmarks), model, initialization, definitions, extra)


def read_author_evaluation(path: Path, rel: str) -> AuthorEvaluation:
    """Read and parse the author's evaluation.json at ``path``; every refusal names ``rel``."""
    return parse_author_evaluation(read_json(path, rel, MAX_JSON_BYTES["evaluation"]), rel)


# ----------------------------------------------------------------------------------------------
# Where an author's evaluation.json lies, and which entry declares it


def evaluation_places(entry_path: str) -> tuple[str, ...]:
    """Where an entry's author evaluation may lie: beside it (its folder, a run folder included) or
    in its data-version folder; a root entry's at the root."""
    if "/" not in entry_path:
        return (EVALUATION_NAME,)
    parts = entry_path.split("/")
    beside, version_dir = "/".join(parts[:-1]), "/".join(parts[:3])
    return tuple(dict.fromkeys((f"{beside}/{EVALUATION_NAME}", f"{version_dir}/{EVALUATION_NAME}")))


def _holders(index: Index) -> Iterator[tuple[str, str]]:
    """(the weight's path, the evaluation.json it declares) for every declaration in index.json."""
    for entry in index.entries:
        if entry.evaluation is not None:
            yield entry.path, entry.evaluation
    for checkpoint in index.checkpoints:  # a Transformers checkpoint (seed 004): by its weight index
        if checkpoint.evaluation is not None:
            yield checkpoint.path, checkpoint.evaluation


def declarations(index: Index) -> dict[str, list[str]]:
    """Each declared author's evaluation.json (by path) with the weights declaring it, sorted."""
    found: dict[str, list[str]] = {}
    for holder, rel in sorted(_holders(index)):
        found.setdefault(rel, []).append(holder)
    return dict(sorted(found.items()))


def root_is_authors(index: Index) -> bool:
    """Whether the root's evaluation.json is an author's (a root weight declares it), so that the
    registry renders none of its own there: its results stay in index.json and on the card."""
    return EVALUATION_NAME in declarations(index)


def author_evaluation_of(root: Path, weight: str) -> str | None:
    """The author's evaluation.json found beside the weight at ``weight`` (a registry path) in the
    folder at ``root``, the nearest place first, or None."""
    return next((rel for rel in evaluation_places(weight) if (root / rel).is_file()), None)


def declaration_problems(index: Index) -> Iterator[Problem]:
    """An entry's ``evaluation`` must be one of its :func:`evaluation_places`."""
    for holder, rel in _holders(index):
        if rel not in evaluation_places(holder):
            yield Problem(
                "index.bad-evaluation",
                INDEX_NAME,
                f"entry {holder} names {rel} as its author's evaluation, which is not beside it",
                f"name {' or '.join(evaluation_places(holder))}, or remove the entry's evaluation",
            )


def author_evaluation_problems(root: Path, index: Index, placed: set[str]) -> Iterator[Problem]:
    """Every evaluation.json the layout placed in a folder (``placed``) is declared by an entry, and
    every declared one is there and reads (what ``validate`` checks of them)."""
    declared = set(declarations(index))
    for rel in sorted(placed - declared):
        yield Problem(
            "layout.undeclared-evaluation",
            rel,
            "an evaluation.json that no entry in index.json declares as its author's evaluation",
            "list it with `registry sums`, then declare it: registry describe <the weight beside it> "
            "--author-evaluation; or move it into docs/",
        )
    for rel in sorted(declared):
        path = root / rel
        if path.is_symlink() or not path.is_file():
            yield Problem(
                "evaluation.author-missing",
                rel,
                "declared in index.json as an author's evaluation, but not in the folder",
                f"restore the author's file (git checkout -- {rel}), or drop it: registry describe <its "
                "weight> --no-author-evaluation",
            )
            continue
        try:
            read_author_evaluation(path, rel)
        except RegistryError as err:
            yield from err.problems


def declare_author_evaluation(root: Path, index: Index, entry: Entry | Checkpoint, declared: bool) -> None:
    """``registry describe PATH --author-evaluation``: ``entry`` declares the author's evaluation.json
    beside it (nearest place first; read and checked, never changed); ``--no-author-evaluation``
    drops the declaration and leaves the file where it is."""
    if not declared:
        entry.evaluation = None
        return
    found = author_evaluation_of(root, entry.path)
    if found == EVALUATION_NAME and not root_is_authors(index):
        found = None  # the root's evaluation.json is the registry's own, rendered from index.json
    if found is None:
        raise RegistryError(
            "evaluation.author-missing",
            entry.path,
            f"no author's evaluation.json beside it (looked for {' and '.join(evaluation_places(entry.path))})",
            f"put the author's evaluation.json at {evaluation_places(entry.path)[0]} first ({FORMAT_HELP})",
        )
    read_author_evaluation(root / found, found)
    entry.evaluation = found


def declare_found_evaluations(root: Path, entries: list[Entry]) -> list[Problem]:
    """For a hand-made folder at ``root`` being made a registry: each weight (a twin aside: its
    source stands for it) declares the author's evaluation.json beside it, which must read as people
    write one.  The problems, for the caller to refuse with before anything is written."""
    for entry in entries:
        if entry.derived_from is None:
            entry.evaluation = author_evaluation_of(root, entry.path)
    problems: list[Problem] = []
    for rel in sorted({e.evaluation for e in entries if e.evaluation}):
        try:
            read_author_evaluation(root / rel, rel)
        except RegistryError as err:
            problems.extend(err.problems)
    return problems


def stray_evaluations(files: Iterable[str], index: Index) -> list[Problem]:
    """An evaluation.json in a hand-made folder (``files``, ``docs/`` aside) that no weight of the
    ``index`` built from it declares: refused, the root's included (there the registry writes its own)."""
    declared = declarations(index)
    placed = sorted(f for f in files if f.rsplit("/", 1)[-1] == EVALUATION_NAME and f.split("/")[0] != DOCS_DIR)
    return [
        Problem(
            "adopt.stray-evaluation",
            rel,
            "an evaluation.json beside no weight"
            + (" (at the root, where the registry writes its own)" if rel == EVALUATION_NAME else ""),
            "move it beside the weights it evaluates (<base>/<method>/<data-version>/evaluation.json), or into docs/",
        )
        for rel in placed
        if rel not in declared
    ]
