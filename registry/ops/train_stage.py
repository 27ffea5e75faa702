"""``registry train-stage PATH NAME``: record (or replace) one stage of how a weight was trained."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.evaluation import source_of
from ..core.models import Index, Localized, TrainingStage
from ..core.repo import Repo, resolve_entry
from ..core.schemas import build
from ..index.arguments import require_text
from ..index.editing import card_language, edit_index, localized

OPTIONS = {
    "name": "NAME", "description": "--describe", "gpus": "--gpus", "precision": "--precision", "deepspeed_stage": "--deepspeed-stage",
    "global_batch": "--global-batch", "tokens_per_update": "--tokens-per-update", "loss_masking": "--loss-masking",
    "lr_schedule": "--lr-schedule", "weight_decay": "--weight-decay", "grad_clip": "--grad-clip", "conversations": "--conversations",
    "tokens": "--tokens", "supervised_tokens": "--supervised-tokens", "caveats": "--caveat",
}  # fmt: skip
TEXTS = ("precision", "loss_masking", "lr_schedule")


def set_stage(
    root: Path,
    path: str,
    name: str,
    facts: Mapping[str, Any],
    describe: Sequence[str] = (),
    caveats: Sequence[str] = (),
    lang: str | None = None,
) -> TrainingStage:
    """Record stage ``name`` of the weight at ``path`` (a stage of that name is replaced, keeping its
    place and its text in the other language); ``facts`` are the numbers and words, by field."""
    require_text(name, "NAME")
    for field in TEXTS:
        if facts.get(field) is not None:
            require_text(facts[field], OPTIONS[field])
    for option, texts in (("--describe", describe), ("--caveat", caveats)):
        for text in texts:
            require_text(text, option)
    repo = Repo.open(root)

    def change(index: Index) -> TrainingStage:
        entry = source_of(index, resolve_entry(repo, index, path))
        old = next((s for s in entry.training if s.name == name), None)
        data: dict[str, Any] = old.model_dump() if old else {"name": name}
        data.update({k: v for k, v in facts.items() if v is not None})
        if describe or caveats:
            which = card_language(index, lang, "--describe/--caveat")
            for field, items in (("description", describe), ("caveats", caveats)):
                if items:
                    data[field] = localized(
                        Localized.model_validate(data.get(field) or {}), which, list(items)
                    ).model_dump()
        stage = build(TrainingStage, data, OPTIONS)
        entry.training = [stage if s.name == name else s for s in entry.training] if old else [*entry.training, stage]
        return stage

    return edit_index(root, change)
