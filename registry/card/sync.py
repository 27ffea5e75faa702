"""Keeping the rendered files, README.md and evaluation.json, in step with index.json.

Where a root entry declares the root's evaluation.json as its author's (seed 004's checkpoint at
the root), that file is the author's and the registry renders README.md alone: its own results
stay in index.json and on the card.

:func:`stage_rendered` is called by ``stage_derived`` so that every command that changes the index
re-renders both in the same transaction (and SHA256SUMS, staged after them, covers them).
:func:`check_rendered` is what ``validate`` checks of them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass

from ..core.atomic import Transaction
from ..core.author_evaluation import root_is_authors
from ..core.errors import Problem, RegistryError
from ..core.evaluation import render_evaluation
from ..core.models import Index
from ..core.names import CARD_NAME, EVALUATION_NAME
from ..core.repo import Repo
from .facts import Locate, on_disk, read_facts
from .handwritten import keep_whole
from .render import decode_card, render_card

FIX = "run `registry card`"
CODES = {CARD_NAME: "card", EVALUATION_NAME: "evaluation"}


def _read_text(repo: Repo, name: str) -> str | None:
    """The current text of a rendered file, or None when there is none."""
    path = repo.root / name
    if not (path.is_file() or path.is_symlink()):
        return None
    data = repo.read_bytes(path)
    return decode_card(data) if name == CARD_NAME else data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Rendered:
    """A rendered file as it is on disk and as index.json renders it."""

    name: str
    current: str | None
    expected: str

    @property
    def fresh(self) -> bool:
        return self.current == self.expected

    def diff(self) -> str:
        """A unified diff from the file on disk to the one index.json renders."""
        before = (self.current or "").splitlines(keepends=True)
        after = self.expected.splitlines(keepends=True)
        source = self.name if self.current is not None else "/dev/null"
        return "".join(difflib.unified_diff(before, after, source, f"{self.name} (rendered from index.json)"))

    def first_difference(self) -> int:
        """1-based number of the first line where the two differ."""
        current, expected = (self.current or "").splitlines(), self.expected.splitlines()
        differing = (n for n, (a, b) in enumerate(zip(current, expected, strict=False), start=1) if a != b)
        return next(differing, min(len(current), len(expected)) + 1)

    def problems(self) -> list[Problem]:
        if self.fresh:
            return []
        code = CODES[self.name]
        if self.current is None:
            return [Problem(f"{code}.missing", self.name, f"{self.name} is missing", FIX)]
        return [
            Problem(
                f"{code}.stale",
                self.name,
                f"differs from what index.json renders (first difference at line {self.first_difference()})",
                FIX,
            )
        ]


def rendered(repo: Repo, index: Index, locate: Locate | None = None, card_text: str | None = None) -> list[Rendered]:
    """README.md (keeping the hand-written section on disk, or of ``card_text``) and evaluation.json
    (unless the root's is an author's), as they are and as ``index`` renders them; ``locate`` finds the train.json and adapter files the card reads."""
    card_text = card_text if card_text is not None else _read_text(repo, CARD_NAME)
    card = render_card(index, card_text, facts=read_facts(index, locate or on_disk(repo)))
    if root_is_authors(index):  # the root's evaluation.json is an author's, kept as written: none of ours
        return [Rendered(CARD_NAME, card_text, card)]
    evaluation = render_evaluation(index).decode("utf-8")
    return [
        Rendered(CARD_NAME, card_text, card),
        Rendered(EVALUATION_NAME, _read_text(repo, EVALUATION_NAME), evaluation),
    ]


def stage_rendered(repo: Repo, txn: Transaction, index: Index) -> None:
    """Stage README.md and evaluation.json rendered from ``index``, reading what ``txn`` adds from
    staging (a README.md it stages too: its hand-written section is kept)."""
    staged_card = txn.staged_source(CARD_NAME)
    card_text = decode_card(staged_card.read_bytes()) if staged_card else None
    for state in rendered(repo, index, lambda rel: txn.staged_source(rel) or on_disk(repo)(rel), card_text):
        txn.write(state.name, state.expected.encode("utf-8"))


def check_rendered(repo: Repo, index: Index) -> Iterator[Problem]:
    """README.md and evaluation.json exist and equal what ``registry card`` would write."""
    try:
        states = rendered(repo, index)
    except RegistryError as err:
        yield err.problem.about(CARD_NAME)
        return
    for state in states:
        yield from state.problems()


def stage_kept_card(repo: Repo, txn: Transaction) -> None:
    """A hand-written README.md staged as the card's hand-written section, so rendering keeps it whole."""
    path = repo.card_path
    if path.is_file() or path.is_symlink():
        kept = keep_whole(decode_card(repo.read_bytes(path)))
        if kept is not None:
            txn.write(CARD_NAME, kept.encode("utf-8"))
