"""Content-level verification of a remote tree: the Hub's Xet file hash against the local bytes.

For a file uploaded through Xet, the tree's ``lfs.sha256`` is the value the *uploading client
asserted*: hf_xet stores it without checking it.  The ``xetHash`` is different: the Hub computes it
from the chunks it stores, so comparing it with the Xet hash of the local bytes
(:mod:`registry.core.hashing.xet`) proves the Hub holds those bytes.  The sha256 comparison is kept as
a second label.  One verdict per file, used by publish's check after its commit, ``verify-remote``
and ``pull``:

* ``xetHash`` present: compared with the local Xet hash (``match`` / ``mismatch``);
* ``lfs`` without ``xetHash``: LFS-stored, compared by sha256 only, and said so;
* a redacted hash (64 ``*``, a gated repo seen without access): unverifiable without access,
  never a mismatch and never a pass;
* no local bytes to hash (``verify-remote`` without a local registry, or hf_xet missing): not compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..core.errors import Problem
from ..core.hashing.xet import xet_digests
from .plan import RemoteFile

REDACTED = "*" * 64

XetVerdict = Literal["match", "mismatch", "unverifiable", "lfs-only", "plain", "not-compared"]
ShaVerdict = Literal["match", "mismatch", "unverifiable", "plain"]

NOTES: dict[XetVerdict, str] = {
    "match": "Xet hash matches the local bytes",
    "mismatch": "the Hub's Xet hash is not that of the local bytes",
    "unverifiable": "hash redacted: unverifiable without access",
    "lfs-only": "LFS-stored, sha256 only",
    "plain": "plain git file, compared by its bytes",
    "not-compared": "Xet hash not compared (no local bytes to hash)",
}


@dataclass(frozen=True)
class ContentCheck:
    """What one remote file was compared by, and how each comparison came out."""

    path: str
    xet: XetVerdict
    sha256: ShaVerdict

    @property
    def note(self) -> str:
        return NOTES["unverifiable" if "unverifiable" in (self.xet, self.sha256) else self.xet]

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "xet": self.xet, "sha256": self.sha256, "note": self.note}


def _sha_verdict(remote: RemoteFile, expected: str) -> ShaVerdict:
    if remote.lfs_sha256 is None:
        return "plain"
    if remote.lfs_sha256 == REDACTED:
        return "unverifiable"
    return "match" if remote.lfs_sha256 == expected else "mismatch"


def _xet_verdict(remote: RemoteFile, local_xet: str | None) -> XetVerdict:
    if remote.xet_hash is None:
        return "lfs-only" if remote.lfs_sha256 is not None else "plain"
    if remote.xet_hash == REDACTED:
        return "unverifiable"
    if local_xet is None:
        return "not-compared"
    return "match" if remote.xet_hash == local_xet else "mismatch"


def check_content(
    tree: Mapping[str, RemoteFile], expected_sha256: Mapping[str, str], local_xet: Mapping[str, str] | None
) -> list[ContentCheck]:
    """One check per path of ``expected_sha256`` that ``tree`` holds; ``local_xet`` maps paths to the
    Xet hash of the local bytes (None: there are none to hash)."""
    xet = local_xet or {}
    return [
        ContentCheck(path, _xet_verdict(tree[path], xet.get(path)), _sha_verdict(tree[path], sha))
        for path, sha in sorted(expected_sha256.items())
        if path in tree
    ]


def check_local_bytes(
    root: Path,
    cache_path: Path | None,
    tree: Mapping[str, RemoteFile],
    expected_sha256: Mapping[str, str],
    hashable: Iterable[str] | None = None,
) -> list[ContentCheck]:
    """:func:`check_content` with the Xet hash of the bytes under ``root`` (only of ``hashable`` paths
    when given; only of files whose remote carries a comparable Xet hash)."""
    candidates = set(expected_sha256 if hashable is None else hashable)
    paths = sorted(p for p in candidates if p in tree and tree[p].xet_hash not in (None, REDACTED))
    return check_content(tree, expected_sha256, xet_digests(root, paths, cache_path))


def content_problems(checks: list[ContentCheck], code_prefix: str, fix: str) -> list[Problem]:
    """A problem for every Xet mismatch and every redacted hash; sha256 mismatches are the callers'
    own findings (they predate Xet and name the sha256 values)."""
    problems = []
    for check in checks:
        if check.xet == "mismatch":
            problems.append(
                Problem(
                    f"{code_prefix}.xet-mismatch",
                    check.path,
                    f"{check.note}: the Hub stores other bytes (sha256 label: {check.sha256})",
                    fix,
                )
            )
        elif "unverifiable" in (check.xet, check.sha256):
            problems.append(
                Problem(
                    f"{code_prefix}.unverifiable",
                    check.path,
                    check.note,
                    "run it with a token that has access to the repo (accept its gate on the Hub)",
                )
            )
    return problems
