"""This user's secret key, kept outside every registry, and the seals made with it.

Anything under a registry's private folder can arrive with the folder (a clone, a download, a
pull request), so the tool trusts a file it wrote there only when it carries a seal: an
HMAC-SHA256, under this key, of the file's purpose and content.  A file written by hand, edited,
or copied from another machine does not check.  The key is 32 random bytes in hex at
``$XDG_CONFIG_HOME/rwkv-registry/receipt-key`` (``~/.config`` by default), readable by this user
only, created on first use; gate receipts (:mod:`registry.gate.seal`), commit journals
(:mod:`registry.core.atomic`) and the private caches are sealed with it, each under its own purpose.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from .errors import RegistryError
from .files import atomic_write, writes_allowed
from .hashing.digest import hmac_sha256_hex

KEY_NAME = "receipt-key"  # the name it had when only gate receipts were sealed: existing keys stay valid
KEY_BYTES = 32


def key_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "rwkv-registry" / KEY_NAME


def read_key(path: Path) -> bytes | None:
    """The key at ``path``; None when there is none yet."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(
            "key.unreadable",
            path,
            f"this user's key cannot be read ({exc})",
            "delete it (receipts sealed with it stop counting; run the gate again)",
        ) from exc
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise RegistryError(
            "key.unreadable",
            path,
            f"this user's key is not {KEY_BYTES} bytes in hex",
            "delete it (receipts sealed with it stop counting; run the gate again)",
        )
    return key


def create_key(path: Path) -> bytes:
    """A new random key, readable by this user only; a key another process created first wins."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_name(f".{KEY_NAME}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(secrets.token_hex(KEY_BYTES) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temp, path)  # never replaces a key that exists
    except FileExistsError:
        pass
    finally:
        temp.unlink()
    key = read_key(path)
    assert key is not None
    return key


def seal(purpose: str, data: bytes) -> str:
    """The seal of ``data`` written for ``purpose`` (the key is created on first use)."""
    path = key_path()
    key = read_key(path) or create_key(path)
    return hmac_sha256_hex(key, purpose.encode("utf-8") + b"\0" + data)


def sealed_here(purpose: str, data: bytes, mac: object) -> bool:
    """Whether ``mac`` is this user's seal of ``data`` for ``purpose`` (False without a key, or one unreadable)."""
    try:
        key = read_key(key_path())
    except RegistryError:
        return False
    return (
        key is not None
        and isinstance(mac, str)
        and hmac.compare_digest(mac, hmac_sha256_hex(key, purpose.encode("utf-8") + b"\0" + data))
    )


def _body(content: Any) -> bytes:
    return json.dumps(content, sort_keys=True, ensure_ascii=True).encode("ascii")


def read_sealed(path: Path, purpose: str, max_bytes: int = 256 << 20) -> Any | None:
    """What the tool saved at ``path`` with :func:`save_sealed`; None when there is nothing, or
    anything it cannot vouch for (not a regular file, not JSON, no seal of this user's)."""
    from .schemas import parse_json, read_bounded  # the strict reader, loaded only when a cache is read  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)

    try:
        data = parse_json(read_bounded(path, max_bytes, str(path)), str(path))
    except (OSError, RegistryError):
        return None
    if (
        not isinstance(data, dict)
        or set(data) != {"content", "seal"}
        or not sealed_here(purpose, _body(data["content"]), data["seal"])
    ):
        return None
    return data["content"]


def save_sealed(path: Path, purpose: str, content: Any) -> None:
    """Save ``content`` at ``path`` (in a registry's private folder) with its seal; nothing in a dry
    run, in a read-only registry, through a link, or over something that is not a regular file."""
    private, root = path.parent, path.parent.parent
    if not writes_allowed():
        return
    try:
        if root.exists() and not root.stat().st_mode & stat.S_IWUSR:  # a read-only registry
            return
        private.mkdir(exist_ok=True)
        if not stat.S_ISDIR(private.lstat().st_mode) or (
            os.path.lexists(path) and not stat.S_ISREG(path.lstat().st_mode)
        ):
            return
        atomic_write(path, json.dumps({"content": content, "seal": seal(purpose, _body(content))}).encode())
    except (OSError, RegistryError):
        return  # no cache only costs work
