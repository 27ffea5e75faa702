"""What a validate run found, and what a reader of its result must know it did: the Git LFS
pointers it checked by oid and size instead of bytes (pointer mode) and how it checked model.sig.
Ground floor and light, so that a result a verdict remembered (:mod:`registry.core.verdict`) is
given back as the same type without importing validate's checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import Problem
from .names import SIGNATURE_NAME

SKIPPED_WITHOUT_BYTES = (
    "tensor inspection of the pointed-to files (safetensors and GGUF headers, shard sets, Transformers exports)",
    "the gate (publish runs it where the bytes are)",
)


@dataclass
class Validation:
    """validate's findings, and what it did that a reader must know: the Git LFS pointers it
    checked by oid and size instead of bytes (pointer mode) and how it checked model.sig."""

    problems: list[Problem]
    pointers: list[str] = field(default_factory=list)
    signature: str | None = None  # "consistency", "public-key", or None: no model.sig was checked

    @property
    def skipped(self) -> list[str]:
        return list(SKIPPED_WITHOUT_BYTES) if self.pointers else []

    def notes(self) -> list[str]:
        """The lines that say what was (not) checked, for the human text."""
        lines = []
        if self.pointers:
            lines.append(
                f"pointer mode: {len(self.pointers)} file(s) are Git LFS pointers, checked by oid and size "
                "against SHA256SUMS and index.json;"
                f" skipped: {'; '.join(self.skipped)} (--require-bytes refuses pointers)"
            )
        if self.signature == "consistency":
            lines.append(
                "model.sig: consistency checked (it parses, signs exactly SHA256SUMS's files and sha256s, by "
                "the signer index.json records);"
                " not authorship: run `registry validate --public-key SIGNER.pub` or `model_signing verify "
                "key . --signature model.sig --public_key SIGNER.pub`"
            )
        elif self.signature == "public-key":
            lines.append(
                "model.sig: verified with the public key (authorship), and consistent with SHA256SUMS and "
                "the signer index.json records"
            )
        return lines

    def as_dict(self) -> dict[str, object]:
        """The keys of the --json document: each present only when that happened."""
        document: dict[str, object] = {}
        if self.pointers:
            document["pointer_mode"] = {"files": self.pointers, "skipped": self.skipped}
        if self.signature:
            document["signature"] = {"file": SIGNATURE_NAME, "checked": self.signature}
        return document

    def verdict(self) -> dict[str, Any]:
        """What a verdict keeps of a clean run (:meth:`from_verdict` gives it back)."""
        return {"pointers": self.pointers, "signature": self.signature}

    @classmethod
    def from_verdict(cls, kept: Any) -> Validation | None:
        """The clean run a verdict kept, or None when ``kept`` is not one."""
        if not (
            isinstance(kept, dict)
            and isinstance(kept.get("pointers"), list)
            and all(isinstance(p, str) for p in kept["pointers"])
        ):
            return None
        signature = kept.get("signature")
        return cls([], list(kept["pointers"]), signature if signature in ("consistency", "public-key") else None)
