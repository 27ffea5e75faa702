"""Publish's gate rule: no weight reaches the Hub without a passing receipt for exactly its bytes.

Only entries whose bytes are not on the Hub yet need one; an entry that is already published and
unchanged was gated when it went up.  A receipt counts only when this installation's gate wrote
it (:mod:`registry.gate.seal`): one carried in by a pull request or copied from elsewhere does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pydantic import ValidationError

from ..core.errors import Problem, RegistryError
from ..core.models import Entry, Index
from ..core.repo import Repo
from ..core.schemas import read_json
from ..gate.receipt import Receipt, receipt_path
from ..gate.seal import sealed_here


def entry_files(entry: Entry) -> list[str]:
    """Every file whose bytes belong to the entry (a sharded checkpoint: its index and shards)."""
    return [entry.path, *(s.path for s in entry.shards)]


def entries_touching(index: Index, paths: Iterable[str]) -> list[Entry]:
    """Entries with at least one file among ``paths``."""
    paths = set(paths)
    return [e for e in index.entries if paths.intersection(entry_files(e))]


def _receipt_problem(receipt: Receipt, sha256: str, sums: dict[str, str], allow_cpu: bool) -> tuple[str, str] | None:
    """(code, message) when the receipt does not vouch for the current bytes ``sha256``."""
    if receipt.file_sha256 != sha256:
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


def _receipt_findings(repo: Repo, rel: str, sha256: str, sums: dict[str, str], allow_cpu: bool, fix: str) -> Iterator[Problem]:
    path = receipt_path(repo.gates_dir, sha256)
    if not path.is_file():
        yield Problem("gate.missing", rel, f"no gate receipt for sha256 {sha256[:12]}…", fix)
        return
    try:
        receipt = Receipt.model_validate(read_json(path, repo.rel(path)))
    except ValidationError as err:
        yield Problem("gate.bad-receipt", rel, f"{repo.rel(path)} is not a valid receipt ({err.error_count()} error(s))", fix)
        return
    except RegistryError as err:
        yield Problem("gate.bad-receipt", rel, f"{err.file}: {err.message}", fix)
        return
    if not sealed_here(receipt):
        message = f"{repo.rel(path)} was not written by this installation's gate (its seal does not check under this user's key: written by hand, edited, or from another machine)"
        yield Problem("gate.not-ours", rel, message, fix)
        return
    problem = _receipt_problem(receipt, sha256, sums, allow_cpu)
    if problem:
        code, message = problem
        cpu_fix = f"{fix} on a CUDA machine, or pass --allow-cpu-gate"
        yield Problem(code, rel, message, cpu_fix if code == "gate.cpu-only" else fix)


def gate_findings(repo: Repo, index: Index, sums: dict[str, str], uploads: Iterable[str], allow_cpu: bool) -> Iterator[Problem]:
    """One finding per entry or GGUF file about to be uploaded without a passing receipt for its bytes."""
    uploads = set(uploads)
    for entry in entries_touching(index, uploads):
        base = index.base_by_sha(entry.base_sha256)
        fix = f"run `registry smoke {entry.path} --base-file {base.filename if base else 'BASE.pth'}`"
        yield from _receipt_findings(repo, entry.path, entry.sha256, sums, allow_cpu, fix)
    for gguf in (g for g in index.ggufs if g.path in uploads):
        base = index.base_by_sha(gguf.base_sha256)
        base_file = base.filename if base else "BASE.pth"
        what = f"--base {gguf.source} --base-file {base_file}" if base and gguf.source == base.name else f"{gguf.source}{f' --base-file {base_file}' if gguf.merged else ''}"
        fix = f"make it again with `registry export-gguf {what} --type {gguf.type} --force`, which gates it"
        yield from _receipt_findings(repo, gguf.path, gguf.sha256, sums, allow_cpu, fix)
