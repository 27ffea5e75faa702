"""``registry score``: record an evaluation result on an entry, on a base alone, or on a reference
(weights compared against but not in this repository, e.g. a run that was never uploaded).

A result with the same benchmark, date, backend and setup as a recorded one replaces it (notes
given with ``--lang`` join the other language's).  Its setup and baseline must exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.errors import RegistryError
from ..core.evaluation import BASELINE_FIX, base_name, baseline_problem, baseline_scores, source_of
from ..core.models import Base, Checkpoint, Entry, Index, Localized, Method, Reference, Score
from ..core.repo import Repo, resolve_checkpoint, resolve_entry
from ..index.editing import edit_index, localized


@dataclass(frozen=True)
class Subject:
    """What was measured: an entry's or a Transformers checkpoint's ``path``; or a ``base``, alone or
    with a ``reference`` on it."""

    path: str | None = None
    base: str | None = None
    reference: str | None = None
    method: Method | None = None  # a reference's method
    location: str | None = None  # where a reference is published (None: never uploaded)


Holder = Entry | Checkpoint | Base | Reference


def _holder(repo: Repo, index: Index, subject: Subject) -> tuple[Holder, str]:
    """The object whose scores the result joins, and the name of its base (a checkpoint at the
    root: its weight index, the group its results are compared in)."""
    if subject.path is not None and (checkpoint := resolve_checkpoint(repo, index, subject.path)) is not None:
        return checkpoint, base_name(index, checkpoint.base_sha256) if checkpoint.base_sha256 else checkpoint.path
    if subject.path is not None:
        entry = source_of(index, resolve_entry(repo, index, subject.path))  # a twin's results are its source's
        return entry, base_name(index, entry.base_sha256)
    base = index.base_by_name(subject.base or "")
    if base is None:
        raise RegistryError(
            "base.unknown",
            "--base",
            f"no base named {subject.base!r} in index.json",
            "pass a base listed by `registry list`",
        )
    if subject.reference is None:
        return base, base.name
    reference = next((r for r in base.references if r.name == subject.reference), None)
    if reference is None:
        reference = Reference(name=subject.reference)
        base.references.append(reference)
    if subject.method is not None:
        reference.method = subject.method
    if subject.location is not None:
        reference.location = subject.location
    return reference, base.name


def _check_names(index: Index, holder: str, base: str, score: Score) -> None:
    if score.setup is not None and score.setup not in {s.name for s in index.registry.setups}:
        raise RegistryError(
            "args.unknown-setup",
            "--setup",
            f"no evaluation setup named {score.setup!r}",
            f"record it first: registry eval-setup {score.setup} …",
        )
    holders = baseline_scores(index, base)
    problem = baseline_problem(holder, holders.get(score.baseline or ""), score)
    if problem and score.baseline not in holders:
        others = sorted(name for name in holders if name not in (base, holder))
        listed = f"; on it: {', '.join(others[:4])}{', …' if len(others) > 4 else ''}" if others else ""
        raise RegistryError(
            "args.bad-baseline",
            "--baseline",
            problem,
            f"pass --baseline the base's name ({base}), a reference's name or an entry's path{listed}",
        )
    if problem:
        raise RegistryError("args.bad-baseline", "--baseline", problem, BASELINE_FIX)


def _merged(old: Score | None, new: Score, lang: str | None) -> Score:
    """``new``, with the notes and footnote ``old`` had in the other language when ``lang`` is given."""
    if old is None or lang is None:
        return new
    texts = {}
    for field in ("notes", "footnote"):
        before, after = getattr(old, field), getattr(new, field)
        base = before if isinstance(before, Localized) else Localized()
        texts[field] = (
            localized(base, lang, after.model_dump()[lang] if isinstance(after, Localized) else [after])
            if after
            else before
        )
    return new.model_copy(update=texts)


def add_score(root: Path, subject: Subject | str, score: Score, lang: str | None = None) -> Holder:
    """Record ``score`` on ``subject`` (an entry's or a checkpoint's path, or a :class:`Subject`);
    the object holding it.  On a checkpoint the result goes to index.json (``checkpoints[].scores``):
    the author's evaluation.json is never written."""
    subject = Subject(path=subject) if isinstance(subject, str) else subject
    repo = Repo.open(root)

    def change(index: Index) -> Holder:
        holder, base = _holder(repo, index, subject)
        _check_names(index, holder.path if isinstance(holder, Entry | Checkpoint) else holder.name, base, score)
        key = (score.benchmark, score.date, score.backend, score.setup)
        old = next((s for s in holder.scores if (s.benchmark, s.date, s.backend, s.setup) == key), None)
        holder.scores = [s for s in holder.scores if s is not old] + [_merged(old, score, lang)]
        holder.scores.sort(key=lambda s: (s.date, s.backend, s.setup or "", s.benchmark))
        return holder

    return edit_index(root, change)
