"""``registry dataset set``: a dataset registry's card-level fields, in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..core.atomic import transaction
from ..core.errors import RegistryError
from ..core.names import INDEX_NAME
from ..core.repo import Repo, render_index
from ..core.schemas import build
from ..dataset import store
from ..dataset.models import DatasetInfo
from ..hub.remote import check_repo_id
from ..index.editing import check_language

LISTS = {"languages", "data-languages", "tags", "task-categories"}
SCALARS = {
    "title",
    "license",
    "repo-id",
    "access",
}  # access: who may see the repo (publish --private/--gated records it)
TEXTS = {"summary", "attribution"}
FIELDS = sorted(LISTS | SCALARS | TEXTS)


def set_dataset_field(root: Path, field: str, values: Sequence[str], lang: str | None = None) -> DatasetInfo:
    """Set one field of ``dataset`` in index.json (the card and SHA256SUMS follow)."""
    if field not in FIELDS:
        raise RegistryError(
            "args.unknown-field", field, "not a field of a dataset registry", f"pass one of: {', '.join(FIELDS)}"
        )
    key = field.replace("-", "_")
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        index = store.index_to_change(repo)
        data = index.dataset.model_dump(mode="json")
        if field in SCALARS:
            if len(values) > 1:
                raise RegistryError(
                    "args.invalid", field, f"{field} takes one value", f"pass one value to {field} (none unsets it)"
                )
            value = values[0] if values else None
            if field == "repo-id" and value is not None:
                check_repo_id(value)
            data[key] = value if value is not None or field != "title" else DatasetInfo().title
        elif field in TEXTS:
            if lang is None:
                raise RegistryError(
                    "args.missing", "--lang", f"{field} is text in one language", "add --lang zh or --lang en"
                )
            data[key] = {**data[key], check_language(lang): list(values)}
        else:
            data[key] = list(values)
        index.dataset = build(DatasetInfo, data, {key: field})
        txn.write(INDEX_NAME, render_index(index))
        store.stage_derived(repo, txn, index)
    return index.dataset
