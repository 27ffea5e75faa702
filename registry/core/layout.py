"""Where files may live in a registry, as pure functions of relative paths.

``<base>/<method>/<data-version>/<file>`` for State and full weights, with one more directory
level for a run (``miss/v2.1/r16-lr2e-5-e2/adapter-final.pth``).  A full fine-tune may also sit at
the root under the name its author gave it (seed 000's ``rwkv-final.pth``) when index.json declares
it: an entry whose path is the bare file name, its base, method ``full`` and data version recorded
as the entry's fields, with its train.json at the root too (:func:`declared_root`).  The names come from
:mod:`registry.core.names`; the walk of the tree on disk is :mod:`registry.core.tree`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import Problem
from .models import DATA_VERSION_PATTERN, METHODS, NAME_PATTERN, Index
from .names import (
    DOCS_DIR,
    EVALUATION_NAME,
    EXCLUDED_FILES,
    EXCLUDED_TOPS,
    GGUF_DIR,
    GGUF_SUFFIX,
    HF_DIR,
    MODELFILE_SUFFIX,
    ROOT_FILES,
    SHARD_INDEX,
    TRAIN_JSON,
    WEIGHT_SUFFIXES,
)

ROOT_FIX = "only index.json, README.md, evaluation.json, LICENSE, NOTICE, CITATION.cff and docs/ belong at the root: move documents into docs/, delete anything else"


def is_excluded(rel: str) -> bool:
    """Paths SHA256SUMS and the layout ignore: itself, the signature that covers it (``model.sig``),
    git's files (``.git/``, ``.gitignore``, ``.gitmodules``, ``.github/``), the pre-commit
    configuration that runs our hooks, the tool's private folder."""
    return rel in EXCLUDED_FILES or rel.split("/", 1)[0] in EXCLUDED_TOPS


def is_weight(rel: str) -> bool:
    return rel.endswith(WEIGHT_SUFFIXES)


@dataclass(frozen=True)
class Placement:
    """What a path means in the layout: its base, method, data version and optional run."""

    base: str
    method: str
    version: str
    run: str | None
    name: str
    root: bool = False  # a declared root weight (or the root train.json beside it)

    @property
    def version_dir(self) -> str:
        """The folder of its data version; a root weight's exports go there (nothing else does)."""
        return f"{self.base}/{self.method}/{self.version}"

    @property
    def train_json(self) -> str:
        """The train.json that describes it: the root's for a root weight."""
        return TRAIN_JSON if self.root else f"{self.version_dir}/{TRAIN_JSON}"


def declared_root(index: Index) -> dict[str, Placement]:
    """The root weights index.json declares (entries whose path has no folder), placed by their
    fields; a root train.json belongs to them when there is one.  Only a full fine-tune may sit at
    the root (index rules report the others)."""
    names = {b.sha256: b.name for b in index.bases}
    declared = {}
    for entry in index.entries:
        if "/" not in entry.path and is_weight(entry.path) and entry.method == "full" and entry.base_sha256 in names:
            declared[entry.path] = Placement(
                names[entry.base_sha256], "full", entry.data.version, None, entry.path, root=True
            )
    return declared


def place(rel: str, bases: set[str], declared: dict[str, Placement] | None = None) -> Placement | Problem | None:
    """Classify a file path: a Placement, None for an allowed root file, or a Problem;
    ``declared``: the root weights index.json declares (:func:`declared_root`)."""
    parts = rel.split("/")
    if rel not in ROOT_FILES and any(part.startswith(".") for part in parts):
        return Problem(
            "layout.hidden",
            rel,
            "a hidden file or folder, which git-aware tools and reviewers easily miss",
            "remove it: a registry holds no hidden files but .gitattributes",
        )
    if len(parts) == 1:
        if rel in ROOT_FILES:
            return None
        if declared and rel in declared:
            return declared[rel]
        if declared and rel == TRAIN_JSON:
            first = declared[min(declared)]
            return Placement(first.base, first.method, first.version, None, TRAIN_JSON, root=True)
        fix = "register it under its base with `registry add`" if is_weight(rel) else ROOT_FIX
        return Problem("layout.stray-file", rel, "unexpected file at the registry root", fix)
    if parts[0] == DOCS_DIR:
        return None
    if parts[0] not in bases:
        fix = (
            f"run `registry add-base {parts[0]}.pth` if its weights were trained on that base"
            if is_weight(rel)
            else f"move documents into {DOCS_DIR}/, or delete the directory"
        )
        return Problem("layout.unknown-base-dir", rel, f"directory {parts[0]!r} is not a base in index.json", fix)
    if export_folder(rel) is not None:
        return None  # a file of a Transformers export: validate checks it against the export listing it
    if gguf_folder(rel) is not None:
        return None  # a GGUF file: validate checks it against its record in index.json
    if len(parts) < 4:
        return Problem(
            "layout.stray-file",
            rel,
            "file outside a <method>/<data-version>/ directory",
            "move it into <base>/<method>/<data-version>/",
        )
    method, version = parts[1], parts[2]
    if method not in METHODS:
        return Problem(
            "layout.unknown-method",
            rel,
            f"method directory {method!r} is not one of {', '.join(METHODS)}",
            "rename the directory to state, miss or full",
        )
    if not re.match(DATA_VERSION_PATTERN, version):
        return Problem(
            "layout.bad-data-version",
            rel,
            f"data version {version!r} does not look like v1.41 or v2.1",
            "rename the directory to v<major>[.<minor>]",
        )
    if len(parts) == 4:
        return _place_in_version_dir(rel, parts)
    if len(parts) == 5 and method in ("miss", "full") and re.match(NAME_PATTERN, parts[3]):
        if is_weight(parts[4]) or parts[4] in (SHARD_INDEX, EVALUATION_NAME):
            return Placement(parts[0], method, version, parts[3], parts[4])
        return Problem(
            "layout.stray-file",
            rel,
            "only weight files (and the author's evaluation.json) belong in a run directory",
            "move train.json and notes to the data-version directory, delete other files",
        )
    return Problem(
        "layout.stray-file",
        rel,
        "path is deeper than <base>/<method>/<data-version>/[<run>/]<file>",
        "move the file to its canonical place with `registry add`",
    )


def _place_in_version_dir(rel: str, parts: list[str]) -> Placement | Problem:
    base, method, version, name = parts
    if name in (TRAIN_JSON, EVALUATION_NAME):  # an author's evaluation.json: validate checks an entry declares it
        return Placement(base, method, version, None, name)
    if method == "miss":
        return Problem(
            "layout.stray-file",
            rel,
            "MiSS adapters live in a run directory",
            f"move it to {base}/miss/{version}/<run>/{name} with `registry add --run NAME`",
        )
    if is_weight(name) or (method == "full" and name == SHARD_INDEX):
        return Placement(base, method, version, None, name)
    return Problem(
        "layout.stray-file",
        rel,
        "not a weight file, train.json or the author's evaluation.json",
        "delete it or keep it outside the registry",
    )


def export_folder(rel: str) -> str | None:
    """The Transformers export folder a file lies in, or None: ``<base>/hf/<file>`` (a base's),
    ``<base>/full/<data-version>/[<run>/]hf/<file>`` (a full entry's, beside it),
    ``<base>/miss/<data-version>/<run>/hf/<file>`` (a MiSS adapter's PEFT folder, beside it) or
    ``<base>/state/<data-version>/hf/<state-stem>/<file>`` (a State's, one folder per State of the
    data version)."""
    parts = rel.split("/")
    beside_entry = (len(parts) in (5, 6) and parts[1] == "full") or (len(parts) == 6 and parts[1] == "miss")
    if (len(parts) == 3 and parts[1] == HF_DIR) or (beside_entry and parts[-2] == HF_DIR):
        return "/".join(parts[:-1])
    if len(parts) == 6 and parts[1] == "state" and parts[3] == HF_DIR:
        return "/".join(parts[:-1])
    return None


def _entry_folder(base: str, entry_path: str, version: str | None) -> tuple[str, str]:
    """The folder an entry's exports go beside and its file name: a root weight's go where the
    layout would have put it, ``<base>/full/<data-version>/`` (the root holds only what its author
    put there)."""
    if "/" not in entry_path:
        assert version is not None, "a root weight's exports need its data version"
        return f"{base}/full/{version}", entry_path
    folder, name = entry_path.rsplit("/", 1)
    return folder, name


def export_path(base: str, entry_path: str | None = None, method: str | None = None, version: str | None = None) -> str:
    """Where a base's (``entry_path`` None), a full entry's, a MiSS adapter's or a State's
    (``method`` "state") export lives (``version``: the entry's data version, for a root weight)."""
    if not entry_path:
        return f"{base}/{HF_DIR}"
    folder, name = _entry_folder(base, entry_path, version)
    if method == "state":
        return f"{folder}/{HF_DIR}/{name.rsplit('.', 1)[0]}"
    return f"{folder}/{HF_DIR}"


def gguf_folder(rel: str) -> str | None:
    """The GGUF folder a file lies in, or None: ``<base>/gguf/<file>`` (a base's),
    ``<base>/full/<data-version>/[<run>/]gguf/<file>`` (a full entry's) or
    ``<base>/miss/<data-version>/<run>/gguf/<file>`` (a MiSS adapter merged into its base)."""
    parts = rel.split("/")
    beside_entry = (len(parts) in (5, 6) and parts[1] == "full") or (len(parts) == 6 and parts[1] == "miss")
    if (len(parts) == 3 and parts[1] == GGUF_DIR) or (beside_entry and parts[-2] == GGUF_DIR):
        return "/".join(parts[:-1])
    return None


def gguf_path(base: str, entry_path: str | None, gguf_type: str, version: str | None = None) -> str:
    """Where the GGUF of a base (``entry_path`` None) or of an entry, of one type, lives:
    ``<folder>/gguf/<stem>-<TYPE>.gguf`` (a MiSS adapter's stem gets ``-merged``; ``version``: the
    entry's data version, for a root weight)."""
    if not entry_path:
        return f"{base}/{GGUF_DIR}/{base}-{gguf_type.upper()}{GGUF_SUFFIX}"
    folder, name = _entry_folder(base, entry_path, version)
    stem = name.rsplit(".", 1)[0] + ("-merged" if folder.split("/")[1] == "miss" else "")
    return f"{folder}/{GGUF_DIR}/{stem}-{gguf_type.upper()}{GGUF_SUFFIX}"


def modelfile_path(gguf_rel: str) -> str:
    """The Ollama Modelfile beside a GGUF file: ``<folder>/gguf/<stem>-<TYPE>.Modelfile``."""
    return gguf_rel.removesuffix(GGUF_SUFFIX) + MODELFILE_SUFFIX


def canonical_path(base: str, method: str, version: str, filename: str, run: str | None = None) -> str:
    parts = [base, method, version] + ([run] if run else []) + [filename]
    return "/".join(parts)
