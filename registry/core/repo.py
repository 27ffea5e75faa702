"""A registry folder on disk: where its files live and how its index is read and rendered."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from .atomic import finish_interrupted
from .errors import Problem, RegistryError
from .gitattributes import lfs_line
from .models import DATASET_KIND, Checkpoint, Entry, Index
from .names import (
    CARD_NAME,
    GATES_DIR,
    INDEX_NAME,
    LFS_SUFFIXES,
    PRIVATE_DIR,
    PUBLISHED_DIR,
    STAT_CACHE_NAME,
    SUMS_NAME,
    XET_CACHE_NAME,
)
from .registry_root import find_root
from .schemas import format_problem, load_model, read_json

# Weights and GGUF files go through LFS on the Hub; the card and JSON stay plain git blobs.
GITATTRIBUTES = "".join(f"{lfs_line(suffix)}\n" for suffix in LFS_SUFFIXES)


def render_index(index: BaseModel) -> bytes:
    """Deterministic bytes for index.json (a model registry's or a dataset registry's): stable key order, 2-space
    indent, UTF-8, final LF, finite numbers only."""
    data = index.model_dump(mode="json")
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:  # NaN or Infinity: the models refuse them, so only a bug gets here
        raise RegistryError(
            "json.not-finite",
            INDEX_NAME,
            f"index.json would hold a number JSON cannot express ({exc})",
            "record finite numbers only",
        ) from exc
    return (text + "\n").encode("utf-8")


@dataclass(frozen=True)
class Repo:
    root: Path

    @classmethod
    def open(cls, root: Path | str, must_exist: bool = True) -> Repo:
        """The registry holding ``root``: ``root`` itself or, as git finds its repository, the
        nearest folder above it with an index.json (:func:`find_root`)."""
        root = Path(root).absolute()
        if not root.is_dir():
            raise RegistryError("layout.not-a-registry", root, "no such directory", "run `registry init DIR` first")
        root = find_root(root) or root
        repo = cls(root)
        finish_interrupted(root)  # before anything reads the registry
        if must_exist and not repo.index_path.is_file():
            raise no_registry(root).exception()
        return repo

    @property
    def index_path(self) -> Path:
        return self.root / INDEX_NAME

    @property
    def sums_path(self) -> Path:
        return self.root / SUMS_NAME

    @property
    def card_path(self) -> Path:
        return self.root / CARD_NAME

    @property
    def private(self) -> Path:
        return self.root / PRIVATE_DIR

    @property
    def stat_cache_path(self) -> Path:
        return self.private / STAT_CACHE_NAME

    @property
    def xet_cache_path(self) -> Path:
        return self.private / XET_CACHE_NAME

    @property
    def published_dir(self) -> Path:
        return self.private / PUBLISHED_DIR

    @property
    def gates_dir(self) -> Path:
        return self.private / GATES_DIR

    def refuse_link(self, path: Path) -> Path:
        """``path``, refused when it is a symlink: the tool never reads or writes through one."""
        if path.is_symlink():
            raise RegistryError(
                "layout.symlink",
                self.rel(path),
                "is a symlink (links are never followed)",
                "replace the link with the real file",
            )
        return path

    def read_bytes(self, path: Path) -> bytes:
        """A registry file's bytes, never through a symlink."""
        fd = os.open(self.refuse_link(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def load_index(self) -> Index:
        try:
            return load_model(self.refuse_link(self.index_path), Index, INDEX_NAME)
        except RegistryError as err:
            if err.code == "schema.invalid" and is_dataset(self.root):
                raise RegistryError(
                    "layout.dataset-registry",
                    INDEX_NAME,
                    'this is a dataset registry ("kind": "dataset"), and the command works on model registries',
                    "use the `registry dataset …` commands here, or pass the model registry with -C",
                ) from err
            raise

    def require_current_format(self) -> None:
        """Refuse an index.json of another format_version ("run registry migrate"), for a command
        that works on the files without reading the index (``sums``)."""
        if not self.index_path.is_file() or self.index_path.is_symlink():
            return
        try:
            data = read_json(self.index_path, INDEX_NAME)
        except RegistryError:  # unreadable: validate reports it; sums does not parse the index
            return
        problem = format_problem(data, Index, INDEX_NAME)
        if problem:
            raise RegistryError.of([problem])

    def rel(self, path: Path) -> str:
        return path.absolute().relative_to(self.root).as_posix()


def is_dataset(root: Path) -> bool:
    """True when ``root/index.json`` declares ``"kind": "dataset"`` (anything unreadable: False,
    and the model registry's checks say what is wrong with it)."""
    path = Path(root) / INDEX_NAME
    if not path.is_file() or path.is_symlink():
        return False
    try:
        data = read_json(path, INDEX_NAME)
    except RegistryError:
        return False
    return isinstance(data, dict) and data.get("kind") == DATASET_KIND


@dataclass(frozen=True)
class NoRegistry:
    """Why no registry was found at a folder (nor above it), and which command makes one."""

    code: str
    file: Path
    message: str
    fix: str

    def problem(self) -> Problem:
        return Problem(self.code, str(self.file), self.message, self.fix)

    def exception(self) -> RegistryError:
        return RegistryError(self.code, self.file, self.message, self.fix)


def no_registry(root: Path) -> NoRegistry:
    """The finding for a folder with no index.json at or above it: init for an empty folder, adopt
    (or init, where only files init keeps are there) for one that holds files."""
    if not any(root.iterdir()):
        return NoRegistry("layout.empty", root, "the directory is empty", f"run `registry init {root}`")
    return NoRegistry(
        "layout.no-index",
        root / INDEX_NAME,
        "index.json is missing here and in every folder above",
        f"to bring in the files already here run `registry adopt {root}` (or `registry init {root}` when it "
        "holds only README.md, LICENSE and git files)",
    )


def resolve_entry(repo: Repo, index: Index, path: str) -> Entry:
    """An entry by registry-relative path (or a path inside the registry)."""
    candidate = Path(path)
    if candidate.is_absolute() or candidate.exists():
        try:
            path = candidate.absolute().relative_to(repo.root).as_posix()
        except ValueError as exc:
            raise RegistryError(
                "entry.outside", path, "the path is outside the registry", "pass a path inside the registry"
            ) from exc
    entry = index.entry_by_path(path)
    if entry is None:
        raise RegistryError(
            "entry.unknown", path, "no such entry in index.json", "pass a path listed by `registry list`"
        )
    return entry


def resolve_checkpoint(repo: Repo, index: Index, path: str) -> Checkpoint | None:
    """The Transformers checkpoint ``path`` names (its weight index or its folder, registry-relative
    or a path on disk: absolute, or from here), or None."""
    if path and (found := index.checkpoint_by_path(path)) is not None:
        return found
    candidate = Path(path)
    if not (candidate.is_absolute() or candidate.exists()):
        return None
    try:
        rel = repo.rel(candidate)
    except ValueError:
        return None  # outside the registry: resolve_entry says so
    return index.checkpoint_by_path("" if rel == "." else rel)
