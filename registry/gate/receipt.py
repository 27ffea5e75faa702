"""Gate receipts: proof that exactly these bytes ran through the kernel and agreed.

One JSON per gated file in ``.registry/gates/<file sha256>.json``.  Publish trusts a receipt only
when this installation's gate wrote it (its ``seal``, :mod:`registry.gate.seal`) or it is signed
by a key publish was told to trust (its ``signature``, made by ``smoke --sign-key``), its
``file_sha256`` equals the bytes about to be uploaded, it passed, and it ran on CUDA (a ``cpu``
receipt needs ``--allow-cpu-gate``).  The schema is checked in as
``schemas/receipt.schema.json``.

``sample`` (the smoke sample in the weight's own format) came later: a receipt written before it
has none, and its seal and signature cover the fields it has, so it is read and trusted as it was
(:func:`unsigned_fields`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.models import SHA256_PATTERN, FormatSample, GateCheck, GateSummary

RECEIPT_FORMAT: Final = "rwkv-registry-gate-receipt"
RECEIPT_PAYLOAD_TYPE: Final = (
    "application/vnd.rwkv-registry.gate-receipt+json"  # what a receipt's signature says it signed
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CheckResult(_Strict):
    """One check of the gate: its measured figures, the thresholds it was held to, the verdict."""

    name: str
    passed: bool
    figures: dict[str, float | int | str | bool | None] = Field(default_factory=dict)
    thresholds: dict[str, float | int | str] = Field(default_factory=dict)
    detail: str = ""


class Environment(_Strict):
    device: Literal["cuda", "cpu"]
    gpu: str | None = None
    driver: str | None = None
    torch: str
    cuda: str | None = None
    rwkv: str | None = None
    python: str
    registry: str
    kernel_source_hash: str


class Timings(_Strict):
    kernel_build_s: float | None = None
    kernel_cached: bool | None = None
    load_s: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    total_s: float = Field(description="This entry's own time, with its share of building the official runtime")
    setup_s: float | None = Field(
        default=None, description="Loading (and hashing) the weights this entry shares with the others of its run"
    )
    entries_sharing_setup: int | None = Field(default=None, ge=1)
    gpu_peak_bytes: int | None = Field(
        default=None, ge=0, description="Most GPU memory the run had allocated when this receipt was written"
    )


class ReceiptSignature(_Strict):
    """An EC signature (ECDSA-SHA256 over DSSE's encoding of :func:`signed_payload`) by the gate machine's key."""

    key: str = Field(
        pattern=SHA256_PATTERN,
        description="sha256 of the signer's PEM public key (as `registry sign` records a signer)",
    )
    sig: str = Field(min_length=1, description="base64 signature")


class Receipt(_Strict):
    """Everything a reviewer needs to trust (or re-run) one gate."""

    SCHEMA_KIND: ClassVar[str] = "receipt"  # its checked-in schema: schemas/receipt.schema.json

    format: Literal["rwkv-registry-gate-receipt"] = RECEIPT_FORMAT
    format_version: Literal[1] = 1
    entry: str
    method: Literal["state", "miss", "full"]
    file_sha256: str = Field(pattern=SHA256_PATTERN)
    files: dict[str, str] = Field(
        description="sha256 of every file the gate loaded for this entry (shards too), by registry path"
    )
    base_sha256: str = Field(pattern=SHA256_PATTERN)
    created: str
    environment: Environment
    checks: list[CheckResult]
    timings: Timings
    passed: bool
    sample: FormatSample | None = Field(
        default=None,
        description="A short greedy continuation in the weight's own prompt format: reported, never part of the verdict; absent in receipts written before it existed",
    )
    seal: str | None = Field(
        default=None,
        description="HMAC-SHA256 of the rest of the receipt under the key of the installation whose gate wrote it (kept outside the registry)",
    )
    signature: ReceiptSignature | None = Field(
        default=None,
        description="The gate machine's signature of the rest of the receipt (smoke --sign-key), for a publish made elsewhere",
    )

    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]


def unsigned_fields(receipt: Receipt) -> set[str]:
    """The fields a receipt's seal and signature do not cover: those two, and ``sample`` where there
    is none, so that a receipt written before samples existed checks as it was sealed and signed."""
    return {"seal", "signature"} | ({"sample"} if receipt.sample is None else set())


def signed_payload(receipt: Receipt) -> bytes:
    """The bytes a receipt's signature covers: every field but :func:`unsigned_fields`, as canonical
    JSON (sorted keys, no spaces), so another installation re-derives them from the parsed receipt."""
    facts = json.loads(
        receipt.model_dump_json(exclude=unsigned_fields(receipt))
    )  # as the file holds it (a NaN figure is null)
    return json.dumps(facts, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def receipt_path(gates_dir: Path, file_sha256: str) -> Path:
    return gates_dir / f"{file_sha256}.json"


def gate_summary(receipt: Receipt) -> GateSummary:
    """index.json's record of a gate run: the receipt's facts, without its path or seal."""
    environment = receipt.environment.model_dump(exclude={"device", "gpu"}, exclude_none=True)
    return GateSummary(
        passed=receipt.passed, device=receipt.environment.device, file_sha256=receipt.file_sha256,
        gpu=receipt.environment.gpu, date=receipt.created[:10], versions={k: str(v) for k, v in environment.items()},
        checks=[GateCheck(name=c.name, passed=c.passed, figures={k: _finite_or_text(v) for k, v in c.figures.items()}) for c in receipt.checks],
        sample=receipt.sample,
    )  # fmt: skip


def _finite_or_text(value: float | int | str | bool | None) -> float | int | str | bool | None:
    """A figure index.json can hold: JSON has no NaN or Infinity, so those are written as text."""
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value
