"""The card's YAML front matter, built with huggingface_hub's own ModelCardData.

Using the Hub library (rather than dumping YAML by hand) means the Hub parses exactly what we
wrote: the same key names (``model-index``), the same eval-result layout, the same YAML dialect.
"""

from __future__ import annotations

import json
from typing import Any

from huggingface_hub import CardData, EvalResult, ModelCardData

from ..core.errors import RegistryError
from ..core.models import Index
from .view import CardView

LIBRARY = "rwkv"
TRANSFORMERS = "transformers"  # a repo whose weights are Transformers checkpoints only (seed 004)
TASK = "text-generation"
# Front matter key order: what a reader looks for first; model-index (long) always comes last.
KEY_ORDER = ["language", "license", "library_name", "tags", "base_model", "base_model_relation", "datasets"]
# The keys the registry owns outright; for every other key the author's value stands.
OWNED = ("model-index", "base_model_relation")


def base_model_relation(index: Index) -> str | None:
    """How the repo relates to its bases, for the Hub's single ``base_model_relation`` value.

    State files and MiSS adapters are useless without the exact base file, so any repo holding one
    is an ``adapter`` repo, even when it also holds full checkpoints; only a repo of nothing but
    full checkpoints is a ``finetune``.  An empty registry states no relation.
    """
    methods = {e.method for e in index.entries} | ({"full"} if index.checkpoints else set())
    if not methods:
        return None
    return "finetune" if methods == {"full"} else "adapter"


def _metric_name(name: str, unit: str) -> str:
    return f"{name} ({unit})" if unit else name


def eval_results(view: CardView) -> list[EvalResult]:
    """One EvalResult per result of this repo's own weights (a weight with its twins counts once).

    model-index says what *this* repo's weights score: the base alone, comparison rows for
    weights published elsewhere (or never) and references are context for the card's tables, not
    results of this repo, so they are left out.

    The Hub groups results that share task and dataset (type, config) into one model-index
    result; the dataset config is set to "<date> <backend>[ <setup>]" so a group never mixes
    scores that are not comparable.  The value stays a number (leaderboards sort it); the metric
    name says what was measured (the file's path, or the base's or reference's name) and in what unit.
    """
    return [
        EvalResult(
            task_type=TASK,
            dataset_type=row.result.benchmark,
            dataset_name=row.result.benchmark,
            dataset_config=" ".join(filter(None, (group.date, group.backend, group.setup))),
            metric_type="score",
            metric_name=_metric_name(row.result.subject.name, row.result.unit),
            metric_value=row.result.value,
        )
        for base in view.bases
        for group in base.score_groups
        for row in group.rows
        if row.result.subject.kind == "entry"
    ]


def front_matter(view: CardView) -> str:
    """The YAML between the ``---`` lines (no trailing newline)."""
    data = card_data(view)
    with_author(data, view.index.registry.front_matter)
    return data.to_yaml(original_order=[*KEY_ORDER, *view.index.registry.front_matter])


def with_author(data: CardData, author: dict[str, Any], owned: tuple[str, ...] = OWNED) -> None:
    """Lay the author's own front matter (``registry.front_matter``) over the registry's: every
    key the author wrote stays; the author's value stands, a list the registry would write is
    merged into the author's (nothing removed), and only the ``owned`` keys are the registry's
    (a model card's ``model-index`` and ``base_model_relation``)."""
    ours = data.to_dict()
    for key, theirs in author.items():
        if key in owned:
            continue
        mine = ours.get(key)
        if isinstance(mine, list) and theirs is not None:
            kept = list(theirs) if isinstance(theirs, list) else [theirs]
            data[key] = [*kept, *(value for value in mine if value not in kept)]
        else:
            data[key] = theirs


def added_keys(author: dict[str, Any], card: dict[str, Any]) -> list[str]:
    """What a rendered card's front matter (``card``) adds to the author's, ``key: value`` each."""
    added = []
    for key, value in card.items():
        if key == "model-index":
            continue
        if key not in author:
            added.append(f"{key}: {value}")
        elif isinstance(value, list):
            theirs = author[key] if isinstance(author[key], list) else [author[key]]
            added += [f"{key}: {item}" for item in value if item not in theirs]
    return added


def read_front_matter(text: str, file: str) -> dict[str, Any]:
    """The YAML of a README's front matter (without the ``---`` lines) as the Hub reads it, as
    JSON values (a date becomes its ISO text); YAML the Hub would reject is refused."""
    from huggingface_hub import RepoCard  # noqa: PLC0415 start-up: huggingface_hub.hf_api (0.5 s, -X importtime) loads only to parse a card

    try:
        data = RepoCard(f"---\n{text}---\n").data.to_dict()
    except Exception as exc:  # the Hub's parser raises ValueError or PyYAML's own errors (not a dependency of ours)
        raise RegistryError(
            "card.front-matter",
            file,
            f"its front matter is not YAML the Hub reads ({str(exc).splitlines()[0]})",
            f"correct the YAML between the --- lines of {file}",
        ) from exc
    return json.loads(json.dumps(data, default=str))


def card_data(view: CardView) -> ModelCardData:
    index = view.index
    sources = sorted(
        {b.source for b in index.bases if b.source}
        | {c.initialized_from for c in index.checkpoints if c.initialized_from}
    )
    results = eval_results(view)
    extra: dict[str, Any] = (
        {"base_model_relation": base_model_relation(index)} if sources and (index.entries or index.checkpoints) else {}
    )  # through ModelCardData's **kwargs
    return ModelCardData(
        language=list(index.registry.languages),
        license=index.registry.license.lower()
        if index.registry.license
        else None,  # the Hub's ids are lower-case (apache-2.0, mit, cc-by-4.0)
        library_name=TRANSFORMERS if index.checkpoints and not index.entries else LIBRARY,
        tags=[*index.registry.tags, *(["gguf"] if index.ggufs and "gguf" not in index.registry.tags else [])]
        or None,  # the Hub lists the repo with GGUF models
        base_model=sources or None,
        datasets=view.dataset_repos or None,
        # ModelCardData turns (model_name, eval_results) into model-index; alone, model_name
        # would be dumped as a stray top-level key.
        model_name=index.registry.title if results else None,
        eval_results=results or None,
        **extra,
    )
