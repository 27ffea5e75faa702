"""train.json as people write it: the one reader of the file beside the weights.

A person's train.json is their document: the registry never rewrites it and reads what it needs
from the shapes people write (docs/formats.md, "train.json"):

- the tool's own (schemas/train.schema.json): ``trainer{name, version, commit, package, requires}``,
  ``hyperparameters``, ``command``, ``data_sha256``, ``runs{<run>: {hyperparameters, command,
  started, finished}}``, ``notes``;
- seed 001's words ("训练器及版本、超参、等效命令行、数据 sha256"; "三组共用超参与各自学习率、等效命令行、起止时间"):
  ``trainer`` as a name with ``trainer_version``, ``base`` (a file name or a sha256),
  ``data{repo, version, file, sha256, rows, revision}``, ``shared_hyperparameters``,
  ``runs{<run>: {lr…, command, started, finished}}`` (every other key of a run is one of its
  hyperparameters), top-level ``started`` / ``finished``.

Every other field is kept in :attr:`TrainFacts.extra` (shown on the card), never an error.  The
data identity is the sha256 of the file the trainer read, or, where the author has none (seed 000:
"derived from <dataset repo> at revision <commit>"), the dataset repo with its 40-hex revision.  Only
a missing fact (no data identity) or a contradictory one (two values for one fact, a sha256 that is
not one) is refused, once per file, naming the field and the file.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import Problem, RegistryError
from .models import MAX_NOTES_CHARS, Base
from .schemas import MAX_JSON_BYTES, read_json

_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_RUN_KEYS = ("hyperparameters", "command", "started", "finished")


@dataclass(frozen=True)
class TrainerInfo:
    name: str | None = None
    version: str | None = None
    commit: str | None = None
    package: str | None = None
    requires: str | None = None


@dataclass(frozen=True)
class RunFacts:
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    command: str | None = None
    started: str | None = None
    finished: str | None = None


@dataclass(frozen=True)
class DataFacts:
    """What the train.json says of its training data."""

    sha256: str | None = None  # of the file the trainer read
    repo: str | None = None  # a dataset repo id
    revision: str | None = None  # the dataset repo's commit
    version: str | None = None
    file: str | None = None
    rows: int | None = None


@dataclass(frozen=True)
class BaseClaim:
    """The base a train.json names: the only written evidence that binds a State to its base."""

    field: str  # where it stood, e.g. "base" or "base.sha256"
    filename: str | None = None  # the file name, without folders
    sha256: str | None = None


@dataclass(frozen=True)
class TrainFacts:
    trainer: TrainerInfo | None
    hyperparameters: dict[str, Any]
    command: str | None
    data: DataFacts
    runs: dict[str, RunFacts]
    bases: tuple[BaseClaim, ...] = ()
    started: str | None = None
    finished: str | None = None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # every other field, by its JSON path, as written

    @property
    def data_sha256(self) -> str | None:
        return self.data.sha256

    @property
    def shown_extra(self) -> list[tuple[str, str]]:
        """The other fields as ``(path, value)`` for the card and reports."""
        return [
            (key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True))
            for key, value in self.extra.items()
        ]


class _Reader:
    def __init__(self, rel: str):
        self.rel = rel
        self.problems: list[Problem] = []
        self.extra: dict[str, Any] = {}

    def contradiction(self, where: str, first: Any, second: Any, other: str) -> None:
        self.problems.append(
            Problem(
                "train.contradicts",
                self.rel,
                f"{where} is {first!r} but {other} is {second!r}",
                f"make {where} and {other} say the same in {self.rel}",
            )
        )

    def one(self, facts: dict[str, Any], key: str, value: Any, where: str, sources: dict[str, str]) -> None:
        """Record a fact stated at ``where``; a second, different value for it is a contradiction."""
        if value is None:
            return
        if key in facts and facts[key] != value:
            self.contradiction(where, value, facts[key], sources[key])
            return
        facts.setdefault(key, value)
        sources.setdefault(key, where)

    def sha(self, value: Any, where: str) -> str | None:
        if value is None:
            return None
        if isinstance(value, str) and _SHA256.match(value):
            return value.lower()
        self.problems.append(
            Problem(
                "train.invalid",
                self.rel,
                f"{where} is {json.dumps(value, ensure_ascii=False)[:80]}, not a sha256 (64 hex digits)",
                f"write the output of `sha256sum` at {where} in {self.rel}",
            )
        )
        return None

    def text(self, value: Any, where: str) -> str | None:
        if value is None:
            return None
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return shlex.join(value)  # a command written as its argument list
        self.extra[where] = value
        return None

    def keep(self, where: str, value: Any) -> None:
        self.extra[where] = value


def _trainer(r: _Reader, data: dict[str, Any]) -> TrainerInfo | None:
    value, version = data.get("trainer"), r.text(data.get("trainer_version"), "trainer_version")
    facts: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if isinstance(value, str):
        facts["name"], sources["name"] = value, "trainer"
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in ("name", "version", "commit", "package", "requires"):
                r.one(facts, key, r.text(item, f"trainer.{key}"), f"trainer.{key}", sources)
            else:
                r.keep(f"trainer.{key}", item)
    elif value is not None:
        r.keep("trainer", value)
    r.one(facts, "version", version, "trainer_version", sources)
    return TrainerInfo(**facts) if facts else None


def _hyperparameters(r: _Reader, data: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in ("hyperparameters", "shared_hyperparameters"):
        value = data.get(key)
        if isinstance(value, dict):
            for name, item in value.items():
                r.one(merged, name, item, f"{key}.{name}", sources)
        elif value is not None:
            r.keep(key, value)
    return merged


def _data(r: _Reader, data: dict[str, Any]) -> DataFacts:
    facts: dict[str, Any] = {}
    sources: dict[str, str] = {}
    r.one(facts, "sha256", r.sha(data.get("data_sha256"), "data_sha256"), "data_sha256", sources)
    for key, fact in (("dataset_repo", "repo"), ("dataset_revision", "revision"), ("data_version", "version")):
        r.one(facts, fact, r.text(data.get(key), key), key, sources)
    value = data.get("data")
    aliases = {
        "sha256": "sha256",
        "repo": "repo",
        "dataset_repo": "repo",
        "dataset": "repo",
        "revision": "revision",
        "version": "version",
        "file": "file",
        "path": "file",
        "rows": "rows",
    }
    if isinstance(value, dict):
        for key, item in value.items():
            where, alias = f"data.{key}", aliases.get(key)
            if alias == "sha256":
                r.one(facts, alias, r.sha(item, where), where, sources)
            elif alias == "rows" and isinstance(item, int) and not isinstance(item, bool):
                r.one(facts, alias, item, where, sources)
            elif alias is not None and alias != "rows" and isinstance(item, str):
                r.one(facts, alias, item, where, sources)
            else:
                r.keep(where, item)
    elif isinstance(value, str) and _SHA256.match(value):
        r.one(facts, "sha256", value.lower(), "data", sources)
    elif value is not None:
        r.keep("data", value)
    return DataFacts(**facts)


def _bases(r: _Reader, data: dict[str, Any]) -> tuple[BaseClaim, ...]:
    claims: list[BaseClaim] = []
    value = data.get("base")
    if isinstance(value, str) and _SHA256.match(value):
        claims.append(BaseClaim("base", sha256=value.lower()))
    elif isinstance(value, str) and value.strip():
        claims.append(BaseClaim("base", filename=value.rstrip("/").rsplit("/", 1)[-1]))
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"base.{key}"
            if key == "sha256":
                sha = r.sha(item, where)
                if sha:
                    claims.append(BaseClaim(where, sha256=sha))
            elif key in ("file", "filename", "name", "path") and isinstance(item, str) and item.strip():
                claims.append(BaseClaim(where, filename=item.rstrip("/").rsplit("/", 1)[-1]))
            else:
                r.keep(where, item)
    elif value is not None:
        r.keep("base", value)
    sha = r.sha(data.get("base_sha256"), "base_sha256")
    if sha:
        claims.append(BaseClaim("base_sha256", sha256=sha))
    return tuple(claims)


def _runs(r: _Reader, data: dict[str, Any]) -> dict[str, RunFacts]:
    value = data.get("runs")
    if value is None:
        return {}
    if not isinstance(value, dict):
        r.keep("runs", value)
        return {}
    runs: dict[str, RunFacts] = {}
    for name, item in value.items():
        if not isinstance(item, dict):
            r.keep(f"runs.{name}", item)
            continue
        hyper = dict(item["hyperparameters"]) if isinstance(item.get("hyperparameters"), dict) else {}
        if "hyperparameters" in item and not isinstance(item["hyperparameters"], dict):
            r.keep(f"runs.{name}.hyperparameters", item["hyperparameters"])
        for key, setting in item.items():
            if key not in _RUN_KEYS:
                hyper.setdefault(key, setting)  # lr_init, lr_final, …: the run's own hyperparameters
        runs[name] = RunFacts(hyper, *(r.text(item.get(key), f"runs.{name}.{key}") for key in _RUN_KEYS[1:]))
    return runs


KNOWN = {
    "trainer",
    "trainer_version",
    "hyperparameters",
    "shared_hyperparameters",
    "command",
    "data_sha256",
    "dataset_repo",
    "dataset_revision",
    "data_version",
    "data",
    "base",
    "base_sha256",
    "runs",
    "started",
    "finished",
    "notes",
}


def parse_train(data: Any, rel: str) -> TrainFacts:
    """The facts of a parsed train.json (``rel`` names it in errors); see the module docstring."""
    if not isinstance(data, dict):
        raise RegistryError(
            "train.invalid",
            rel,
            f"holds a JSON {type(data).__name__}, not an object",
            f'write {rel} as a JSON object (docs/formats.md, "train.json")',
        )
    r = _Reader(rel)
    trainer, hyper, command, data_facts, runs = (
        _trainer(r, data),
        _hyperparameters(r, data),
        r.text(data.get("command"), "command"),
        _data(r, data),
        _runs(r, data),
    )
    bases, started, finished, notes = (
        _bases(r, data),
        r.text(data.get("started"), "started"),
        r.text(data.get("finished"), "finished"),
        r.text(data.get("notes"), "notes"),
    )
    for key, value in data.items():
        if key not in KNOWN:
            r.keep(key, value)
    if (
        notes is not None and len(notes) > MAX_NOTES_CHARS
    ):  # the bound of every notes field (docs/formats.md, "Bounds on JSON files")
        r.problems.append(
            Problem(
                "schema.invalid",
                rel,
                f"notes: the text is {len(notes)} characters; at most {MAX_NOTES_CHARS} are kept",
                f"shorten notes in {rel} (long prose belongs in the card's hand-written section)",
            )
        )
    if data_facts.revision is not None and not _COMMIT.match(data_facts.revision):
        r.problems.append(
            Problem(
                "train.invalid",
                rel,
                f"the dataset revision {data_facts.revision!r} is not a 40-hex commit",
                f"write the dataset repo's full commit id in {rel}",
            )
        )
    if data_facts.sha256 is None and not (data_facts.repo and data_facts.revision) and not r.problems:
        r.problems.append(
            Problem(
                "train.no-data",
                rel,
                "names no training data: no data.sha256 (or data_sha256), nor a dataset repo with its revision",
                f'add "data": {{"sha256": "<sha256sum of the file the trainer read>"}} to {rel}, or "data": '
                f'{{"repo": "<dataset repo id>", "revision": "<its commit>"}}',
            )
        )
    if r.problems:
        raise RegistryError.of(r.problems)
    return TrainFacts(trainer, hyper, command, data_facts, runs, bases, started, finished, notes or "", r.extra)


def read_train(path: Path, rel: str) -> TrainFacts:
    """Read and parse the train.json at ``path``; every refusal names ``rel``."""
    return parse_train(read_json(path, rel, MAX_JSON_BYTES["train"]), rel)


def train_problems(train: TrainFacts, rel: str, base: Base, version: str) -> list[Problem]:
    """Where the train.json at ``rel`` contradicts its folder: the base it names (a file name or a
    sha256) and the data version it names must be the folder's."""
    problems = []
    for claim in train.bases:
        if claim.sha256 is not None and claim.sha256 != base.sha256:
            problems.append(
                Problem(
                    "train.base-mismatch",
                    rel,
                    f"{claim.field} names base sha256 {claim.sha256[:12]}… but this folder's "
                    f"base {base.name} is {base.sha256[:12]}…",
                    f"move the weights to the folder of the base they were trained on, or correct {claim.field}",
                )
            )
        if claim.filename is not None and claim.filename.removesuffix(".pth") not in (
            base.name,
            base.filename.removesuffix(".pth"),
        ):
            problems.append(
                Problem(
                    "train.base-mismatch",
                    rel,
                    f"{claim.field} names base {claim.filename} but this folder's base is {base.filename}",
                    f"move the weights to the folder {claim.filename.removesuffix('.pth')}/, or correct {claim.field}",
                )
            )
    if train.data.version is not None and train.data.version.removeprefix("v") != version.removeprefix("v"):
        problems.append(
            Problem(
                "train.data-mismatch",
                rel,
                f"names data version {train.data.version} but sits in the folder {version}/",
                f"move it to the data-version folder {train.data.version}/, or correct the data version in {rel}",
            )
        )
    return problems
