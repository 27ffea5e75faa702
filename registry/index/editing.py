"""Changing index.json's metadata: one transaction per command, every value checked first.

The metadata commands (``set``, ``describe``, ``train-stage``, ``eval-setup``, ``score``) build
their new values with :func:`registry.core.schemas.build`, which turns a model's validation error into a one-line
refusal naming the option, and apply them with :func:`edit_index`, which refuses a result that
breaks the index rules and otherwise writes index.json with its derived files (card,
evaluation.json, SHA256SUMS) in one transaction.  A refusal leaves the registry byte-identical.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from ..core.atomic import transaction
from ..core.errors import RegistryError
from ..core.models import LANGUAGES, Entry, Index, Localized
from ..core.names import INDEX_NAME
from ..core.repo import Repo, render_index
from .derived import stage_derived
from .rules import index_problems, index_to_change

T = TypeVar("T")


def check_language(lang: str) -> str:
    if lang not in LANGUAGES:
        raise RegistryError(
            "args.bad-language",
            "--lang",
            f"language {lang!r} is not one the card is written in",
            "pass --lang zh or --lang en",
        )
    return lang


def card_language(index: Index, lang: str | None, option: str) -> str:
    """The language text given with ``option`` is in: ``--lang``, else the card's only language."""
    if lang is None:
        languages = index.registry.languages
        if len(languages) == 1:
            return languages[0]
        raise RegistryError(
            "args.missing",
            "--lang",
            f"the card is in {' and '.join(languages)}, so {option} needs to say which language it is in",
            "add --lang zh or --lang en",
        )
    return check_language(lang)


def localized(old: Localized, lang: str, items: list[str]) -> Localized:
    """``old`` with ``lang``'s items replaced by ``items`` (the other language kept)."""
    return old.model_copy(update={lang: list(items)})


def edit_index(root: Path, change: Callable[[Index], T]) -> T:
    """Apply ``change`` to index.json under the lock and stage it with its derived files."""
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        result = change(index)
        try:  # the change assigned attributes, which pydantic does not check: check the whole index
            index = Index.model_validate(index.model_dump(mode="json"))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
            raise RegistryError(
                "args.invalid",
                INDEX_NAME,
                f"the change would make {where} invalid: {err['msg']}",
                "correct the option that sets it",
            ) from exc
        problems = index_problems(index)
        if problems:
            raise RegistryError.of(problems)  # one line per broken rule, each with its fix
        txn.write(INDEX_NAME, render_index(index))
        stage_derived(repo, txn, index)
    return result


def set_recommended(index: Index, entry: Entry) -> None:
    """One recommended file per base and method (seed 001: "State 推荐", "MiSS 推荐")."""
    for other in index.entries:
        if other.base_sha256 == entry.base_sha256 and other.method == entry.method:
            other.recommended = False
    entry.recommended = True
