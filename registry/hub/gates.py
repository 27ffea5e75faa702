"""Publish's gate rule: no weight reaches the Hub without a passing receipt for exactly its bytes.

Only entries whose bytes are not on the Hub yet need one; an entry that is already published and
unchanged was gated when it went up.  A receipt counts only when this installation's gate wrote
it (its seal, :mod:`registry.gate.seal`) or its signature verifies under a key publish was told to
trust (``--trust-gate-key``: the gate ran on another machine); one carried in by a pull request,
copied from elsewhere unsigned, or signed by any other key does not.  Either way it must be for
exactly these bytes and their base.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from ..artifacts.signature import TrustedKey
from ..core.errors import Problem, RegistryError, warn
from ..core.models import Entry, Index
from ..core.repo import Repo
from ..core.schemas import read_json
from ..gate.receipt import Receipt, receipt_path
from ..gate.seal import sealed_here, signature_problem
from ..hf.checkpoint import gate_not_applicable


def entry_files(entry: Entry) -> list[str]:
    """Every file whose bytes belong to the entry (a sharded checkpoint: its index and shards)."""
    return [entry.path, *(s.path for s in entry.shards)]


def entries_touching(index: Index, paths: Iterable[str]) -> list[Entry]:
    """Entries with at least one file among ``paths``."""
    paths = set(paths)
    return [e for e in index.entries if paths.intersection(entry_files(e))]


def _receipt_problem(
    receipt: Receipt, sha256: str, base_sha256: str, sums: dict[str, str], allow_cpu: bool
) -> tuple[str, str] | None:
    """(code, message) when the receipt does not vouch for the current bytes ``sha256`` on their base
    ``base_sha256``."""
    if receipt.file_sha256 != sha256:
        return "gate.stale", f"the receipt is for sha256 {receipt.file_sha256[:12]}…, not these bytes"
    if receipt.base_sha256 != base_sha256:
        return (
            "gate.stale",
            f"the gate ran on base sha256 {receipt.base_sha256[:12]}…, but index.json records base {base_sha256[:12]}…",
        )
    stale = sorted(path for path, sha in receipt.files.items() if sums.get(path) != sha)
    if stale:
        return "gate.stale", f"the gate loaded other bytes of {', '.join(stale)}"
    if not receipt.passed:
        failed = ", ".join(c.name for c in receipt.failed_checks()) or "see the receipt"
        return "gate.failed", f"the gate failed ({failed})"
    if receipt.environment.device != "cuda" and not allow_cpu:
        return "gate.cpu-only", "the gate ran on CPU only"
    return None


def _trust_problem(receipt: Receipt, where: str, trusted: Sequence[TrustedKey]) -> tuple[str, str, str] | None:
    """(code, message, fix) when neither this installation's seal nor a trusted signature vouches for ``receipt``."""
    if sealed_here(receipt):
        return None
    if receipt.signature is None and not trusted:
        message = (
            f"{where} was not written by this installation's gate (its seal does not check under this user's "
            "key: written by hand, edited, or from another machine) and is not signed"
        )
        return (
            "gate.not-ours",
            message,
            " (or sign it there with `registry smoke --sign-key KEY.pem` and pass --trust-gate-key KEY.pub here)",
        )
    problem = signature_problem(receipt, trusted)
    if problem is None:
        return None
    code, message = problem
    told = (
        ""
        if code == "gate.bad-signature"
        else " (or pass --trust-gate-key with the public key of the machine that gated it)"
    )
    return code, f"{where} {message}", told


def _receipt_findings(
    repo: Repo, rel: str, sha256: str, base_sha256: str, sums: dict[str, str], gate: GateTrust, fix: str
) -> Iterator[Problem]:
    path = receipt_path(repo.gates_dir, sha256)
    if not path.is_file():
        yield Problem("gate.missing", rel, f"no gate receipt for sha256 {sha256[:12]}…", fix)
        return
    try:
        receipt = Receipt.model_validate(read_json(path, repo.rel(path)))
    except ValidationError as err:
        yield Problem(
            "gate.bad-receipt", rel, f"{repo.rel(path)} is not a valid receipt ({err.error_count()} error(s))", fix
        )
        return
    except RegistryError as err:
        yield Problem("gate.bad-receipt", rel, f"{err.file}: {err.message}", fix)
        return
    untrusted = _trust_problem(receipt, repo.rel(path), gate.trusted_keys)
    if untrusted:
        code, message, also = untrusted
        yield Problem(code, rel, message, f"{fix}{also}")
        return
    problem = _receipt_problem(receipt, sha256, base_sha256, sums, gate.allow_cpu)
    if problem:
        code, message = problem
        cpu_fix = f"{fix} on a CUDA machine, or pass --allow-cpu-gate"
        yield Problem(code, rel, message, cpu_fix if code == "gate.cpu-only" else fix)


@dataclass(frozen=True)
class GateTrust:
    """Which receipts publish counts: this installation's (sealed), and those signed by ``trusted_keys``;
    CPU-only runs only with ``allow_cpu``."""

    allow_cpu: bool = False
    trusted_keys: tuple[TrustedKey, ...] = ()


def gate_findings(
    repo: Repo, index: Index, sums: dict[str, str], uploads: Iterable[str], gate: GateTrust
) -> Iterator[Problem]:
    """One finding per entry, RWKV-7 Transformers checkpoint or GGUF file about to be uploaded without
    a passing receipt for its bytes (a checkpoint of another architecture: a warning that the gate
    does not apply, never a pass)."""
    uploads = set(uploads)
    for entry in entries_touching(index, uploads):
        base = index.base_by_sha(entry.base_sha256)
        fix = f"run `registry smoke {entry.path} --base-file {base.filename if base else 'BASE.pth'}`"
        yield from _receipt_findings(repo, entry.path, entry.sha256, entry.base_sha256, sums, gate, fix)
    for checkpoint in index.checkpoints:
        if not uploads.intersection(checkpoint.weight_files()):
            continue
        if not checkpoint.rwkv7:
            # Another architecture: no receipt is asked for, and none is implied; publish says so.
            warn(gate_not_applicable(checkpoint))
            continue
        fix = f"run `registry smoke {checkpoint.path}`"
        base_sha256 = checkpoint.base_sha256 or checkpoint.sha256  # a checkpoint with no base file is its own
        yield from _receipt_findings(repo, checkpoint.path, checkpoint.sha256, base_sha256, sums, gate, fix)
    for gguf in (g for g in index.ggufs if g.path in uploads):
        base = index.base_by_sha(gguf.base_sha256)
        base_file = base.filename if base else "BASE.pth"
        what = (
            f"--base {gguf.source} --base-file {base_file}"
            if base and gguf.source == base.name
            else f"{gguf.source}{f' --base-file {base_file}' if gguf.merged else ''}"
        )
        fix = f"make it again with `registry export-gguf {what} --type {gguf.type} --force`, which gates it"
        yield from _receipt_findings(repo, gguf.path, gguf.sha256, gguf.base_sha256, sums, gate, fix)
