"""A version's files against what index.json states about them: computed, then compared.

Row counts, the trained file's sha256 and size, the wire format of every row, the thinking mode
against the wire canonical, what the rows hold against the version's facts (:mod:`.content`: stop
text, token counts, segment boundaries, families and the split rule, flagged rows), ``release-manifest.json``'s hashes against the files, each split's
``manifest.json`` and ``final-stats.json`` where they state a count or a wire hash, and the three
forms of every split (:mod:`.rows`).  The files are read through ``locate`` (the version folder,
or the staged copies while ``registry dataset add`` is adding them), so what is checked is what
is registered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..core.errors import Problem, RegistryError
from ..core.models import Localized
from ..core.names import (
    FINAL_STATS,
    PACKING_INPUTS,
    RELEASE_MANIFEST,
    ROWS_NAME,
    SPLIT_MANIFEST,
    SPLIT_PARENT,
    SPLITS,
    TEXT_NAME,
    VERSION_REQUIRED,
)
from ..core.schemas import build, read_json
from .content import TokenCache, VersionContent
from .layout import is_segments
from .models import PROFILES, SPLIT_RULE, DataVersion, wire_thinking
from .rows import FileReport, Progress, compare_segments, compare_texts, read_rows

Locate = Callable[[str], Path]  # a path inside the version folder -> where its bytes are
MAX_MANIFEST_BYTES = 16 << 20
RESTATE = "state what the files hold (`registry dataset add` again with the right values), or restore the files"


def _json(locate: Locate, rel: str, display: str) -> tuple[Any, list[Problem]]:
    try:
        return read_json(locate(rel), display, MAX_MANIFEST_BYTES), []
    except RegistryError as err:
        return None, [err.problem.about(display)]


def release_manifest_problems(version: str, files: Mapping[str, str], locate: Locate) -> list[Problem]:
    """release-manifest.json is ``{"files": {"<path in the version>": "<sha256>", …}}``; each must match."""
    display = f"{version}/{RELEASE_MANIFEST}"
    data, problems = _json(locate, RELEASE_MANIFEST, display)
    if problems:
        return problems
    listed = data.get("files") if isinstance(data, dict) else None
    if not isinstance(listed, dict) or not all(isinstance(v, str) for v in listed.values()):
        return [
            Problem(
                "version.bad-release-manifest",
                display,
                'is not {"files": {"<path>": "<sha256>", …}}',
                "write it in that format (docs/formats.md)",
            )
        ]
    for rel, sha in sorted(listed.items()):
        actual = files.get(rel)
        if actual is None:
            problems.append(
                Problem(
                    "version.manifest-missing-file",
                    display,
                    f"lists {rel}, which is not in the version",
                    "restore the file, or correct the manifest",
                )
            )
        elif actual != sha:
            problems.append(
                Problem(
                    "version.manifest-mismatch",
                    f"{version}/{rel}",
                    f"sha256 is {actual[:12]}… but {RELEASE_MANIFEST} says {sha[:12]}…",
                    "restore the file the release manifest describes",
                )
            )
    return problems


def _stated_count(data: Any, key: str, expected: int, display: str, what: str) -> list[Problem]:
    value = data.get(key) if isinstance(data, dict) else None
    if isinstance(value, int) and value != expected:
        return [Problem("version.count-mismatch", display, f"says {key} {value} but {what} {expected}", RESTATE)]
    return []


def _split_manifest_problems(
    version: DataVersion, split: str, rows: int, locate: Locate, content: VersionContent
) -> list[Problem]:
    display = f"{version.version}/{SPLIT_PARENT}/{split}/{SPLIT_MANIFEST}"
    data, problems = _json(locate, f"{SPLIT_PARENT}/{split}/{SPLIT_MANIFEST}", display)
    if problems:
        return problems
    problems = _stated_count(data, "rows", rows, display, f"{SPLIT_PARENT}/{split}/{ROWS_NAME} holds")
    problems += content.manifest_problems(split, data, display)
    stated = data.get("wire_hash") if isinstance(data, dict) else None
    if isinstance(stated, str) and stated != version.wire.hash:
        problems.append(
            Problem(
                "version.wire-mismatch",
                display,
                f"says wire_hash {stated[:12]}… but the version's is {version.wire.hash[:12]}…",
                RESTATE,
            )
        )
    return problems


def _count(display: str, found: int, stated: int, option: str) -> list[Problem]:
    if found == stated:
        return []
    return [
        Problem(
            "version.count-mismatch",
            display,
            f"holds {found} rows but {option} says {stated}",
            f"pass {option} {found}, or restore the file",
        )
    ]


def _split_problems(
    version: DataVersion,
    split: str,
    files: Mapping[str, str],
    locate: Locate,
    progress: Progress | None,
    content: VersionContent,
) -> list[Problem]:
    folder = f"{SPLIT_PARENT}/{split}"
    rows_rel = f"{folder}/{ROWS_NAME}"
    if rows_rel not in files:
        return []  # reported as a missing required file
    display = f"{version.version}/{rows_rel}"
    rows = read_rows(
        locate(rows_rel), display, version.wire, progress, observe=content.split(split, display, files[rows_rel])
    )
    reports: list[FileReport] = [rows.report]
    for rel in sorted(files):
        parent, _, name = rel.rpartition("/")
        if parent != folder:
            continue
        display = f"{version.version}/{rel}"
        if is_segments(name):
            reports.append(compare_segments(locate(rel), display, rows, ROWS_NAME, progress))
        elif name == TEXT_NAME:
            reports.append(compare_texts(locate(rel), display, rows, ROWS_NAME, progress))
    stated, option = (
        (version.train_rows, "--train-rows") if split == "train" else (version.validation_rows, "--validation-rows")
    )
    problems = [p for report in reports for p in report.findings()]
    problems += _count(rows.report.display, rows.report.rows, stated, option)
    trained = next((r for r in reports if r.display == f"{version.version}/{version.trained_file.path}"), None)
    if split == "train" and trained is not None and trained is not rows.report:
        problems += _count(trained.display, trained.rows, stated, option)
    if f"{folder}/{SPLIT_MANIFEST}" in files:
        problems += _split_manifest_problems(version, split, rows.report.rows, locate, content)
    return problems


def version_problems(
    version: DataVersion,
    files: Mapping[str, str],
    locate: Locate,
    progress: Progress | None = None,
    cache: TokenCache | None = None,
) -> list[Problem]:
    """Everything wrong with a version's files (``files``: path inside the version -> sha256, as
    the registry computed it); ``cache`` remembers token results (:class:`.content.TokenCache`)."""
    content = VersionContent(version, cache or TokenCache(None))
    name = version.version
    problems = [
        Problem(
            "version.missing-file",
            f"{name}/{rel}",
            "a version folder needs this file",
            "restore it (seed 002's layout: docs/formats.md)",
        )
        for rel in VERSION_REQUIRED
        if rel not in files
    ]
    trained = version.trained_file
    actual = files.get(trained.path)
    if not trained.path.startswith(f"{SPLIT_PARENT}/train/") or not (
        is_segments(trained.name) or trained.name == ROWS_NAME
    ):
        problems.append(
            Problem(
                "version.trained-file-form",
                f"{name}/{trained.path}",
                "the trained file must be the train split's rows.jsonl or a segments*.jsonl",
                "pass the file the trainer read with --trained-file",
            )
        )
    if actual is None:
        problems.append(
            Problem(
                "version.trained-file-missing",
                f"{name}/{trained.path}",
                "the file the weights were trained on is not in the version",
                "restore it",
            )
        )
    elif actual != trained.sha256:
        problems.append(
            Problem(
                "version.trained-sha-mismatch",
                f"{name}/{trained.path}",
                f"sha256 is {actual[:12]}… but index.json says the trainer read {trained.sha256[:12]}… (weights cite that hash)",
                "restore the file the weights were trained on; changed data is a new version",
            )
        )
    thinking = wire_thinking(version.wire.canonical)
    if thinking is not None and thinking != version.thinking:
        problems.append(
            Problem(
                "version.thinking-mismatch",
                name,
                f"thinking is {version.thinking!r} but the wire canonical says thinking={thinking}",
                f"pass --thinking {thinking}, or the wire canonical the rows were rendered with",
            )
        )
    for split in SPLITS:
        problems += _split_problems(version, split, files, locate, progress, content)
    problems += content.findings()
    content.remember()
    for rel in PACKING_INPUTS:
        if rel in files:
            problems += read_rows(locate(rel), f"{name}/{rel}", version.wire, progress, keep=False).report.findings()
    if RELEASE_MANIFEST in files:
        problems += release_manifest_problems(name, files, locate)
    if FINAL_STATS in files:
        data, found = _json(locate, FINAL_STATS, f"{name}/{FINAL_STATS}")
        problems += found or _stated_count(
            data,
            "rows",
            version.train_rows + version.validation_rows,
            f"{name}/{FINAL_STATS}",
            "train and validation rows add up to",
        )
    return problems


OPTIONS = {
    "version": "--version", "date": "--date", "thinking": "--thinking", "profile": "--profile", "teachers": "--teacher",
    "trained_file": "--trained-file/--trained-sha256", "train_rows": "--train-rows", "validation_rows": "--validation-rows",
    "wire": "--wire-canonical/--wire-hash", "vocabulary": "--vocab", "summary": "--summary", "composition": "--composition", "known_issues": "--known-issue",
    "stop_text": "--stop-text", "context": "--context", "family_key": "--family-key", "split_rule": "--split-rule", "flag_key": "--flag-key", "flagged_rows": "--flagged-rows",
}  # fmt: skip


def _rule_key(rule: str | None) -> str | None:
    match = SPLIT_RULE.match(rule or "")
    return match["key"] if match else None


def version_of(facts: Mapping[str, Any], sizes: Mapping[str, int]) -> DataVersion:
    """The version ``facts`` state (:class:`registry.ops.dataset_add.VersionRequest`'s fields by name; those left out are
    not stated), with the trained file's size; a bad value is refused naming its option."""
    get = facts.get
    profile, trained = get("profile"), get("trained_file")
    data = {
        "version": get("version"), "date": get("date"), "thinking": get("thinking"), "profile": profile, "teachers": get("teachers"),
        "trained_file": {"path": trained, "sha256": str(get("trained_sha256") or "").lower(), "size": sizes.get(trained or "", 0)},
        "train_rows": get("train_rows"), "validation_rows": get("validation_rows"),
        "wire": {"canonical": get("wire_canonical"), "hash": str(get("wire_hash") or "").lower()}, "vocabulary": get("vocabulary"),
        "summary": get("summary") or Localized(), "composition": get("composition") or Localized(), "known_issues": get("known_issues") or Localized(),
        "stop_text": get("stop_text") or (PROFILES[profile].stop_text if profile in PROFILES else None), "context": get("context"),
        "family_key": get("family_key") or _rule_key(get("split_rule")), "split_rule": get("split_rule"),
        "flag_key": get("flag_key"), "flagged_rows": get("flagged_rows"),
    }  # fmt: skip
    return build(DataVersion, data, OPTIONS)
