"""Keeping README.md in step with index.json: staging it, checking it, diffing it.

:func:`stage_card` is called by ``stage_derived`` so that every command that changes the index
re-renders the card in the same transaction (and SHA256SUMS, staged after it, covers it).
:func:`check_card` is a ``validate`` check; it takes the validation context by duck typing
(``ctx.repo``, ``ctx.index``) so this module never imports :mod:`registry.ops.validate`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..atomic import Transaction
from ..errors import Problem, RegistryError
from ..models import Index
from ..repo import CARD_NAME, Repo
from .render import decode_card, render_card

if TYPE_CHECKING:
    from ..ops.validate import Context

FIX = "run `registry card`"


def read_card(repo: Repo) -> str | None:
    """The current README.md text, or None when there is none."""
    path = repo.card_path
    return decode_card(repo.read_bytes(path)) if path.is_file() or path.is_symlink() else None


@dataclass(frozen=True)
class CardState:
    current: str | None
    expected: str

    @property
    def fresh(self) -> bool:
        return self.current == self.expected

    def diff(self) -> str:
        """A unified diff from the README on disk to the one index.json renders."""
        before = (self.current or "").splitlines(keepends=True)
        after = self.expected.splitlines(keepends=True)
        source = CARD_NAME if self.current is not None else "/dev/null"
        return "".join(difflib.unified_diff(before, after, source, f"{CARD_NAME} (rendered from index.json)"))

    def first_difference(self) -> int:
        """1-based number of the first line where the two differ."""
        current, expected = (self.current or "").splitlines(), self.expected.splitlines()
        differing = (n for n, (a, b) in enumerate(zip(current, expected, strict=False), start=1) if a != b)
        return next(differing, min(len(current), len(expected)) + 1)


def card_state(repo: Repo, index: Index) -> CardState:
    """README.md as it is and as ``index`` renders it (with the hand-written section on disk)."""
    current = read_card(repo)
    return CardState(current, render_card(index, current))


def stage_card(repo: Repo, txn: Transaction, index: Index) -> None:
    """Stage README.md rendered from ``index``, keeping the hand-written section on disk."""
    txn.write(CARD_NAME, card_state(repo, index).expected.encode("utf-8"))


def check_card(ctx: Context) -> Iterator[Problem]:
    """README.md exists and equals what ``registry card`` would write."""
    if not ctx.repo.card_path.is_file():
        yield Problem("card.missing", CARD_NAME, "README.md is missing", FIX)
        return
    try:
        state = card_state(ctx.repo, ctx.index)
    except RegistryError as err:
        yield err.problem.about(CARD_NAME)
        return
    yield from stale_problems(state)


def stale_problems(state: CardState) -> list[Problem]:
    if state.fresh:
        return []
    return [Problem("card.stale", CARD_NAME, f"differs from what index.json renders (first difference at line {state.first_difference()})", FIX)]
