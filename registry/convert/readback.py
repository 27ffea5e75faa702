"""Hash an output while it is being written, reading each piece back from the file.

Why during the write and not after it: a piece read back right after it landed is still in the
page cache, so this costs no disk I/O, while a pass after the last write re-reads from disk
whenever the source and the output together outgrow RAM (the 12 GiB case on a 24 GiB machine).
The copying thread compares each piece with the source as it lands (:func:`.writer.copy_tensors`);
this one hashes, so the two halves of the checking run on the two cores.

The digest is of the bytes in the file, read through a mapping of it, never of what was meant to
be written: the sha256 recorded in SHA256SUMS is that of the verified file, and no second pass
over the output is needed.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from ..core.hashing.digest import sha256
from ..core.libc import mapped, same_bytes

MAX_LAG = 1 << 30  # the writer waits when it is this far ahead, so read-backs hit the page cache


@dataclass(frozen=True)
class ReadBackResult:
    sha256: str
    size: int
    mismatch: str | None  # what is wrong with the file as read back, or None


class ReadBack:
    """Trails the writer through one output file on a worker thread.

    The writer reports each piece with :meth:`landed` (pieces may land before the header) and
    the header with :meth:`header_written`; :meth:`finish` returns the digest, or what was wrong
    with the file.  Pieces must land in file order.  Memory: one mapped piece.
    """

    def __init__(self, path: Path):
        self._fd = os.open(path, os.O_RDONLY)
        self._changed = threading.Condition()
        self._header: bytes | None = None
        self._pending: deque[tuple[int, int]] = deque()
        self._pending_bytes = 0
        self._all_landed = self._stopped = self._done = False
        self._error: BaseException | None = None
        self._digest = sha256()
        self._position = 0
        self._mismatch: str | None = None
        self._worker = threading.Thread(target=self._run, name=f"read-back {path.name}", daemon=True)
        self._worker.start()

    def header_written(self, header: bytes) -> None:
        """The header is in the file; it must read back as ``header``."""
        with self._changed:
            self._header = header
            self._changed.notify_all()

    def landed(self, at: int, length: int) -> None:
        """The file's bytes [at, at + length) are written."""
        with self._changed:
            self._pending.append((at, length))
            self._pending_bytes += length
            self._changed.notify_all()
            # Before the header is there nothing can be read back, so the writer runs ahead.
            while self._header is not None and self._pending_bytes > MAX_LAG and not self._done:
                self._changed.wait()

    def finish(self) -> ReadBackResult:
        """Wait until everything that landed was read back."""
        with self._changed:
            self._all_landed = True
            self._changed.notify_all()
        self._worker.join()
        if self._error is not None:
            raise self._error
        mismatch = self._mismatch
        if mismatch is None and self._position != os.fstat(self._fd).st_size:
            mismatch = "the file has bytes after its last tensor"
        return ReadBackResult(self._digest.hexdigest(), self._position, mismatch)

    def close(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        self._worker.join()
        os.close(self._fd)

    def __enter__(self) -> ReadBack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next(self) -> tuple[int, int] | None:
        with self._changed:
            while not (self._pending or self._all_landed or self._stopped):
                self._changed.wait()
            if self._stopped or not self._pending:
                return None
            return self._pending[0]

    def _run(self) -> None:
        try:
            with self._changed:
                while self._header is None and not (self._stopped or self._all_landed):
                    self._changed.wait()
                header = self._header
            if header is not None:
                self._check_header(header)
                while (piece := self._next()) is not None:
                    if self._mismatch is None:
                        self._check_piece(*piece)
                    with self._changed:
                        self._pending.popleft()
                        self._pending_bytes -= piece[1]
                        self._changed.notify_all()
        except BaseException as exc:  # re-raised by finish()
            self._error = exc
        finally:
            with self._changed:
                self._done = True
                self._changed.notify_all()

    def _check_header(self, header: bytes) -> None:
        on_disk = os.pread(self._fd, len(header), 0)
        self._digest.update(on_disk)
        self._position = len(on_disk)
        if not same_bytes(on_disk, header):
            self._mismatch = "the header read back differs from the one written"

    def _check_piece(self, at: int, length: int) -> None:
        if at != self._position:
            self._mismatch = "the tensors were not written in file order"
            return
        try:
            with mapped(self._fd, at, length) as written:
                self._digest.update(written)
        except EOFError:
            self._mismatch = "the file is shorter than its header says"
            return
        self._position = at + length
