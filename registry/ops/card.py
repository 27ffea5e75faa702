"""What ``registry card`` does: re-render README.md and evaluation.json under the lock, or only
compare them (``--check``).

Kept apart from the rest of the package because it goes through ``stage_derived`` (so SHA256SUMS
follows the new files), and ``stage_derived`` itself imports the card package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import Problem, RegistryError
from ..core.names import CARD_NAME
from ..core.validation_result import Validation
from ..core.verdict import vouching

if TYPE_CHECKING:
    from ..card.sync import Rendered

# The card's modules (templates, models, schemas) are imported where a card is rendered: `card
# --check` on a tree unchanged since a clean check needs none of them (registry.core.verdict).


def write_card(root: Path) -> bool:
    """Render README.md and evaluation.json (and refresh SHA256SUMS) in one transaction; True when either changed.
    A dataset registry has only README.md, its dataset card."""
    from ..card.sync import rendered  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)
    from ..core.atomic import transaction  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)
    from ..core.repo import Repo, is_dataset  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)
    from ..dataset import card as dataset_card  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)
    from ..dataset import store  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)
    from ..index.derived import stage_derived  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)
    from ..index.rules import index_to_change  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)

    repo = Repo.open(root)
    if is_dataset(repo.root):
        with transaction(repo.root) as txn:
            dataset = store.index_to_change(repo)
            changed = not dataset_card.rendered(dataset, store.current_card(repo)).fresh
            store.stage_derived(repo, txn, dataset, absorb={CARD_NAME})  # as for a model card
        return changed
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        changed = not all(state.fresh for state in rendered(repo, index))
        stage_derived(repo, txn, index, absorb={CARD_NAME})  # the hand-written section is the card's to take in
    return changed


def compare_card(root: Path) -> list[Rendered]:
    """The rendered files on disk next to those index.json renders; changes nothing."""
    from ..card.sync import rendered  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)
    from ..core.repo import Repo, is_dataset  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)
    from ..dataset import card as dataset_card  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)
    from ..dataset import store  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)

    repo = Repo.open(root)
    if is_dataset(repo.root):
        return [dataset_card.rendered(store.load(repo), store.current_card(repo))]
    return rendered(repo, repo.load_index())


@dataclass(frozen=True)
class CardCheck:
    """What ``registry card --check`` found: the stale files, and the diff that would freshen them
    (None when the card could not be rendered to compare, e.g. a broken template)."""

    problems: list[Problem]
    diff: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"ok": not self.problems, "problems": [p.as_dict() for p in self.problems], "diff": self.diff}


def check_card(root: Path) -> CardCheck:
    """Compare README.md and evaluation.json with what index.json renders; changes nothing.
    A card that cannot be compared (a ``card.*`` refusal) is a finding of the check, not a refusal.
    On a tree unchanged since a clean validate or check: fresh, without rendering anything."""
    verdicts = vouching(root)
    if verdicts is not None and (
        Validation.from_verdict(verdicts.recall("validate")) is not None or verdicts.recall("card-check") == []
    ):
        return CardCheck([], "")
    try:
        states = compare_card(root)
    except RegistryError as err:
        if not err.code.startswith("card."):
            raise
        return CardCheck(list(err.problems), None)
    found = CardCheck([p for state in states for p in state.problems()], "".join(state.diff() for state in states))
    if verdicts is not None and not found.problems:
        verdicts.remember("card-check", [])
    return found
