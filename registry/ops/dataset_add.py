"""``registry dataset add``: copy a version folder into ``<version>/``, after checking every file.

What the command states (row counts, the trained file and its sha256, the wire format, the
thinking mode, and the content facts: stop text, context, vocabulary, family key and split rule,
flagged rows; :mod:`registry.dataset.content`) is compared with what the copied files hold (:mod:`registry.dataset.versions`):
the files are copied into staging while they are hashed, the copies are checked, and only then
renamed into place with index.json, the card and SHA256SUMS in one transaction.  A refusal leaves
the registry byte-identical.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path

from ..core.atomic import transaction
from ..core.errors import Problem, RegistryError
from ..core.hashing.engine import Progress
from ..core.models import Localized, path_problem
from ..core.names import DATASET_TOKENS_NAME, INDEX_NAME
from ..core.pinned import copy_hashing, pinned
from ..core.repo import Repo, render_index
from ..dataset import store
from ..dataset.content import TokenCache
from ..dataset.layout import place_in_version
from ..dataset.models import DataVersion
from ..dataset.versions import version_of, version_problems
from ..index.arguments import require_name


@dataclass
class VersionRequest:
    source: Path  # the version folder as the packer left it (seed 002: final-20261013)
    version: str
    date: date
    thinking: str
    teachers: list[str]
    trained_file: str  # inside the folder, e.g. dataset/train/segments-1-41.jsonl
    trained_sha256: str
    train_rows: int
    validation_rows: int
    wire_canonical: str
    wire_hash: str
    vocabulary: str
    profile: str | None = None
    stop_text: str | None = None  # default: the profile's (g1k, g1k-think: \n\nUser:)
    context: int | None = None
    family_key: str | None = None  # default: the split rule's
    split_rule: str | None = None
    flag_key: str | None = None
    flagged_rows: int | None = None
    summary: Localized = field(default_factory=Localized)
    composition: Localized = field(default_factory=Localized)
    known_issues: Localized = field(default_factory=Localized)


def folder_files(source: Path) -> list[str]:
    """Every file of the version folder (relative POSIX paths), refusing links, special files and
    files with no place in a version folder."""
    if not source.is_dir() or source.is_symlink():
        raise RegistryError(
            "dataset.not-a-folder",
            source,
            "is not a folder",
            "pass the version's folder (the one holding dataset/train/)",
        )
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(source, followlinks=False):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(source).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise RegistryError(
                    "dataset.symlink", path, "is a symlink (links are never followed)", "replace it with the real file"
                )
            if stat.S_ISDIR(mode):
                continue
            why = path_problem(rel) or (None if stat.S_ISREG(mode) else "not a regular file") or place_in_version(rel)
            if why:
                raise RegistryError(
                    "dataset.stray-file", path, why, "move the file to its place in the folder or out of it"
                )
            files.append(rel)
    return sorted(files)


def _from_source(problem: Problem, version: str, source: Path) -> Problem:
    """A problem of the staged copy, naming the user's file (``<version>/x`` -> ``<source>/x``)."""
    if problem.file and (problem.file == version or problem.file.startswith(f"{version}/")):
        return replace(problem, file=str(source) + problem.file[len(version) :])
    return problem


def add_version(root: Path, request: VersionRequest, progress: Progress | None = None) -> DataVersion:
    """Check and register one version folder as ``<version>/`` (see the module docstring)."""
    require_name(request.version, "data version", "--version")
    repo = Repo.open(root)
    files = folder_files(Path(request.source))
    staged: dict[str, Path] = {}
    try:
        with transaction(repo.root) as txn:
            index = store.index_to_change(repo)
            if index.version(request.version):
                raise RegistryError(
                    "dataset.version-exists",
                    request.version,
                    "the version is already in the registry",
                    "a changed version is a new version: pass another --version",
                )
            digests, sizes = {}, {}
            for number, rel in enumerate(files):
                staged[rel] = txn.staging / f"dataset-{os.getpid()}-{number}.part"
                with pinned(Path(request.source) / rel, "version file") as source:
                    digests[rel] = copy_hashing(source, staged[rel], progress)
                    sizes[rel] = source.stat.st_size
            version = version_of(vars(request), sizes)
            tokens = TokenCache(repo.private / DATASET_TOKENS_NAME)
            problems = [
                _from_source(p, version.version, request.source)
                for p in version_problems(version, digests, lambda rel: staged[rel], progress, tokens)
            ]
            other = next((v for v in index.versions if v.trained_file.sha256 == version.trained_file.sha256), None)
            if other is not None:  # one trained file is one version's: weights cite their data by its sha256
                what = f"these bytes are version {other.version}'s trained file already"
                problems.append(
                    Problem(
                        "dataset.duplicate-data",
                        f"{request.source}/{request.trained_file}",
                        what,
                        "pass the file this version's weights were trained on: the same data is the same version",
                    )
                )
            if problems:
                raise RegistryError.of(problems)  # one line per problem, each naming its file
            for rel in files:
                txn.move(staged[rel], f"{version.version}/{rel}", digests[rel])
            index.versions.append(version)
            txn.write(INDEX_NAME, render_index(index))
            store.stage_derived(repo, txn, index)
    except BaseException:
        for path in staged.values():
            path.unlink(missing_ok=True)
        raise
    return version
