"""``registry add-base``: hash and inspect a base checkpoint, check it against the catalog, create ``<base-stem>/``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..arguments import require_name, require_sha
from ..artifacts.inspect import inspect_weights
from ..atomic import transaction
from ..catalog import check_against_catalog, known_base, load_catalog
from ..derived import stage_derived
from ..errors import RegistryError
from ..hashing import hash_file
from ..hashing.engine import Progress
from ..models import Base, Index
from ..repo import INDEX_NAME, Repo, render_index


@dataclass
class BaseRequest:
    path: Path | None
    filename: str
    source: str | None = None
    vocab: str | None = None
    sha256: str | None = None  # declared (--metadata-only) or expected



@dataclass(frozen=True)
class AddedBase:
    base: Base
    in_catalog: bool  # False: not a known official base (the CLI says so)


def add_base(root: Path, request: BaseRequest, progress: Progress | None = None, catalog: Index | None = None) -> AddedBase:
    """Register a base checkpoint (its file stays where it is; only its fingerprint is recorded)."""
    repo = Repo.open(root)
    index = repo.load_index()
    if not request.filename.endswith(".pth"):
        raise RegistryError("base.not-pth", request.filename, "a base checkpoint must be a .pth file", "pass the official .pth file")
    name = request.filename[: -len(".pth")]
    require_name(name, "base name", "add-base")
    architecture = None
    size = None
    if request.path is not None:
        inspection = inspect_weights(request.path)
        if inspection.kind != "checkpoint" or inspection.architecture is None:
            raise RegistryError("base.not-checkpoint", request.path, f"this is a {inspection.kind} file, not an RWKV-7 checkpoint", "pass the base .pth")
        architecture = inspection.architecture
        size = request.path.stat().st_size
        sha = hash_file(request.path, progress)
        if request.sha256 and require_sha(request.sha256, "--sha256") != sha:
            raise RegistryError("base.sha-mismatch", request.path, f"sha256 is {sha}, not the expected {request.sha256}", "download the file again")
    else:
        if not request.sha256:
            raise RegistryError("args.missing", request.filename, "--metadata-only needs --sha256", "pass the published sha256 with --sha256")
        sha = require_sha(request.sha256, "--sha256")
    base = Base(name=name, filename=request.filename, source=request.source, sha256=sha, vocab=request.vocab, architecture=architecture, size=size)
    catalog = catalog if catalog is not None else load_catalog()
    base = check_against_catalog(base, catalog)
    for existing in index.bases:
        if existing.name == name or existing.sha256 == sha:
            raise RegistryError("base.exists", request.filename, f"base already registered as {existing.name} ({existing.sha256[:12]}…)", "nothing to do; old bases are never replaced")
    index.bases.append(base)
    with transaction(repo.root) as txn:
        txn.mkdir(name)
        txn.write(INDEX_NAME, render_index(index))
        stage_derived(repo, txn, index, progress)
    return AddedBase(base, known_base(catalog, base.filename) is not None)
