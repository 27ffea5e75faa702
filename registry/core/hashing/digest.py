"""sha256 of bytes in memory: a whole buffer, a stream of pieces, an HMAC.

Imports nothing from the registry, so every module can take its digests from here
(:mod:`registry.core.hashing.engine` hashes files).  The one place, with the engine, that names
``hashlib``: a test keeps it so.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer


class Hasher(Protocol):
    """A digest fed piece by piece: what :func:`sha256` returns (any of hashlib's objects)."""

    def update(self, data: ReadableBuffer, /) -> None: ...

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...


def sha256(data: ReadableBuffer = b"") -> Hasher:
    """A streaming sha256, started with ``data``."""
    return hashlib.sha256(data)


def sha256_hex(data: ReadableBuffer) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def hmac_sha256_hex(key: bytes, data: bytes) -> str:
    """Hex HMAC-SHA256 of ``data`` under ``key``."""
    return hmac.new(key, data, hashlib.sha256).hexdigest()
