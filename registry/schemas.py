"""JSON Schemas generated from the pydantic models, and validation that names the JSON path.

The schemas are checked in under ``schemas/`` so a registry can be validated by any JSON Schema
tool; a test regenerates them and fails on drift.  Files on disk are checked with jsonschema
first, because its errors carry the JSON path (``$.entries[2].data.sha256``) a user can act on.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError

from .errors import RegistryError
from .models import MODELS
from .resources import REINSTALL, schema_dir

M = TypeVar("M", bound=BaseModel)


def extra_models() -> dict[str, type[BaseModel]]:
    """Models defined outside models.py that also get a checked-in schema (e.g. gate receipts)."""
    from .gate.receipt import Receipt  # noqa: PLC0415 — optional until the gate lands

    return {"receipt": Receipt}


def all_models() -> dict[str, type[BaseModel]]:
    models = dict(MODELS)
    try:
        models.update(extra_models())
    except ImportError:
        pass
    return models


def generate_schema(kind: str) -> dict[str, Any]:
    model = all_models()[kind]
    schema = model.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://rwkv-registry/schemas/{kind}.schema.json"
    return schema


def render_schema(kind: str) -> str:
    return json.dumps(generate_schema(kind), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_schemas(directory: Path | None = None) -> list[Path]:
    directory = directory or schema_dir()
    written = []
    for kind in all_models():
        path = directory / f"{kind}.schema.json"
        path.write_text(render_schema(kind), encoding="utf-8")
        written.append(path)
    return written


@cache
def _validator(kind: str) -> Draft202012Validator:
    """The checked-in schema (a test keeps it equal to the models'): reading it is much faster
    than asking pydantic to generate it, on every validate."""
    path = schema_dir() / f"{kind}.schema.json"
    try:
        return Draft202012Validator(json.loads(path.read_bytes()))
    except (OSError, ValueError) as exc:
        raise RegistryError("install.damaged-file", path, f"the installed schema cannot be read ({exc})", REINSTALL) from exc


def schema_errors(data: Any, kind: str) -> list[tuple[str, str]]:
    """``(json_path, message)`` for every schema violation, in document order."""
    errors = sorted(_validator(kind).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    return [(e.json_path, e.message) for e in errors]


def _pydantic_path(loc: tuple) -> str:
    path = "$"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def read_json(path: Path, display: str | None = None) -> Any:
    """Parse a JSON file strictly (UTF-8, no NaN), or raise an error naming file, line and column."""
    display = display or str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RegistryError("json.malformed", display, f"not valid UTF-8 at byte {exc.start}", "save it as UTF-8") from exc

    def no_constants(name: str) -> None:
        raise ValueError(f"{name} is not valid JSON")

    try:
        return json.loads(text, parse_constant=no_constants)
    except json.JSONDecodeError as exc:
        raise RegistryError(
            "json.malformed", f"{display}:{exc.lineno}:{exc.colno}", f"malformed JSON: {exc.msg}", "fix the syntax"
        ) from exc
    except ValueError as exc:
        raise RegistryError("json.malformed", display, str(exc), "fix the syntax") from exc


def load_model(path: Path, model: type[M], display: str | None = None) -> M:
    """Read, schema-check and parse a JSON file into ``model`` (one of :func:`all_models`); the first problem is raised."""
    kind = next(name for name, known in all_models().items() if known is model)
    display = display or str(path)
    data = read_json(path, display)
    problems = schema_errors(data, kind)
    if problems:
        where, message = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise RegistryError("schema.invalid", display, f"{where}: {message}{more}", f"correct {where} to match schemas/{kind}.schema.json")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = _pydantic_path(err["loc"])
        raise RegistryError("schema.invalid", display, f"{where}: {err['msg']}", f"correct {where}") from exc


if __name__ == "__main__":  # regenerate the checked-in schemas: python -m registry.schemas
    for written in write_schemas():
        print(written)
