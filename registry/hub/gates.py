"""Publish's gate rule: no weight reaches the Hub without a passing receipt for exactly its bytes.

Only entries whose bytes are not on the Hub yet need one; an entry that is already published and
unchanged was gated when it went up.  A receipt counts only when this installation's gate wrote
it (:mod:`registry.gate.seal`): one carried in by a pull request or copied from elsewhere does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pydantic import ValidationError

from ..errors import Problem, RegistryError
from ..gate.receipt import Receipt, receipt_path
from ..gate.seal import sealed_here
from ..models import Entry, Index
from ..repo import Repo
from ..schemas import read_json


def entry_files(entry: Entry) -> list[str]:
    """Every file whose bytes belong to the entry (a sharded checkpoint: its index and shards)."""
    return [entry.path, *(s.path for s in entry.shards)]


def entries_touching(index: Index, paths: Iterable[str]) -> list[Entry]:
    """Entries with at least one file among ``paths``."""
    paths = set(paths)
    return [e for e in index.entries if paths.intersection(entry_files(e))]


def _receipt_problem(receipt: Receipt, entry: Entry, sums: dict[str, str], allow_cpu: bool) -> tuple[str, str] | None:
    """(code, message) when the receipt does not vouch for the entry's current bytes."""
    if receipt.file_sha256 != entry.sha256:
        return "gate.stale", f"the receipt is for sha256 {receipt.file_sha256[:12]}…, not these bytes"
    stale = sorted(path for path, sha in receipt.files.items() if sums.get(path) != sha)
    if stale:
        return "gate.stale", f"the gate loaded other bytes of {', '.join(stale)}"
    if not receipt.passed:
        failed = ", ".join(c.name for c in receipt.failed_checks()) or "see the receipt"
        return "gate.failed", f"the gate failed ({failed})"
    if receipt.environment.device != "cuda" and not allow_cpu:
        return "gate.cpu-only", "the gate ran on CPU only"
    return None


def gate_findings(repo: Repo, index: Index, sums: dict[str, str], uploads: Iterable[str], allow_cpu: bool) -> Iterator[Problem]:
    """One finding per entry about to be uploaded without a passing receipt for its bytes."""
    for entry in entries_touching(index, uploads):
        base = index.base_by_sha(entry.base_sha256)
        fix = f"run `registry smoke {entry.path} --base-file {base.filename if base else 'BASE.pth'}`"
        path = receipt_path(repo.gates_dir, entry.sha256)
        if not path.is_file():
            yield Problem("gate.missing", entry.path, f"no gate receipt for sha256 {entry.sha256[:12]}…", fix)
            continue
        try:
            receipt = Receipt.model_validate(read_json(path, repo.rel(path)))
        except ValidationError as err:
            yield Problem("gate.bad-receipt", entry.path, f"{repo.rel(path)} is not a valid receipt ({err.error_count()} error(s))", fix)
            continue
        except RegistryError as err:
            yield Problem("gate.bad-receipt", entry.path, f"{err.file}: {err.message}", fix)
            continue
        if not sealed_here(receipt):
            message = f"{repo.rel(path)} was not written by this installation's gate (its seal does not check under this user's key: written by hand, edited, or from another machine)"
            yield Problem("gate.not-ours", entry.path, message, fix)
            continue
        problem = _receipt_problem(receipt, entry, sums, allow_cpu)
        if problem:
            code, message = problem
            cpu_fix = f"{fix} on a CUDA machine, or pass --allow-cpu-gate"
            yield Problem(code, entry.path, message, cpu_fix if code == "gate.cpu-only" else fix)
