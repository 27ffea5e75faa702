"""``registry describe``: per-weight and per-base metadata the card shows.

The target is one entry (its path; a safetensors twin stands for its source), every entry of a
method (``--method``), or a base (``--base``, known issues only).  A Transformers checkpoint (its
weight index or folder) takes ``--author-evaluation`` alone: the rest of its metadata is its
author's files (config.json, generation_config.json).  Each option replaces one field;
text options are in one language (``--lang``, or the card's only language).  ``--author-evaluation``
declares the author's evaluation.json beside the weight (read, never changed: docs/formats.md).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..core.author_evaluation import declare_author_evaluation
from ..core.errors import RegistryError
from ..core.evaluation import source_of
from ..core.models import (
    GIT_COMMIT_PATTERN,
    METHODS,
    Base,
    Checkpoint,
    DataRef,
    Entry,
    Index,
    Localized,
    PromptFormat,
    Serving,
    StopRules,
)
from ..core.repo import Repo, resolve_checkpoint, resolve_entry
from ..core.schemas import build
from ..index.arguments import require_text
from ..index.editing import card_language, edit_index, localized

OPTIONS = {
    "notes": "--notes",
    "known_issues": "--known-issue",
    "prompt_format": "--prompt-format",
    "prompt_example": "--prompt-example",
    "stop_tokens": "--stop-token",
    "stop_texts": "--stop-text",
    "keep_stop_text": "--keep-stop-text",
    "profile": "--profile",
    "sampling": "--sampling",
    "adapter_id": "--adapter-id",
    "parameters": "--parameters",
    "dtype": "--dtype",
    "dataset_repo": "--dataset-repo",
    "dataset_revision": "--dataset-revision",
    "author_evaluation": "--author-evaluation",
}
BASE_FIELDS = {"known_issues"}
DTYPES = ("bf16", "fp16", "fp32")


@dataclass(frozen=True)
class Description:
    """The fields to set; None leaves a field as it is."""

    notes: str | None = None
    known_issues: tuple[str, ...] | None = None
    prompt_format: str | None = None
    prompt_example: str | None = None
    stop_tokens: tuple[int, ...] | None = None
    stop_texts: tuple[str, ...] | None = None
    keep_stop_text: bool | None = None
    profile: str | None = None
    sampling: str | None = None
    adapter_id: str | None = None
    parameters: int | None = None
    dtype: str | None = None
    dataset_repo: str | None = None
    dataset_revision: str | None = None
    author_evaluation: bool | None = None  # declare (or drop) the author's evaluation.json beside the weight

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Target:
    """Exactly one of: an entry's path, a method, a base's name."""

    path: str | None = None
    method: str | None = None
    base: str | None = None


def _check(description: Description) -> dict[str, Any]:
    """The given fields, each checked on its own (text, commit sha, dtype) before anything is read."""
    given = description.given()
    if not given:
        raise RegistryError(
            "args.missing", "describe", "no field to set", "pass at least one option (see `registry describe --help`)"
        )
    for field in ("notes", "prompt_format", "prompt_example", "profile", "sampling", "adapter_id", "dataset_repo"):
        if field in given:
            require_text(given[field], OPTIONS[field])
    for field in ("known_issues", "stop_texts"):
        for text in given.get(field, ()):
            require_text(text, OPTIONS[field])
    revision = given.get("dataset_revision")
    if revision is not None and not re.fullmatch(GIT_COMMIT_PATTERN, revision):
        raise RegistryError(
            "args.bad-revision",
            "--dataset-revision",
            f"{revision!r} is not a 40-hex git commit sha",
            "pass the dataset repo's full commit sha (its Hub commit page, or `git rev-parse HEAD` in a clone)",
        )
    if given.get("dtype") not in (None, *DTYPES):
        raise RegistryError(
            "args.invalid",
            "--dtype",
            f"dtype {given['dtype']!r} is not one of {', '.join(DTYPES)}",
            "pass --dtype bf16, fp16 or fp32",
        )
    return given


def _entries(repo: Repo, index: Index, target: Target, given: dict[str, Any]) -> list[Entry]:
    if target.path is not None:
        return [source_of(index, resolve_entry(repo, index, target.path))]
    if target.method not in METHODS:
        raise RegistryError(
            "args.bad-method", "--method", f"{target.method!r} is not a method", f"pass --method {', '.join(METHODS)}"
        )
    entries = [e for e in index.entries if e.method == target.method and source_of(index, e) is e]
    if not entries:
        fields = ", ".join(OPTIONS[f] for f in given)
        raise RegistryError(
            "describe.no-such-method",
            "--method",
            f"the registry has no {target.method} weights, so {fields} would describe nothing",
            f"add {target.method} weights first, or pass "
            f"--method {' / '.join(sorted({e.method for e in index.entries})) or '…'}",
        )
    return entries


def _describe_base(index: Index, name: str, given: dict[str, Any], lang: str | None) -> Base:
    base = index.base_by_name(name)
    if base is None:
        raise RegistryError(
            "base.unknown", "--base", f"no base named {name!r} in index.json", "pass a base listed by `registry list`"
        )
    others = sorted(set(given) - BASE_FIELDS)
    if others:
        raise RegistryError(
            "args.invalid",
            OPTIONS[others[0]],
            f"{OPTIONS[others[0]]} describes weights, not a base",
            "name the weights: registry describe PATH, or --method METHOD",
        )
    base.known_issues = localized(
        base.known_issues, card_language(index, lang, "--known-issue"), list(given["known_issues"])
    )
    return base


def _updated(current: BaseModel | None, updates: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``current`` (none when unset) with ``updates`` applied, to build the new value from."""
    data: dict[str, Any] = current.model_dump() if current else {}
    data.update(updates)
    return data


def _describe_entry(index: Index, entry: Entry, given: dict[str, Any], lang: str | None) -> None:
    if "adapter_id" in given and entry.method != "miss":
        raise RegistryError(
            "args.invalid",
            "--adapter-id",
            f"{entry.path} is a {entry.method} weight; only MiSS adapters are registered under an adapter id",
            "drop --adapter-id, or name a MiSS adapter",
        )
    if "notes" in given:
        old = entry.notes if isinstance(entry.notes, Localized) else Localized()
        entry.notes = localized(old, card_language(index, lang, "--notes"), [given["notes"]])
    if "known_issues" in given:
        entry.known_issues = localized(
            entry.known_issues, card_language(index, lang, "--known-issue"), list(given["known_issues"])
        )
    if {"prompt_format", "prompt_example"} & set(given):
        prompt = _updated(
            entry.prompt, {k: given[f"prompt_{k}"] for k in ("format", "example") if f"prompt_{k}" in given}
        )
        if "format" not in prompt:
            raise RegistryError(
                "args.missing",
                "--prompt-format",
                f"{entry.path} has no prompt format for the example to follow",
                "pass --prompt-format too",
            )
        entry.prompt = build(PromptFormat, prompt, {"format": "--prompt-format", "example": "--prompt-example"})
    if {"stop_tokens", "stop_texts", "keep_stop_text"} & set(given):
        stop = _updated(entry.stop, {k: list(given[f"stop_{k}"]) for k in ("tokens", "texts") if f"stop_{k}" in given})
        if "keep_stop_text" in given:
            stop["consume"] = not given["keep_stop_text"]
        entry.stop = build(
            StopRules, stop, {"tokens": "--stop-token", "texts": "--stop-text", "consume": "--keep-stop-text"}
        )
    if {"profile", "sampling", "adapter_id"} & set(given):
        entry.serving = build(
            Serving,
            _updated(entry.serving, {k: given[k] for k in ("profile", "sampling", "adapter_id") if k in given}),
            OPTIONS,
        )
    if "parameters" in given:
        entry.parameters = given["parameters"]
    if "dtype" in given:
        entry.inference_dtype = given["dtype"]
    if {"dataset_repo", "dataset_revision"} & set(given):
        data = _updated(entry.data, {k: given[k] for k in ("dataset_repo", "dataset_revision") if k in given})
        if data.get("dataset_revision") and not data.get("dataset_repo"):
            raise RegistryError(
                "args.missing",
                "--dataset-repo",
                f"{entry.path} names no dataset repo for the revision to belong to",
                "pass --dataset-repo NAMESPACE/NAME too",
            )
        entry.data = build(DataRef, data, OPTIONS)


def _describe_checkpoint(repo: Repo, index: Index, checkpoint: Checkpoint, given: dict[str, Any]) -> None:
    """A checkpoint's one field describe sets: the author's evaluation.json it declares."""
    others = [OPTIONS[f] for f in given if f != "author_evaluation"]
    if others:
        raise RegistryError(
            "describe.checkpoint-field",
            checkpoint.path,
            f"{', '.join(others)} describe a registry entry; a Transformers checkpoint's metadata is its author's "
            "files (config.json, generation_config.json, the README), kept as written",
            "pass only --author-evaluation or --no-author-evaluation for a checkpoint",
        )
    declare_author_evaluation(repo.root, index, checkpoint, given["author_evaluation"])


def describe(root: Path, target: Target, description: Description, lang: str | None = None) -> list[str]:
    """Set the given fields on the target; the paths (or the base name) described."""
    given = _check(description)
    repo = Repo.open(root)

    def change(index: Index) -> list[str]:
        if target.base is not None:
            return [_describe_base(index, target.base, given, lang).name]
        if target.path is not None and (checkpoint := resolve_checkpoint(repo, index, target.path)) is not None:
            _describe_checkpoint(repo, index, checkpoint, given)
            return [checkpoint.path]
        entries = _entries(repo, index, target, given)
        for entry in entries:
            _describe_entry(index, entry, given, lang)
            if "author_evaluation" in given:
                declare_author_evaluation(repo.root, index, entry, given["author_evaluation"])
        return [e.path for e in entries]

    return edit_index(root, change)
