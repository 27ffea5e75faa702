"""Receipts bound to the installation whose gate wrote them.

A receipt is a plain JSON file under ``.registry/gates/``: anyone can write one, and a pull
request can carry one.  So each receipt holds ``seal``, an HMAC-SHA256 of the rest of it under a
key of this user's (``$XDG_CONFIG_HOME/rwkv-registry/receipt-key``, ``~/.config`` by default),
made when the gate writes the receipt and kept outside every registry.  Publish counts a receipt
only when its seal checks under that key: one written by hand, edited, or copied from another
machine does not count (docs/reliability.md says why this and not re-running the gate).

A receipt meant for a publish made elsewhere (CI) is also signed (:func:`signed`, ``smoke
--sign-key``) with an EC key whose public half the publishing side is told to trust
(``publish --trust-gate-key``); :func:`signature_problem` checks it there.  The seal and the
signature each cover every other field, the file, base and loaded files' sha256, the kernel
sources' digest and the versions included.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from pathlib import Path

from ..artifacts.signature import TrustedKey, sign_document
from ..core.hashing.digest import hmac_sha256_hex
from ..core.userkey import create_key, key_path, read_key
from .receipt import RECEIPT_PAYLOAD_TYPE, Receipt, ReceiptSignature, signed_payload, unsigned_fields


def _mac(key: bytes, receipt: Receipt) -> str:
    return hmac_sha256_hex(key, receipt.model_dump_json(exclude=unsigned_fields(receipt)).encode("utf-8"))


def sealed(receipt: Receipt) -> Receipt:
    """``receipt`` with its seal under this user's key (created on first use)."""
    path = key_path()
    key = read_key(path) or create_key(path)
    return receipt.model_copy(update={"seal": _mac(key, receipt)})


def sealed_json(receipt: Receipt) -> bytes:
    """The receipt file's bytes: ``receipt`` sealed, as indented JSON."""
    return (sealed(receipt).model_dump_json(indent=2) + "\n").encode()


def sealed_here(receipt: Receipt) -> bool:
    """Whether this user's gate wrote ``receipt`` as it is (False without a key)."""
    key = read_key(key_path())
    return key is not None and receipt.seal is not None and hmac.compare_digest(receipt.seal, _mac(key, receipt))


def signed(receipt: Receipt, key: Path) -> Receipt:
    """``receipt`` signed with the EC private key at ``key`` (PEM, as `registry sign` takes)."""
    sig, key_fingerprint = sign_document(RECEIPT_PAYLOAD_TYPE, signed_payload(receipt), key)
    return receipt.model_copy(update={"signature": ReceiptSignature(key=key_fingerprint, sig=sig)})


def signature_problem(receipt: Receipt, trusted: Sequence[TrustedKey]) -> tuple[str, str] | None:
    """(code, message) when ``receipt`` is not signed by one of the ``trusted`` keys as it is."""
    if receipt.signature is None:
        return (
            "gate.not-ours",
            "was not written by this installation's gate (its seal does not check under this user's key) and is not signed",
        )
    key = next((k for k in trusted if k.fingerprint == receipt.signature.key), None)
    if key is None:
        told = f" (trusted: {', '.join(k.fingerprint[:16] + '…' for k in trusted)})" if trusted else ""
        return (
            "gate.untrusted-key",
            f"is signed by key {receipt.signature.key[:16]}…, which publish was not told to trust{told}",
        )
    if not key.verifies(RECEIPT_PAYLOAD_TYPE, signed_payload(receipt), receipt.signature.sig):
        return (
            "gate.bad-signature",
            f"has a signature that does not verify under the trusted key {key.path.name} (forged, or edited after signing)",
        )
    return None
