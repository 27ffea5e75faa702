"""The Xet storage behind the fake Hub (tests/hubserver.py): hf_xet's own ``local://`` CAS.

The real client uploads through Xet end to end: it asks the Hub's ``xet-write-token`` endpoint for a
CAS URL, and the fake answers with ``local://<dir>``, which hf_xet serves with its built-in local CAS
client (xet-core's ``LocalClient``: xorbs and shards written to that folder; no network, no token).
At commit time the Hub must turn the ``lfsFile`` the client names (by the sha256 it *asserts*) into
stored bytes, as the real Hub does from the uploaded shard's file records: :func:`shard_files`
reads them (MDB shard format: file-info section of 48-byte records, each file's optional
sha256 metadata extension), and :meth:`XetStore.read` reconstructs the bytes with hf_xet's
downloader from the same local CAS.  Downloads go the same way: the client sees ``xetHash`` in the
tree, asks ``xet-read-token`` and reads the local CAS itself.  Like the real Hub (xet-core PR 570), nothing checks that
the
asserted sha256 is the sha256 of those bytes.
"""

from __future__ import annotations

import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import hf_xet

_RECORD = 48
_HEADER = 48  # 32-byte tag, u64 version, u64 footer size
_VERIFICATION = 1 << 31  # a verification record per segment follows the segments
_METADATA_EXT = 1 << 30  # a metadata record (the file's sha256) follows
_BOOKEND = b"\xff" * 32


def merkle_hex(raw: bytes) -> str:
    """Xet's hex form of a 32-byte hash: four little-endian u64s, each printed as 16 hex digits."""
    return "".join(f"{word:016x}" for word in struct.unpack("<4Q", raw))


@dataclass(frozen=True)
class XetFile:
    xet_hash: str
    size: int


def shard_files(shard: bytes) -> dict[str, XetFile]:
    """sha256 -> Xet file, for every file record of one shard that carries its sha256."""
    files: dict[str, XetFile] = {}
    offset = _HEADER
    while shard[offset : offset + 32] != _BOOKEND:
        file_hash = shard[offset : offset + 32]
        flags, count = struct.unpack_from("<II", shard, offset + 32)
        segments = [struct.unpack_from("<I", shard, offset + _RECORD * (i + 1) + 36)[0] for i in range(count)]
        offset += _RECORD * (1 + count)
        if flags & _VERIFICATION:
            offset += _RECORD * count
        if flags & _METADATA_EXT:
            files[merkle_hex(shard[offset : offset + 32])] = XetFile(merkle_hex(file_hash), sum(segments))
            offset += _RECORD
    return files


class XetStore:
    """A local CAS folder that hf_xet uploads into, and reads back from."""

    def __init__(self, root: Path):
        self.root = root
        self.url = f"local://{root}"
        self._session = hf_xet.XetSession()

    def uploaded(self) -> dict[str, XetFile]:
        """sha256 -> file, for every file a client uploaded (in any shard; the Hub's own writes carry no sha256)."""
        files: dict[str, XetFile] = {}
        for shard in sorted(self.root.glob("**/shards/*.mdb")):
            files = shard_files(shard.read_bytes()) | files  # the first shard that names a sha256 wins
        return files

    def shard_count(self) -> int:
        """Shards in the CAS: every upload session that sent anything wrote one."""
        return len(list(self.root.glob("**/shards/*.mdb")))

    def find(self, sha256: str) -> XetFile | None:
        """The uploaded file the client asserted this sha256 for."""
        return self.uploaded().get(sha256)

    def _connection(self) -> dict:
        return {"endpoint": self.url, "token": "local", "token_expiry_unix_secs": int(time.time()) + 3600}

    def write(self, data: bytes) -> XetFile:
        """Store ``data`` (the Hub's own write, for fault injection) with no sha256 record, so that :meth:`find`
        keeps resolving sha256s to what clients uploaded."""
        with self._session.new_upload_commit(**self._connection()) as commit:
            handle = commit.start_upload_bytes(data, sha256=hf_xet.SKIP_SHA256)
        return XetFile(handle.result().xet_info.hash, len(data))

    def read(self, file: XetFile) -> bytes:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "file"
            with self._session.new_file_download_group(**self._connection()) as group:
                group.start_download_file(hf_xet.XetFileInfo(file.xet_hash, file.size), str(out))
            return out.read_bytes()
