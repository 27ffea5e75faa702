"""The checked-in JSON Schemas (``schemas/<kind>.schema.json``), generated from every pydantic
model that has one: ``python -m registry.index.schema_files`` writes them; a test fails on drift."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..core.models import MODELS
from ..core.resources import schema_dir
from ..dataset.models import DatasetIndex
from ..gate.receipt import Receipt


def all_models() -> dict[str, type[BaseModel]]:
    """Every model with a checked-in schema, by its ``SCHEMA_KIND``."""
    return {**MODELS, DatasetIndex.SCHEMA_KIND: DatasetIndex, Receipt.SCHEMA_KIND: Receipt}


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


if __name__ == "__main__":  # regenerate the checked-in schemas: python -m registry.index.schema_files
    for written in write_schemas():
        print(written)
