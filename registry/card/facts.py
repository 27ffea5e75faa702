"""What the card shows that index.json does not hold: the train.json of each data version, where
each MiSS ``.pth`` keeps its ``miss.json``, and the author's evaluation.json an entry declares.

All are read from the registry's files (from the transaction's staged bytes when the running
command is adding them), without torch: train.json and evaluation.json with their readers, the zip's member
names with :mod:`zipfile`.  A file that cannot be read is left out; ``validate`` reports it.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..artifacts.miss import MANIFEST_MEMBER, torch_zip_folder
from ..core.author_evaluation import AuthorEvaluation, declarations, read_author_evaluation
from ..core.errors import RegistryError
from ..core.models import Index
from ..core.names import TRAIN_JSON
from ..core.repo import Repo
from ..core.train import TrainFacts, read_train

Locate = Callable[[str], Path | None]  # registry-relative path -> where its bytes are (None: nowhere to read)


@dataclass(frozen=True)
class TreeFacts:
    trains: dict[str, TrainFacts] = field(default_factory=dict)  # by data-version directory, e.g. base/miss/v2.1
    manifests: dict[str, str] = field(
        default_factory=dict
    )  # MiSS .pth path -> its miss.json member, e.g. adapter-final/miss.json
    evaluations: dict[str, AuthorEvaluation] = field(default_factory=dict)  # by the file's path


def version_dir(path: str) -> str:
    """``<base>/<method>/<data-version>`` of an entry path; "" for a weight at the root."""
    return "/".join(path.split("/")[:3]) if "/" in path else ""


def train_of(directory: str) -> str:
    """The train.json of a :func:`version_dir` (the root's for a root weight)."""
    return f"{directory}/{TRAIN_JSON}" if directory else TRAIN_JSON


def _train(path: Path | None, rel: str) -> TrainFacts | None:
    if path is None or not path.is_file():
        return None
    try:
        return read_train(path, rel)
    except RegistryError:
        return None


def _evaluation(path: Path | None, rel: str) -> AuthorEvaluation | None:
    if path is None or not path.is_file():
        return None
    try:
        return read_author_evaluation(path, rel)
    except RegistryError:
        return None


def _manifest_member(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            return f"{torch_zip_folder(archive, path)}/{MANIFEST_MEMBER}"
    except (OSError, zipfile.BadZipFile, RegistryError):
        return None


def read_facts(index: Index, locate: Locate) -> TreeFacts:
    trains = {
        d: t
        for d in sorted({version_dir(e.path) for e in index.entries})
        if (t := _train(locate(train_of(d)), train_of(d)))
    }
    manifests = {
        e.path: m
        for e in index.entries
        if e.method == "miss" and e.format == "pth" and (m := _manifest_member(locate(e.path)))
    }
    evaluations = {rel: found for rel in declarations(index) if (found := _evaluation(locate(rel), rel))}
    return TreeFacts(trains, manifests, evaluations)


def on_disk(repo: Repo) -> Locate:
    """Files as they are in the registry; a symlink is never followed (it reads as missing)."""
    return lambda rel: None if (repo.root / rel).is_symlink() else repo.root / rel
