"""A one-line error instead of a silent death when a mapped input shrinks under us.

Reading a memory-mapped file past its current end raises SIGBUS, which Python cannot turn into
an exception: the process would die with no word.  Weights are mapped (``torch.load(mmap=True)``,
the hashing and convert windows), so another process truncating a source mid-command is enough.
:func:`install` (done by the CLI) puts a handler in place that writes ``error: <file>: …; fix: …``
for the input being read (:func:`reading`) and exits with :data:`~registry.core.errors.Exit.MACHINE`.
Nothing has been committed at that point; the next command removes what was staged.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import Exit, RegistryError

_reading: list[str] = []
_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)
_installed: list[object] = []  # keeps the ctypes callback alive


def _on_sigbus(_signum: int) -> None:
    what = _reading[-1] if _reading else None
    error = RegistryError(
        "fs.shrunk",
        what,
        "the file shrank while it was being read (SIGBUS); nothing was changed",
        "run the command again once nothing else writes to it",
        Exit.MACHINE,
    )
    os.write(2, f"error: {error.one_line()}\n".encode())
    os._exit(Exit.MACHINE)


def install() -> None:
    """Handle SIGBUS as above (once per process)."""
    if _installed:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = [ctypes.c_int, _HANDLER]
    callback = _HANDLER(_on_sigbus)
    libc.signal(signal.SIGBUS, callback)
    _installed.append(callback)


@contextmanager
def reading(path: str | Path) -> Iterator[None]:
    """Name ``path`` in the SIGBUS message while the block reads it."""
    _reading.append(str(path))
    try:
        yield
    finally:
        _reading.remove(str(path))  # its own entry: a hashing thread may have named another file since
