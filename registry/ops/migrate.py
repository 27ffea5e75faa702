"""``registry migrate``: bring a registry written by an older format_version to the current one.

Every other command refuses an older index.json with one line, "run `registry migrate`"
(:func:`registry.core.schemas.format_problem`).  This command rewrites it step by step, one
function per version (:data:`STEPS`, what changed in docs/formats.md, "index.json's format
versions"), checks the result against the current schema, and writes index.json, the card,
evaluation.json and SHA256SUMS in one transaction (core/atomic.py): a crash leaves the old
registry or the migrated one.  The other files must still be what SHA256SUMS says (as for every
writing command), so nothing changed behind the tool's back is laundered into the new checksums.
A ``model.sig`` signed the old bytes: migrate says it is now stale and leaves it for `registry sign`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..card.sync import rendered
from ..core.atomic import transaction
from ..core.errors import RegistryError
from ..core.models import INDEX_FORMAT_VERSION, Index
from ..core.names import INDEX_NAME, SIGNATURE_NAME, SUMS_NAME
from ..core.repo import Repo, is_dataset, render_index
from ..core.schemas import read_json, schema_errors
from ..core.sums import parse_sums
from ..gate.receipt import Receipt, gate_summary, receipt_path
from ..gate.seal import sealed_here
from ..index.derived import stage_derived

STALE_SIGNATURE = (
    "model.sig signed the files before the migration and would no longer match them; fix: run `registry sign "
    "--key KEY.pem` after migrating"
)


@dataclass(frozen=True)
class Migration:
    """What migrate did (or, with ``dry_run``, would do)."""

    from_version: int
    to_version: int
    changes: list[str] = field(default_factory=list)  # one line per change to index.json's content
    written: list[str] = field(default_factory=list)  # files whose bytes changed (a dry run: would change)
    signature_stale: bool = False
    dry_run: bool = False

    def lines(self) -> list[str]:
        if self.from_version == self.to_version:
            return [f"index.json is already format_version {self.to_version}: nothing to migrate"]
        verb = "would migrate" if self.dry_run else "migrated"
        lines = [f"{verb} index.json from format_version {self.from_version} to {self.to_version}", *self.changes]
        if self.written:
            lines.append(f"{'would write' if self.dry_run else 'wrote'} {', '.join(self.written)}")
        if (
            self.signature_stale and self.dry_run
        ):  # a real run: the write path itself says so (registry.core.staged_sums)
            lines.append(f"note: {STALE_SIGNATURE}")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "from_version": self.from_version,
            "to_version": self.to_version,
            "changes": self.changes,
            "written": self.written,
            "signature_stale": self.signature_stale,
            "dry_run": self.dry_run,
        }


def _gate_from_1(repo: Repo, where: str, gate: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A format 1 gate record without ``receipt`` (a path under .registry/ a clone never has).  The
    run's versions and figures come from the receipt when this installation's gate wrote it for
    these bytes; otherwise the record keeps what it said (verdict, device, GPU, date)."""
    rest = {k: v for k, v in gate.items() if k != "receipt"}
    sha = rest.get("file_sha256")
    path = receipt_path(repo.gates_dir, sha) if isinstance(sha, str) and len(sha) == 64 and sha.isalnum() else None
    if path is not None and path.is_file() and not path.is_symlink():
        try:
            receipt = Receipt.model_validate(read_json(path, repo.rel(path)))
        except (RegistryError, ValidationError):
            receipt = None
        if receipt is not None and receipt.file_sha256 == sha and sealed_here(receipt):
            return (
                gate_summary(receipt).model_dump(mode="json"),
                f"{where}: gate record: receipt path dropped, versions and figures taken from this "
                "installation's receipt",
            )
    return (
        rest,
        f"{where}: gate record: receipt path dropped (no receipt of this installation's gate for these "
        "bytes: versions and figures stay unrecorded)",
    )


def _from_1(repo: Repo, data: dict[str, Any]) -> list[str]:
    """format_version 1 → 2: a gate record never names ``receipt``; it holds ``versions`` and ``checks``."""
    changes = []
    for key in ("entries", "ggufs"):
        for item in data.get(key) or []:
            if isinstance(item, dict) and isinstance(item.get("gate"), dict) and "receipt" in item["gate"]:
                item["gate"], change = _gate_from_1(repo, str(item.get("path")), item["gate"])
                changes.append(change)
    data["format_version"] = 2
    return changes


# format_version N → N + 1, by N (docs/formats.md, "index.json's format versions")
STEPS: dict[int, Callable[[Repo, dict[str, Any]], list[str]]] = {1: _from_1}


def _migrated(repo: Repo) -> tuple[int, Index | None, list[str]]:
    """(the version index.json is in, the index in the current version or None when it already is, the changes)."""
    data = read_json(repo.refuse_link(repo.index_path), INDEX_NAME)
    version = data.get("format_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version:
        raise RegistryError(
            "index.not-a-registry",
            INDEX_NAME,
            "index.json names no format_version (it was not written by registry)",
            f"run `registry adopt {repo.root}`: it maps what it can and lists the rest",
        )
    if version > INDEX_FORMAT_VERSION:
        raise RegistryError(
            "index.newer-format",
            INDEX_NAME,
            f"written in format_version {version} by a newer rwkv-registry; this one reads "
            f"format_version {INDEX_FORMAT_VERSION}",
            "upgrade rwkv-registry (`pip install -U rwkv-registry`)",
        )
    if version == INDEX_FORMAT_VERSION:
        return version, None, []
    assert isinstance(data, dict)
    changes = []
    for step in range(version, INDEX_FORMAT_VERSION):
        changes += STEPS[step](repo, data)
    problems = schema_errors(data, Index.SCHEMA_KIND)
    if problems:
        where, message = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        fix = (
            f"index.json was not a valid format_version {version} index either: restore it from git (`git "
            "checkout -- index.json`), then run `registry migrate` again"
        )
        raise RegistryError(
            "migrate.invalid",
            INDEX_NAME,
            f"after migrating to format_version {INDEX_FORMAT_VERSION}: {where}: {message}{more}",
            fix,
        )
    return version, Index.model_validate(data), changes


def migrate(root: Any, dry_run: bool = False) -> Migration:
    """Migrate the registry at ``root`` to the current format_version (``dry_run``: say what would change, write
    nothing)."""
    repo = Repo.open(root)
    if is_dataset(repo.root):  # a dataset registry has had one format_version so far
        data = read_json(repo.index_path, INDEX_NAME)
        return Migration(data["format_version"], data["format_version"], dry_run=dry_run)
    stale_signature = (repo.root / SIGNATURE_NAME).is_file()
    version, index, changes = _migrated(repo)
    if index is None:  # already current: nothing is locked or written
        return Migration(version, version, dry_run=dry_run)
    if dry_run:
        stale = [state.name for state in rendered(repo, index) if not state.fresh]
        return Migration(
            version,
            INDEX_FORMAT_VERSION,
            changes,
            sorted([INDEX_NAME, *stale]) + [SUMS_NAME],
            stale_signature,
            dry_run=True,
        )
    old_sums = parse_sums(repo.read_bytes(repo.sums_path)) if repo.sums_path.is_file() else {}
    with transaction(repo.root) as txn:
        version, index, changes = _migrated(repo)  # again, under the lock
        if index is None:  # another process migrated it meanwhile
            return Migration(version, version)
        txn.write(INDEX_NAME, render_index(index))
        digests = stage_derived(repo, txn, index)
        written = sorted(
            rel for rel, sha in txn.staged_files().items() if rel != SUMS_NAME and old_sums.get(rel) != sha
        )
    if digests != old_sums:
        written.append(SUMS_NAME)
    return Migration(version, INDEX_FORMAT_VERSION, changes, written, stale_signature)
