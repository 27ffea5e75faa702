"""Receipts bound to the installation whose gate wrote them.

A receipt is a plain JSON file under ``.registry/gates/``: anyone can write one, and a pull
request can carry one.  So each receipt holds ``seal``, an HMAC-SHA256 of the rest of it under a
key of this user's (``$XDG_CONFIG_HOME/rwkv-registry/receipt-key``, ``~/.config`` by default),
made when the gate writes the receipt and kept outside every registry.  Publish counts a receipt
only when its seal checks under that key: one written by hand, edited, or copied from another
machine does not count (docs/reliability.md says why this and not re-running the gate).
"""

from __future__ import annotations

import hmac

from ..core.hashing.digest import hmac_sha256_hex
from ..core.userkey import create_key, key_path, read_key
from .receipt import Receipt


def _mac(key: bytes, receipt: Receipt) -> str:
    return hmac_sha256_hex(key, receipt.model_dump_json(exclude={"seal"}).encode("utf-8"))


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
