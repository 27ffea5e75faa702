"""Reading JSON files strictly, and validation against the checked-in JSON Schemas that names the JSON path.

The schemas are checked in under ``schemas/`` so a registry can be validated by any JSON Schema
tool (:mod:`registry.index.schema_files` writes them; a test regenerates them and fails on drift).  Files on disk are checked with jsonschema
first, because its errors carry the JSON path (``$.entries[2].data.sha256``) a user can act on.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError

from .errors import Problem, RegistryError
from .resources import REINSTALL, schema_dir

M = TypeVar("M", bound=BaseModel)


@cache
def _validator(kind: str) -> Draft202012Validator:
    """The checked-in schema (a test keeps it equal to the models'): reading it is much faster
    than asking pydantic to generate it, on every validate."""
    path = schema_dir() / f"{kind}.schema.json"
    try:
        return Draft202012Validator(json.loads(path.read_bytes()))
    except (OSError, ValueError) as exc:
        raise RegistryError(
            "install.damaged-file", path, f"the installed schema cannot be read ({exc})", REINSTALL
        ) from exc


def schema_errors(data: Any, kind: str) -> list[tuple[str, str]]:
    """``(json_path, message)`` for every schema violation, in document order."""
    errors = sorted(_validator(kind).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    return [(e.json_path, e.message) for e in errors]


def _pydantic_path(loc: tuple) -> str:
    path = "$"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


# Bounds on the JSON files the tool reads (docs/formats.md, "Bounds on JSON files"): far above
# what a real registry reaches, far below what would exhaust memory or the interpreter's stack.
MAX_JSON_DEPTH = 64
MAX_JSON_BYTES = {"index": 64 << 20, "train": 4 << 20, "evaluation": 4 << 20}
DEFAULT_MAX_JSON_BYTES = MAX_JSON_BYTES["index"]


def read_bounded(
    path: Path, max_bytes: int, display: str | None = None, what: str = "file", code: str = "file"
) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes``; anything else is refused
    (``<code>.not-a-file``, ``<code>.too-large``) before it is read.

    The open does not block (a FIFO without a writer would hang a plain open), and the size is
    checked both from fstat and while reading, so ``/dev/zero`` or a growing file cannot fill memory.
    """
    display = display or str(path)
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise RegistryError(
                f"{code}.not-a-file", display, f"the {what} is not a regular file", "pass a regular file"
            )
        data = handle.read(max_bytes + 1) if st.st_size <= max_bytes else b""
        if st.st_size > max_bytes or len(data) > max_bytes:
            size = max(st.st_size, len(data))
            raise RegistryError(
                f"{code}.too-large",
                display,
                f"the {what} is {size} bytes or more; at most {max_bytes} ({max_bytes >> 20} MiB) are read",
                "keep it within the bound (see 'Bounds on JSON files' in docs/formats.md)",
            )
    return data


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in a parsed JSON value (a scalar: 0), without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        todo.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


def _too_deep(display: str) -> RegistryError:
    return RegistryError(
        "json.too-deep",
        display,
        f"arrays and objects nest more than {MAX_JSON_DEPTH} levels deep",
        f"restructure it to nest at most {MAX_JSON_DEPTH} levels (docs/formats.md)",
    )


def read_json(path: Path, display: str | None = None, max_bytes: int = DEFAULT_MAX_JSON_BYTES) -> Any:
    """Parse a JSON file strictly (a bounded regular file; see :func:`parse_json`), or raise an
    error naming file, line and column."""
    display = display or str(path)
    return parse_json(read_bounded(path, max_bytes, display, "JSON file", "json"), display)


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object hook: a key given twice is refused (json's default keeps the last one silently,
    so a reviewer would read other values than the tool uses)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def parse_json(raw: bytes | str, display: str) -> Any:
    """The one reader of JSON that users or remotes wrote: UTF-8, finite numbers only, no key
    twice in an object, nesting at most :data:`MAX_JSON_DEPTH` deep; anything else raises an
    error naming ``display``."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise RegistryError(
            "json.malformed", display, f"not valid UTF-8 at byte {exc.start}", "save it as UTF-8"
        ) from exc

    def no_constants(name: str) -> None:
        raise ValueError(f"{name} is not valid JSON")

    def finite(literal: str) -> float:
        number = float(literal)
        if not math.isfinite(number):
            raise ValueError(
                f"the number {literal[:40]} does not fit a double: it would be Infinity, which JSON does not have"
            )
        return number

    try:
        data = json.loads(text, parse_constant=no_constants, parse_float=finite, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise RegistryError(
            "json.malformed", f"{display}:{exc.lineno}:{exc.colno}", f"malformed JSON: {exc.msg}", "fix the syntax"
        ) from exc
    except _DuplicateKey as exc:
        shown = json.dumps(exc.key, ensure_ascii=False)[:80]
        raise RegistryError(
            "json.duplicate-key",
            display,
            f"the key {shown} appears twice in one object, so readers may disagree on its value",
            f"keep one {shown} in that object",
        ) from exc
    except ValueError as exc:
        raise RegistryError("json.malformed", display, str(exc), "fix the syntax") from exc
    except RecursionError as exc:
        raise _too_deep(display) from exc
    if _depth(data) > MAX_JSON_DEPTH:
        raise _too_deep(display)
    return data


MIGRATE_FIX = "run `registry migrate` (it upgrades index.json, the card and SHA256SUMS in one transaction)"


def format_problem(data: Any, model: type[BaseModel], display: str) -> Problem | None:
    """Why ``data`` is not in the format_version ``model`` reads (a model that declares
    ``FORMAT_VERSION``, index.json's): written by an older tool (`registry migrate` upgrades it)
    or a newer one.  None when it is, or when it names no number (the schema says what is wrong);
    a dataset registry's index has versions of its own."""
    current = getattr(model, "FORMAT_VERSION", None)
    if current is None or not isinstance(data, dict) or data.get("kind") is not None:
        return None
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version == current:
        return None
    if version < current:
        return Problem(
            "index.old-format",
            display,
            f"written in format_version {version} by an older rwkv-registry; this one reads format_version {current}",
            MIGRATE_FIX,
        )
    return Problem(
        "index.newer-format",
        display,
        f"written in format_version {version} by a newer rwkv-registry; this one reads format_version {current}",
        "upgrade rwkv-registry (`pip install -U rwkv-registry`)",
    )


def load_model(path: Path, model: type[M], display: str | None = None) -> M:
    """Read, schema-check (against ``schemas/<model.SCHEMA_KIND>.schema.json``) and parse a JSON file
    into ``model``; the first problem is raised (an older format_version: "run registry migrate")."""
    kind: str = model.SCHEMA_KIND  # type: ignore[attr-defined]  # every model read here declares it
    display = display or str(path)
    data = read_json(path, display, MAX_JSON_BYTES.get(kind, DEFAULT_MAX_JSON_BYTES))
    outdated = format_problem(data, model, display)
    if outdated:
        raise RegistryError.of([outdated])
    problems = schema_errors(data, kind)
    if problems:
        where, message = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise RegistryError(
            "schema.invalid",
            display,
            f"{where}: {message}{more}",
            f"correct {where} to match schemas/{kind}.schema.json",
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = _pydantic_path(err["loc"])
        raise RegistryError("schema.invalid", display, f"{where}: {err['msg']}", f"correct {where}") from exc


def build(model: type[M], data: Mapping[str, Any], options: Mapping[str, str]) -> M:
    """``model`` from ``data``, or a refusal naming the option (``options``: field -> option) that holds the bad value."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else ""
        option = options.get(field, field or model.__name__)
        message = str(err["msg"]).removeprefix("Value error, ")  # pydantic's prefix for a validator's ValueError
        raise RegistryError("args.invalid", option, message, f"correct {option}") from exc
