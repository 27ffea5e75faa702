"""Secret keys of this user's installation, kept outside every registry.

A registry folder, ``.registry/`` included, is untrusted input: anything in it can be written by
hand or arrive with a clone.  What the tool must be able to believe later (a gate receipt, a
remembered check result) is bound with an HMAC under a random key of this user's,
``$XDG_CONFIG_HOME/rwkv-registry/<name>`` (``~/.config`` by default), readable by this user only.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from .errors import RegistryError

KEY_BYTES = 32


def key_path(name: str) -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "rwkv-registry" / name


def read_key(path: Path, code: str, fix: str) -> bytes | None:
    """The key at ``path``, None when there is none; a broken key is ``code`` with ``fix``."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(code, path, f"the key cannot be read ({exc})", fix) from exc
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise RegistryError(code, path, f"the key is not {KEY_BYTES} bytes in hex", fix)
    return key


def create_key(path: Path, code: str, fix: str) -> bytes:
    """A new random key, readable by this user only; a key another process created first wins."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
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
    key = read_key(path, code, fix)
    assert key is not None
    return key
