"""evaluation.json: every recorded result, resolved, as a pure function of index.json.

Results live in index.json on what they measured: an entry (``entries[].scores``), a base on its
own (``bases[].scores``) or a reference, weights compared against but not held here
(``bases[].references[].scores``).  This module resolves them into one list: each result names
its subject (an entry together with its safetensors twins: one weight, one subject), its setup
and its baseline's value.  The card's score tables and evaluation.json both come from it, so they
cannot disagree.  Like the card, evaluation.json is re-rendered by every command that changes the
index and checked by ``validate`` and ``card --check``.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterator

from .errors import Problem
from .models import Base, Entry, EvalBaseline, EvalResult, EvalSubject, Evaluation, Index, Score
from .names import INDEX_NAME

_VALUE = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(%|/\s*\d+(?:\.\d+)?)?\s*$")


def split_value(text: str) -> tuple[float, str | None] | None:
    """A result as people write it: ``52.2``, ``52.2%`` or ``41.0/60`` (a value and its unit,
    ``%`` or ``/60``), or None when ``text`` is none of these."""
    match = _VALUE.match(text)
    if match is None:
        return None
    unit = match.group(2)
    return float(match.group(1)), unit.replace(" ", "") if unit else None


def short_sha(sha256: str) -> str:
    """The 8-hex prefix seed 001 uses in prose and tables; the full hash is in index.json."""
    return sha256[:8] + "…"


def source_of(index: Index, entry: Entry) -> Entry:
    """The entry a safetensors twin was converted from (the entry itself when it is no twin)."""
    seen = {entry.path}
    while entry.derived_from and (source := index.entry_by_path(entry.derived_from)) and source.path not in seen:
        seen.add(source.path)
        entry = source
    return entry


def twins_by_source(index: Index) -> dict[str, list[Entry]]:
    """Each source entry's twins, by the source's path (sorted by path)."""
    twins: dict[str, list[Entry]] = defaultdict(list)
    for entry in sorted(index.entries, key=lambda e: e.path):
        source = source_of(index, entry)
        if source is not entry:
            twins[source.path].append(entry)
    return twins


def base_name(index: Index, sha256: str) -> str:
    """A base's name, or the short sha of a base ``bases`` lacks (validate reports those)."""
    base = index.base_by_sha(sha256)
    return base.name if base else short_sha(sha256)


def _by_benchmark(scores: list[Score]) -> list[Score]:
    return sorted(scores, key=lambda s: (s.date, s.backend, s.setup or "", s.benchmark))


def subjects(index: Index) -> Iterator[tuple[EvalSubject, list[Score]]]:
    """Every subject with its scores: per base (by name) the base, its references, its entries by path;
    then the Transformers checkpoints (one at the root is a group of its own, named by its weight index)."""
    twins = twins_by_source(index)
    sources = sorted((e for e in index.entries if source_of(index, e) is e), key=lambda e: e.path)
    names = sorted({b.name for b in index.bases} | {base_name(index, e.base_sha256) for e in sources})
    for name in names:
        base = index.base_by_name(name)
        if base is not None:
            yield EvalSubject(kind="base", name=base.name, base=base.name, sha256=base.sha256), base.scores
            for ref in sorted(base.references, key=lambda r: r.name):
                yield EvalSubject(kind="reference", name=ref.name, base=base.name, location=ref.location), ref.scores
        for entry in (e for e in sources if base_name(index, e.base_sha256) == name):
            files = [entry.path, *(t.path for t in twins.get(entry.path, []))]
            yield EvalSubject(kind="entry", name=entry.path, base=name, sha256=entry.sha256, files=files), entry.scores
    for checkpoint in sorted(index.checkpoints, key=lambda c: c.path):  # under a base, or its own at the root
        group = base_name(index, checkpoint.base_sha256) if checkpoint.base_sha256 else checkpoint.path
        files = [s.path for s in checkpoint.shards]
        yield (
            EvalSubject(kind="checkpoint", name=checkpoint.path, base=group, sha256=checkpoint.sha256, files=files),
            checkpoint.scores,
        )


def baseline_scores(index: Index, base: str) -> dict[str, list[Score]]:
    """What a score on ``base`` may name as its baseline (the base, its references, its entries), with their results."""
    return {s.name: scores for s, scores in subjects(index) if s.base == base}


def comparable(a: Score, b: Score) -> bool:
    """Results that may stand side by side: same benchmark, setup, date and backend."""
    return (a.benchmark, a.setup, a.date, a.backend) == (b.benchmark, b.setup, b.date, b.backend)


def baseline_result(candidates: list[Score], score: Score) -> Score | None:
    """The baseline's result ``score`` is compared with: a comparable one; with a footnote (the
    comparison is only indicative), else its latest result on the same benchmark."""
    same = [s for s in candidates if comparable(s, score)]
    if not same and score.footnote:
        same = [s for s in candidates if s.benchmark == score.benchmark]
    return max(same, key=lambda s: (str(s.date), s.backend or ""), default=None)


def baseline_problem(holder: str, candidates: list[Score] | None, score: Score) -> str | None:
    """Why ``score`` (held by ``holder``) cannot name its baseline, or None when it can."""
    if score.baseline is None:
        return None
    if score.baseline == holder:
        return "a result cannot be its own baseline"
    if candidates is None:
        return f"baseline {score.baseline!r} is not another result holder on this base"
    if baseline_result(candidates, score) is None:
        return f"baseline {score.baseline!r} has no {score.benchmark} result with the same setup, date and backend"
    return None


BASELINE_FIX = (
    "record the baseline's result first with the same --setup, --date and --backend (registry score --base … "
    "[--reference NAME]), or add --footnote saying why an indicative comparison is enough"
)


def _baseline(scored: dict[tuple[str, str], list[Score]], base: str, score: Score) -> EvalBaseline | None:
    """The baseline's comparable result (see :func:`baseline_result`)."""
    if score.baseline is None:
        return None
    found = baseline_result(scored.get((base, score.baseline), []), score)
    return EvalBaseline(name=score.baseline, value=found.value if found else None)


def evaluation(index: Index) -> Evaluation:
    listed = list(subjects(index))
    scored = {(subject.base, subject.name): scores for subject, scores in listed}
    results = [
        EvalResult(
            subject=subject,
            benchmark=score.benchmark,
            value=score.value,
            unit=score.unit,
            count=score.count,
            date=score.date,
            backend=score.backend,
            runs=score.runs,
            setup=score.setup,
            baseline=_baseline(scored, subject.base, score),
            notes=score.notes,
            footnote=score.footnote,
        )
        for subject, scores in listed
        for score in _by_benchmark(scores)
    ]
    return Evaluation(setups=sorted(index.registry.setups, key=lambda s: s.name), results=results)


def render_evaluation(index: Index) -> bytes:
    """Deterministic bytes for evaluation.json, formatted like index.json."""
    text = json.dumps(evaluation(index).model_dump(mode="json"), indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def reference_problems(index: Index) -> Iterator[Problem]:
    """Names results point at that do not exist, and names that would point at two things."""
    setups = Counter(s.name for s in index.registry.setups)
    for name, count in sorted(setups.items()):
        if count > 1:
            yield Problem(
                "index.duplicate-setup",
                INDEX_NAME,
                f"evaluation setup {name!r} listed {count} times",
                "keep one setup of each name",
            )
    for base in index.bases:
        yield from _reference_names(base)
    listed = list(subjects(index))
    scored = {(subject.base, subject.name): scores for subject, scores in listed}
    for subject, scores in listed:
        for score in scores:
            where = f"{subject.kind} {subject.name}: {score.benchmark} on {score.date}"
            if score.setup is not None and score.setup not in setups:
                yield Problem(
                    "index.unknown-setup",
                    INDEX_NAME,
                    f"{where} names setup {score.setup!r}, which is not in registry.setups",
                    "record it with `registry eval-setup NAME …`, or name an existing setup",
                )
            problem = baseline_problem(subject.name, scored.get((subject.base, score.baseline or "")), score)
            if problem:
                yield Problem("index.bad-baseline", INDEX_NAME, f"{where}: {problem}", BASELINE_FIX)


def _reference_names(base: Base) -> Iterator[Problem]:
    for name, count in Counter(r.name for r in base.references).items():
        if count > 1 or name == base.name:
            yield Problem(
                "index.duplicate-reference",
                INDEX_NAME,
                f"reference {name!r} on base {base.name} is listed twice or has the base's name",
                "give each reference its own name",
            )
