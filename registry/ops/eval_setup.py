"""``registry eval-setup NAME``: record (or update) how results were measured; scores name it with ``--setup``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.errors import RegistryError
from ..core.models import EvalSetup, Index, Localized
from ..core.schemas import build
from ..index.arguments import require_name, require_text
from ..index.editing import card_language, edit_index, localized

OPTIONS = {
    "name": "NAME", "description": "--describe", "items": "--items", "runtime": "--runtime", "torch": "--torch",
    "precision": "--precision", "decoding": "--decoding", "gpu": "--gpu", "definitions": "--metric",
}  # fmt: skip
TEXTS = ("runtime", "torch", "precision", "decoding", "gpu")


def parse_metrics(pairs: Sequence[str]) -> dict[str, str]:
    """``NAME=DEFINITION`` pairs from ``--metric``."""
    metrics = {}
    for pair in pairs:
        name, sep, definition = pair.partition("=")
        if not sep or not name.strip() or not definition.strip():
            raise RegistryError(
                "args.invalid",
                "--metric",
                f"{pair!r} is not NAME=DEFINITION",
                "pass --metric 'exam=share of the 568 questions answered correctly'",
            )
        metrics[name.strip()] = require_text(definition.strip(), "--metric")
    return metrics


def set_setup(
    root: Path,
    name: str,
    facts: Mapping[str, Any],
    describe: Sequence[str] = (),
    metrics: Sequence[str] = (),
    lang: str | None = None,
) -> EvalSetup:
    """Record setup ``name``: given fields replace the old ones, metric definitions are added."""
    require_name(name, "setup name", "registry eval-setup NAME")
    for field in TEXTS:
        if facts.get(field) is not None:
            require_text(facts[field], OPTIONS[field])
    for text in describe:
        require_text(text, "--describe")
    definitions = parse_metrics(metrics)

    def change(index: Index) -> EvalSetup:
        setups = index.registry.setups
        old = next((s for s in setups if s.name == name), None)
        data: dict[str, Any] = old.model_dump() if old else {"name": name}
        data.update({k: v for k, v in facts.items() if v is not None})
        data["definitions"] = {**data.get("definitions", {}), **definitions}
        if describe:
            data["description"] = localized(
                Localized.model_validate(data.get("description") or {}),
                card_language(index, lang, "--describe"),
                list(describe),
            ).model_dump()
        setup = build(EvalSetup, data, OPTIONS)
        index.registry.setups = [setup if s.name == name else s for s in setups] if old else [*setups, setup]
        return setup

    return edit_index(root, change)
