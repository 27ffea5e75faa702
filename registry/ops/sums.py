"""``registry sums``: rewrite (or check) SHA256SUMS for the files on disk."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..core.names import SUMS_NAME
from ..core.validation_result import Validation
from ..core.verdict import vouching

if TYPE_CHECKING:
    from ..core.hashing.engine import Progress


def write_sums(root: Path, progress: Progress | None = None) -> dict[str, str]:
    from ..core.atomic import transaction  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)
    from ..core.repo import Repo  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)
    from ..core.staged_sums import stage_sums  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)

    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        repo.require_current_format()  # SHA256SUMS of an older registry is migrate's to write
        return stage_sums(repo, txn, progress, absorb=True)


def check_sums(root: Path, progress: Progress | None = None, require_bytes: bool = False) -> Validation:
    """validate's findings about SHA256SUMS and the files it lists, and any about the file itself
    (a symlinked SHA256SUMS is never read: it could vouch for anything).  Git LFS pointers are
    compared by their oid (pointer mode) unless ``require_bytes``.  On a tree unchanged since a clean
    validate or check (:mod:`registry.core.verdict`): clean, without reading a file."""
    verdicts = vouching(root) if not require_bytes else None
    if verdicts is not None:
        for command in ("validate", "sums-check"):
            kept = Validation.from_verdict(verdicts.recall(command))
            if kept is not None:
                return Validation([], kept.pointers)
    from .validate import validate_report  # models, schemas and templates: only for a tree that changed  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)

    report = validate_report(root, progress=progress, require_bytes=require_bytes, signature=False)
    checked = Validation(
        [p for p in report.problems if p.code.startswith(("sums.", "lfs.")) or p.file == SUMS_NAME], report.pointers
    )
    if verdicts is not None and not checked.problems:
        verdicts.remember("sums-check", checked.verdict())
    return checked
