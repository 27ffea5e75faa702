"""The known-bases catalog: official RWKV-7 base checkpoints by file name, sha256, source and vocab.

It ships with the package (``index.json`` at the repository's top level, an index with bases and
no entries).  ``add-base`` fills source and vocab from it, refuses a file whose hash contradicts
it, and says when a base is not in it; docs/formats.md says how a new official base gets in.
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import RegistryError
from ..core.models import Base, Index
from ..core.resources import catalog_path
from ..core.schemas import load_model


def load_catalog(path: Path | None = None) -> Index:
    path = path or catalog_path()
    return load_model(path, Index, str(path))


def known_base(catalog: Index, filename: str) -> Base | None:
    return next((b for b in catalog.bases if b.filename == filename), None)


def check_against_catalog(base: Base, catalog: Index) -> Base:
    """Fill source/vocab from the catalog and refuse a file whose hash the catalog contradicts."""
    known = known_base(catalog, base.filename)
    if known is None:
        return base
    if known.sha256 != base.sha256:
        raise RegistryError(
            "base.catalog-mismatch",
            base.filename,
            f"sha256 is {base.sha256} but the known-bases catalog says {known.sha256} (corrupt or partial download?)",
            "download the file again and compare with the catalog hash",
        )
    return base.model_copy(update={"source": base.source or known.source, "vocab": base.vocab or known.vocab})
