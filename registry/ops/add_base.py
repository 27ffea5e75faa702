"""``registry add-base``: hash and inspect a base checkpoint, check it against the catalog, create ``<base-stem>/``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..artifacts.accept import BaseRequest, fingerprint_base
from ..core.atomic import transaction
from ..core.errors import RegistryError
from ..core.hashing.engine import Progress
from ..core.models import Base, Index
from ..core.names import DOCS_DIR, INDEX_NAME
from ..core.repo import Repo, render_index
from ..index.arguments import require_name, require_sha
from ..index.catalog import check_against_catalog, known_base, load_catalog
from ..index.derived import stage_derived
from ..index.rules import index_to_change


@dataclass(frozen=True)
class AddedBase:
    base: Base
    in_catalog: bool  # False: not a known official base (the CLI says so)


def add_base(
    root: Path, request: BaseRequest, progress: Progress | None = None, catalog: Index | None = None
) -> AddedBase:
    """Register a base checkpoint (its file stays where it is; only its fingerprint is recorded)."""
    repo = Repo.open(root)
    if not request.filename.endswith(".pth"):
        raise RegistryError(
            "base.not-pth", request.filename, "a base checkpoint must be a .pth file", "pass the official .pth file"
        )
    name = request.filename[: -len(".pth")]
    require_name(name, "base name", "add-base")
    if name == DOCS_DIR:
        raise RegistryError(
            "base.reserved-name",
            request.filename,
            f"{DOCS_DIR}/ is the registry's documentation folder",
            "rename the base file",
        )
    expected = require_sha(request.sha256, "--sha256") if request.sha256 else None
    catalog = catalog if catalog is not None else load_catalog()
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        base = check_against_catalog(fingerprint_base(request, name, expected, progress), catalog)
        for existing in index.bases:
            if existing.name == name or existing.sha256 == base.sha256:
                raise RegistryError(
                    "base.exists",
                    request.filename,
                    f"base already registered as {existing.name} ({existing.sha256[:12]}…)",
                    "nothing to do; old bases are never replaced",
                )
        index.bases.append(base)
        txn.mkdir(name)
        txn.write(INDEX_NAME, render_index(index))
        stage_derived(repo, txn, index, progress)
    return AddedBase(base, known_base(catalog, base.filename) is not None)
