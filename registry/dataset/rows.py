"""The three forms of a version's rows, read line by line, and whether they carry the same rows.

* rows: ``{"text", "loss_spans", "meta"}`` — ``loss_spans`` are ``[start, end)`` character (code
  point) offsets into ``text``, sorted, not overlapping, ``0 <= start < end <= len(text)``;
* segments: ``{"segments": [{"text", "train"}, …]}`` — the row cut at every span boundary (empty
  pieces dropped), ``train`` true exactly on the spans;
* train: ``{"text"}``.

Each row gets two digests: of its text (UTF-8), and of its segments (that text digest and the
length and train flag of every piece: the pieces are the text cut there).  A segments or train file carries the same
rows as rows.jsonl when the multisets
of digests are equal, whatever its order (a shuffled file included).  Memory is bounded by the
number of rows (one 16-byte digest and a counter per distinct row), never by the file's size; a
line longer than :data:`MAX_LINE_BYTES` is refused before it is parsed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.errors import Problem, RegistryError
from ..core.hashing.digest import sha256
from ..core.schemas import parse_json
from .models import Wire, wire_hash

MAX_LINE_BYTES = 256 << 20
MAX_FINDINGS = 20  # per file: the first problems name their lines, the rest are counted on the last one
Piece = tuple[str, bool]  # (text, train)
Layout = list[tuple[int, bool]]  # (length in characters, train) of each piece
Progress = Callable[[int], None]


class RowError(ValueError):
    """One line that is not a well-formed row of its form; the message says what."""


def _lines(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """(line number, line) for every line, streamed; ``None`` for a line over the bound (skipped)."""
    with open(path, "rb") as handle:
        number = 0
        while line := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(line) > MAX_LINE_BYTES:
                while line and not line.endswith(b"\n"):  # skip the rest of the long line
                    line = handle.readline(MAX_LINE_BYTES + 1)
                yield number, None
                continue
            yield number, line


def _object(line: bytes) -> dict[str, Any]:
    try:  # the one strict reader: a key twice in a row (two "text"s) is refused like in any JSON file
        value = parse_json(line, "")
    except RegistryError as exc:
        column = (exc.problem.file or "").rpartition(":")[2]
        raise RowError(exc.problem.message + (f" (column {column})" if column.isdigit() else "")) from exc
    if not isinstance(value, dict):
        raise RowError("is not a JSON object")
    return value


def _text(value: Any, what: str = "text") -> str:
    if not isinstance(value, str):
        raise RowError(f"{what} is not a string")
    return value


def check_spans(text: str, spans: Any) -> list[tuple[int, int]]:
    """``loss_spans`` as (start, end) pairs, or a RowError saying which span is wrong and how."""
    if not isinstance(spans, list):
        raise RowError("loss_spans is not a list")
    checked: list[tuple[int, int]] = []
    for number, span in enumerate(spans):
        if not (isinstance(span, list) and len(span) == 2 and all(type(x) is int for x in span)):
            raise RowError(f"loss span #{number} {json.dumps(span)[:40]} is not a pair of integers [start, end]")
        start, end = span
        if start < 0 or start >= end:
            raise RowError(f"loss span #{number} [{start}, {end}] is empty or reversed (need 0 <= start < end)")
        if end > len(text):
            raise RowError(f"loss span #{number} [{start}, {end}] ends past the text ({len(text)} characters)")
        if checked and start < checked[-1][1]:
            previous = checked[-1]
            relation = "overlaps" if start >= previous[0] else "comes before"
            raise RowError(
                f"loss span #{number} [{start}, {end}] {relation} the span before it "
                f"[{previous[0]}, {previous[1]}] (spans must be sorted and not overlap)"
            )
        checked.append((start, end))
    return checked


def cut(text: str, spans: list[tuple[int, int]]) -> list[Piece]:
    """The row cut at every span boundary: the segments form of (text, spans), empty pieces dropped."""
    pieces: list[Piece] = []
    position = 0
    for start, end in spans:
        if start > position:
            pieces.append((text[position:start], False))
        pieces.append((text[start:end], True))
        position = end
    if position < len(text):
        pieces.append((text[position:], False))
    return pieces


def layout(text_length: int, spans: list[tuple[int, int]]) -> Layout:
    """The lengths and train flags of :func:`cut`'s pieces, without slicing the text."""
    pieces: Layout = []
    position = 0
    for start, end in spans:
        if start > position:
            pieces.append((start - position, False))
        pieces.append((end - start, True))
        position = end
    if position < text_length:
        pieces.append((text_length - position, False))
    return pieces


def text_digest(text: str) -> bytes:
    return sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


def segments_digest(text_hash: bytes, pieces: Layout) -> bytes:
    """A row's segments: its text's digest and where it is cut, with each piece's train flag."""
    return sha256(text_hash + "".join(f"{n}{'T' if train else 'F'}," for n, train in pieces).encode()).digest()[:16]


def check_wire(meta: Any, wire: Wire | None) -> None:
    """meta.wire_canonical is the version's, and meta.wire_hash the sha256 of it."""
    if not isinstance(meta, dict):
        raise RowError("meta is not an object")
    canonical, stated = meta.get("wire_canonical"), meta.get("wire_hash")
    if not isinstance(canonical, str) or not isinstance(stated, str):
        raise RowError("meta lacks wire_canonical or wire_hash (strings)")
    if stated != wire_hash(canonical):
        raise RowError(
            f"meta.wire_hash {stated[:12]}… is not the sha256 of its meta.wire_canonical ({wire_hash(canonical)[:12]}…)"
        )
    if wire is not None and canonical != wire.canonical:
        raise RowError(f"meta.wire_canonical {canonical[:60]!r} is not the version's ({wire.canonical[:60]!r})")


def parse_row(line: bytes, wire: Wire | None) -> tuple[str, Layout, dict[str, Any]]:
    """A rows.jsonl line: its text, how its loss spans cut it, and its meta."""
    row = _object(line)
    text = _text(row.get("text"))
    spans = check_spans(text, row.get("loss_spans"))
    meta = row.get("meta")
    check_wire(meta, wire)
    assert isinstance(meta, dict)  # check_wire refuses any other
    return text, layout(len(text), spans), meta


def parse_segments(line: bytes) -> tuple[str, Layout]:
    """A segments line: the text its segments join to and how they cut it."""
    segments = _object(line).get("segments")
    if not isinstance(segments, list):
        raise RowError("segments is not a list")
    texts: list[str] = []
    pieces: Layout = []
    for number, segment in enumerate(segments):
        if not isinstance(segment, dict) or not isinstance(segment.get("train"), bool):
            raise RowError(f"segment #{number} is not an object with a boolean train")
        text = _text(segment.get("text"), f"segment #{number}'s text")
        if not text:
            raise RowError(
                f"segment #{number} is empty (segments are the row cut at its loss spans, empty pieces dropped)"
            )
        texts.append(text)
        pieces.append((len(text), segment["train"]))
    return "".join(texts), pieces


def parse_text(line: bytes) -> str:
    return _text(_object(line).get("text"))


@dataclass
class FileReport:
    """What reading one file found: its row count and its problems (the first :data:`MAX_FINDINGS`)."""

    display: str
    rows: int = 0
    problems: list[Problem] = field(default_factory=list)
    more: int = 0

    def add(self, code: str, line: int | None, message: str, fix: str) -> None:
        if len(self.problems) < MAX_FINDINGS:
            where = f"{self.display}:{line}" if line else self.display
            self.problems.append(Problem(code, where, message, fix))
        else:
            self.more += 1

    def findings(self) -> list[Problem]:
        if not self.more:
            return list(self.problems)
        *listed, last = self.problems  # the rest ride on the last line: one line per problem listed, no count line
        return [
            *listed,
            replace(
                last,
                message=f"{last.message} (and {self.more} more problem(s) in this file after it: fix the ones "
                "listed, then validate again)",
            ),
        ]


FIX_ROW = "fix the row (or render the version again); a file the trainer read cannot change without new weights"


def _each(path: Path, report: FileReport, progress: Progress | None) -> Iterator[tuple[int, bytes]]:
    for number, line in _lines(path):
        if progress:
            progress(len(line or b""))
        report.rows += 1
        if line is None:
            report.add("rows.line-too-long", number, f"line is longer than {MAX_LINE_BYTES >> 20} MiB", FIX_ROW)
            continue
        yield number, line


@dataclass
class RowsDigest:
    """rows.jsonl summarised: the multisets the other forms are compared with."""

    report: FileReport
    pieces: Counter[bytes] = field(default_factory=Counter)
    texts: Counter[bytes] = field(default_factory=Counter)


# What a content check sees of each well-formed row: (line number, text, pieces, meta).
Observer = Callable[[int, str, Layout, dict[str, Any]], None]


def read_rows(
    path: Path,
    display: str,
    wire: Wire | None,
    progress: Progress | None = None,
    keep: bool = True,
    observe: Observer | None = None,
) -> RowsDigest:
    """Check every row (spans, wire) of a rows file; with ``keep``, its digests for the other forms;
    ``observe`` sees every well-formed row in the same pass (:mod:`.content`)."""
    summary = RowsDigest(FileReport(display))
    for number, line in _each(path, summary.report, progress):
        try:
            text, pieces, meta = parse_row(line, wire)
        except RowError as err:
            summary.report.add("rows.bad-row", number, str(err), FIX_ROW)
            continue
        if observe:
            observe(number, text, pieces, meta)
        if keep:
            text_hash = text_digest(text)
            summary.pieces[segments_digest(text_hash, pieces)] += 1
            summary.texts[text_hash] += 1
    return summary


def _compare(
    report: FileReport, expected: Counter[bytes], found: Iterator[tuple[int, bytes]], rows_name: str, what: str
) -> None:
    remaining = Counter(expected)
    for number, digest in found:
        if remaining[digest] > 0:
            remaining[digest] -= 1
        else:
            report.add(
                "rows.not-in-rows",
                number,
                f"this row's {what} is not one of {rows_name}'s (or it occurs more often here)",
                f"make the file the same rows as {rows_name} (render it again from {rows_name})",
            )
    missing = sum(remaining.values())
    if missing:
        report.add(
            "rows.missing-rows",
            None,
            f"{missing} row(s) of {rows_name} are not in this file",
            f"make the file the same rows as {rows_name} (render it again from {rows_name})",
        )


def compare_segments(
    path: Path, display: str, rows: RowsDigest, rows_name: str, progress: Progress | None = None
) -> FileReport:
    """A segments file against rows.jsonl: the same multiset of rows cut at their loss spans."""
    report = FileReport(display)

    def digests() -> Iterator[tuple[int, bytes]]:
        for number, line in _each(path, report, progress):
            try:
                text, pieces = parse_segments(line)
                yield number, segments_digest(text_digest(text), pieces)
            except RowError as err:
                report.add("rows.bad-segments", number, str(err), FIX_ROW)

    _compare(report, rows.pieces, digests(), rows_name, "segments (text and train flags)")
    return report


def compare_texts(
    path: Path, display: str, rows: RowsDigest, rows_name: str, progress: Progress | None = None
) -> FileReport:
    """A train.jsonl against rows.jsonl: the same multiset of texts."""
    report = FileReport(display)

    def digests() -> Iterator[tuple[int, bytes]]:
        for number, line in _each(path, report, progress):
            try:
                yield number, text_digest(parse_text(line))
            except RowError as err:
                report.add("rows.bad-text", number, str(err), FIX_ROW)

    _compare(report, rows.texts, digests(), rows_name, "text")
    return report
