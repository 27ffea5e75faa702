"""sha256 of files: 1 MiB reads into one reused buffer, several files at once.

hashlib releases the GIL while it digests a large buffer, so threads give real parallelism on
several files; a single file is bound by one core's sha256 speed (about 1.6 GB/s here, roughly
4x coreutils' sha256sum).  :class:`HashingWriter` hashes bytes on their way to disk, so a copy
or a conversion gets the output's sha256 without reading it again.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from ..errors import RegistryError
from ..libc import ByteBuffer, mapped
from ..sigbus import reading
from .digest import Hasher

CHUNK = 1 << 20

Progress = Callable[[int], None]


def hash_file(path: Path, progress: Progress | None = None) -> str:
    """Hex sha256 of one file, reporting bytes read to ``progress``."""
    return _digest_file(path, hashlib.sha256(), progress)


def git_blob_sha1(path: Path) -> str:
    """The id git gives the file's bytes: ``sha1(b"blob <size>\\0" + content)``, streamed."""
    return _digest_file(path, hashlib.sha1(b"blob %d\0" % path.stat().st_size))


def _digest_file(path: Path, digest: Hasher, progress: Progress | None = None) -> str:
    """Feed the file's bytes to ``digest`` in 1 MiB reads into one reused buffer."""
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while True:
            n = handle.readinto(buffer)
            if not n:
                break
            digest.update(view[:n])
            if progress:
                progress(n)
    return digest.hexdigest()


MAPPED_WINDOW = 64 << 20


def hash_mapped(path: Path) -> str:
    """Hex sha256 of one file read through 64 MiB read-only mappings.

    For hashing beside other work: each ``update`` runs about 35 ms without the GIL, where
    :func:`hash_file`'s 1 MiB reads need it back every 0.6 ms and crawl while the main thread
    imports torch.  Only for files nobody shrinks meanwhile (reading a mapping past the end of
    a truncated file kills the process), such as a source that is also ``torch.load``-mapped.
    """
    digest = hashlib.sha256()
    with reading(path), open(path, "rb") as handle:  # on another thread too: a SIGBUS names the file
        size = os.fstat(handle.fileno()).st_size
        for offset in range(0, size, MAPPED_WINDOW):
            with mapped(handle.fileno(), offset, min(MAPPED_WINDOW, size - offset)) as window:
                digest.update(window)
    return digest.hexdigest()


def hash_in_background(path: Path) -> Future[str]:
    """Start hashing ``path`` (see :func:`hash_mapped`) on its own thread; the future gets the
    hex digest or the error.  A daemon thread, so a command that fails meanwhile exits without
    finishing a multi-GB hash.
    """
    digest: Future[str] = Future()

    def run() -> None:
        try:
            digest.set_result(hash_mapped(path))
        except OSError as exc:
            digest.set_exception(
                RegistryError(
                    "fs.read-failed",
                    path,
                    f"reading failed: {exc.strerror or exc}",
                    "check the file and run the command again",
                )
            )
        except BaseException as exc:
            digest.set_exception(exc)

    threading.Thread(target=run, name=f"sha256 {path.name}", daemon=True).start()
    return digest


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def hash_files(paths: Iterable[Path], progress: Progress | None = None, workers: int | None = None) -> dict[Path, str]:
    """sha256 of many files, largest first so the pool finishes together."""
    ordered = sorted(paths, key=lambda p: os.stat(p).st_size, reverse=True)
    if not ordered:
        return {}
    with ThreadPoolExecutor(max_workers=workers or default_workers()) as pool:
        digests = pool.map(lambda p: hash_file(p, progress), ordered)
        return dict(zip(ordered, digests, strict=True))


class HashingWriter:
    """Pass-through writer that hashes and counts every byte on its way to disk.

    Hashing runs on a second thread, overlapping this chunk's write and the next chunk's read
    (all three release the GIL), so the sha256 costs no extra pass.  Contract: the bytes given
    to :meth:`write` must stay unchanged until the following ``write`` or :meth:`close`.
    """

    def __init__(self, sink: BinaryIO):
        self.sink = sink
        self.digest = hashlib.sha256()
        self.size = 0
        self._hasher = ThreadPoolExecutor(max_workers=1)
        self._pending: Future | None = None

    def write(self, data: ByteBuffer) -> None:
        self._wait()
        self._pending = self._hasher.submit(self.digest.update, data)
        self.sink.write(data)
        self.size += len(data)

    def _wait(self) -> None:
        if self._pending is not None:
            self._pending.result()
            self._pending = None

    def close(self) -> None:
        try:
            self._wait()
        finally:
            self._hasher.shutdown()
