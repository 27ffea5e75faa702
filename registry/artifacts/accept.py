"""What a command accepts into the registry: a base checkpoint fingerprinted as index.json records
it (add-base, adopt), and a weight that fits its base (add, adopt, smoke, validate)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.errors import RegistryError
from ..core.hashing import hash_file
from ..core.hashing.engine import Progress
from ..core.models import Base
from ..core.pinned import pinned
from .inspect import Inspection, check_fits, inspect_weights


def accept_weight(path: Path, method: str, base: Base, shown: str | Path) -> Inspection:
    """add's acceptance rule, for every command that registers a weight (add, adopt): the file is
    inspected without running it (pickles with weights_only) and must be of ``method``'s kind and
    fit ``base`` (State shapes, MiSS fingerprint, a full checkpoint's architecture).  Refusals
    name the file ``shown``."""
    inspection = inspect_weights(path)
    check_fits(method, inspection, base, shown)
    return inspection


def content_version(inspection: Inspection) -> str | None:
    """The MiSS adapter's content_version (what the serving endpoint reports), else None."""
    return inspection.miss.content_version if inspection.miss else None


@dataclass
class BaseRequest:
    path: Path | None
    filename: str
    source: str | None = None
    vocab: str | None = None
    sha256: str | None = None  # declared (--metadata-only) or expected


def fingerprint_base(request: BaseRequest, name: str, expected: str | None, progress: Progress | None) -> Base:
    """The base as recorded: inspected and hashed through one open of the file (or declared by hash)."""
    if request.path is None:
        if expected is None:
            raise RegistryError(
                "args.missing",
                request.filename,
                "--metadata-only needs --sha256",
                "pass the published sha256 with --sha256",
            )
        return Base(name=name, filename=request.filename, source=request.source, sha256=expected, vocab=request.vocab)
    with pinned(request.path, "base checkpoint") as source:
        inspection = inspect_weights(source.stable)
        if inspection.kind != "checkpoint" or inspection.architecture is None:
            raise RegistryError(
                "base.not-checkpoint",
                source.stable,
                f"this is a {inspection.kind} file, not an RWKV-7 checkpoint",
                "pass the base .pth",
            )
        sha = hash_file(source.stable, progress)
    if expected and expected != sha:
        raise RegistryError(
            "base.sha-mismatch",
            request.path,
            f"sha256 is {sha}, not the expected {request.sha256}",
            "download the file again",
        )
    return Base(
        name=name,
        filename=request.filename,
        source=request.source,
        sha256=sha,
        vocab=request.vocab,
        architecture=inspection.architecture,
        size=source.stat.st_size,
    )
