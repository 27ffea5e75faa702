"""Seed-002-shaped version folders built from a seed: for tests, the demo and the bench.

A folder holds what the packer of No-22/rwkv-agent-distill leaves (``final-20261013``): both
splits in the three row forms (rows, segments in order and shuffled, text), the packing
manifests, the packing input, the composition statistics, the release manifest and logs.  Row
``i`` is a pure function of (seed, i), so a shuffled file is written by regenerating rows in a
permuted order and a gigabyte-sized folder is written in bounded memory.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import Problem
from ..core.hashing.digest import sha256_hex
from ..core.hashing.engine import hash_file
from ..core.names import FINAL_STATS, RELEASE_MANIFEST, ROWS_NAME, SPLIT_MANIFEST, SPLIT_PARENT, TEXT_NAME, VOCAB_NAME
from .content import TokenStats, world_tokenizer
from .models import wire_hash
from .rows import cut, layout

SYSTEM = "System: 你是本地工具 Agent，可以读写文件、跑 bash、查网页、算数、查天气。"
QUESTIONS = (
    "把 notes.txt 里的待办整理成清单",
    "What is the weather in Hangzhou tomorrow?",
    "算一下 37 * 91 + 5",
    "List the files in ./src and count the lines of main.py",
)
ANSWERS = (
    '<tool_call>list_files(path=".")</tool_call>',
    "明天杭州多云，最高 21 度。",
    "37 * 91 + 5 = 3372",
    "src/ holds main.py (120 lines) and util.py (48 lines).",
)
FILLER = "工具结果：ok。The tool returned 3 lines of output. "


@dataclass(frozen=True)
class VersionSpec:
    version: str
    thinking: str  # "off" or "full"
    train_rows: int
    validation_rows: int
    trained_name: str  # the shuffled segments file the trainer read, e.g. segments-1-41.jsonl
    seed: int = 0
    row_chars: int = 400  # about how long a row's text is
    dropped_rows: int = 2  # rows in the packing input that packing dropped (too long)
    flagged: int = 0  # train rows seeded from test questions (meta.seeded_from_test, seed 002's base700)
    context: int = 8128
    token_stats: bool = True  # write each split manifest's max_tokens and token_quantiles (tokenizes every row)
    family_key: str = "family"
    modulus: int = 32  # the validation split: sha256(family) mod modulus == 0

    @property
    def split_rule(self) -> str:
        return f"sha256({self.family_key}) mod {self.modulus} == 0"

    @property
    def profile(self) -> str:
        return "g1k-think" if self.thinking == "full" else "g1k"

    @property
    def wire_canonical(self) -> str:
        nudge = ";nudge=think" if self.thinking == "full" else ""
        return f"format=xml;tools=work-v2;system=agent-v3;thinking={self.thinking};stop=\\n\\nUser:{nudge}"


@dataclass(frozen=True)
class BuiltVersion:
    """What was written, as ``registry dataset add`` is told it."""

    folder: Path
    spec: VersionSpec
    trained_path: str
    trained_sha256: str

    @property
    def wire_hash(self) -> str:
        return wire_hash(self.spec.wire_canonical)


def row(spec: VersionSpec, split: str, number: int) -> dict[str, Any]:
    """Row ``number`` of a split: a multi-turn text ending in ``\\n\\nUser:`` with its loss spans on
    the model's turns; its family (three rows a task) obeys the split rule, and the first
    ``spec.flagged`` train rows are flagged ``seeded_from_test``."""
    rng = random.Random(f"{spec.seed}/{split}/{number}")
    text, spans = f"{SYSTEM}\n\n", []
    while True:
        text += f"User: {rng.choice(QUESTIONS)} #{number}\n\nAssistant:"
        thought = " <think>先看看需要哪个工具。</think>" if spec.thinking == "full" else ""
        answer = f"{thought} {rng.choice(ANSWERS)}"
        answer += "\n\n"  # the turn's end is the model's to say
        spans.append([len(text), len(text) + len(answer)])
        text += answer
        if len(text) >= spec.row_chars:
            break
        text += f"Tool: {FILLER * rng.randint(1, max(1, spec.row_chars // 200))}\n\n"
    text += "User:"
    meta = {
        "task": f"t{number // 3:05d}",
        spec.family_key: family(spec, split, number // 3),
        "batch": rng.choice(("b09", "b10a", "b12c")),
        "turn": number % 3,
        "passed": True,
    }
    if split == "train" and number < spec.flagged:
        meta.update(source="base700", seeded_from_test=True)
    meta.update(wire_canonical=spec.wire_canonical, wire_hash=wire_hash(spec.wire_canonical))
    return {"text": text, "loss_spans": spans, "meta": meta}


def family(spec: VersionSpec, split: str, task: int) -> str:
    """The family of a split's task: the first name the split rule puts in that split."""
    validation = split == "validation"
    for attempt in range(100 * spec.modulus):
        name = f"{spec.version}/{split}/f{task:05d}.{attempt}"
        if (int(sha256_hex(name.encode()), 16) % spec.modulus == 0) == validation:
            return name
    raise AssertionError("no family name found")  # (1 - 1/modulus) ** (100 * modulus) is never reached


def token_facts(rows: Iterator[dict[str, Any]], vocabulary: str = VOCAB_NAME) -> dict[str, Any]:
    """A split manifest's token facts of ``rows`` (the rwkv World tokenizer; none without it)."""
    tokenizer = world_tokenizer(vocabulary)
    if isinstance(tokenizer, Problem):
        return {}
    stats = TokenStats()
    for number, value in enumerate(rows, 1):
        text = value["text"]
        stats.add(
            number,
            tokenizer.count(text, layout(len(text), [tuple(span) for span in value["loss_spans"]]))[0],
            None,
            None,
        )
    return {"max_tokens": stats.maximum, "token_quantiles": {f"p{q}": stats.quantile(q) for q in (50, 90, 99)}}


def line(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8")


def segments_line(value: dict[str, Any]) -> bytes:
    pieces = cut(value["text"], [tuple(span) for span in value["loss_spans"]])
    return line({"segments": [{"text": text, "train": train} for text, train in pieces]})


def _write(path: Path, lines: Iterator[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        for data in lines:
            handle.write(data)


def build_version(folder: Path, spec: VersionSpec) -> BuiltVersion:
    """Write a version folder (see the module docstring); the trained file is the train split's shuffled segments."""
    folder = Path(folder)
    counts = {"train": spec.train_rows, "validation": spec.validation_rows}
    for split, count in counts.items():
        directory = folder / SPLIT_PARENT / split
        rows = lambda split=split, count=count: (row(spec, split, i) for i in range(count))  # noqa: E731
        _write(directory / ROWS_NAME, (line(r) for r in rows()))
        _write(directory / "segments.jsonl", (segments_line(r) for r in rows()))
        _write(directory / TEXT_NAME, (line({"text": r["text"]}) for r in rows()))
        if split == "train":
            order = list(range(count))
            random.Random(spec.seed + 20261017).shuffle(order)
            _write(directory / spec.trained_name, (segments_line(row(spec, split, i)) for i in order))
        manifest = {
            "rows": count,
            "wire_hash": wire_hash(spec.wire_canonical),
            **(token_facts(rows()) if spec.token_stats else {}),
        }
        (directory / SPLIT_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        # the packer's input: these rows and the ones packing dropped as too long
        _write(folder / f"{split}-rows.jsonl", (line(row(spec, split, i)) for i in range(count + spec.dropped_rows)))
    stats = {
        "rows": spec.train_rows + spec.validation_rows,
        "zh_share": 0.476,
        "multi_turn_share": 0.184,
        "max_tokens": 8121,
    }
    (folder / FINAL_STATS).write_text(json.dumps(stats, indent=2) + "\n")
    (folder / "pack.log").write_text(
        f"packed {spec.train_rows} train / {spec.validation_rows} validation rows; "
        f"dropped {spec.dropped_rows * 2} over 8128 tokens\n"
    )
    (folder / f"{spec.version}-segcheck.log").write_text(
        "tokenizer round-trip: rwkv_vocab_v20230424.txt, 0 mismatches\n"
    )
    files = sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != RELEASE_MANIFEST
    )
    hashes = {rel: hash_file(folder / rel) for rel in files}
    (folder / RELEASE_MANIFEST).write_text(json.dumps({"version": spec.version, "files": hashes}, indent=2) + "\n")
    trained = f"{SPLIT_PARENT}/train/{spec.trained_name}"
    return BuiltVersion(folder, spec, trained, hashes[trained])


SEED_002 = (  # seed 002's two versions, with tiny row counts
    VersionSpec(
        "v1.41", "off", train_rows=36, validation_rows=4, trained_name="segments-1-41.jsonl", seed=141, flagged=3
    ),
    VersionSpec("v2.1", "full", train_rows=48, validation_rows=6, trained_name="segments-shuffled.jsonl", seed=21),
)
