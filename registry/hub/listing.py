"""Does a remote tree's listing hold what its SHA256SUMS says: the pure comparisons, no Hub and no file read.

``registry verify-remote``'s steps (download SHA256SUMS, index.json and the plain files, hash them,
compare, report) are :mod:`registry.ops.verify_remote`; ``registry pull`` runs
:func:`remote_findings` on what it downloaded.  LFS files are judged by the sha256 oid the tree
listing reports; plain git files (the card, the JSON files: the Hub keeps anything over 10 MB in
LFS) by the sha256 of their downloaded bytes, which the caller passes in.  index.json must agree
with SHA256SUMS, and, given a local registry, the local SHA256SUMS with the remote one.

The Xet comparison stays in :mod:`registry.hub.content`: it is another question (do the Hub's
stored chunks hash to the local bytes, whatever SHA256SUMS says) and publish asks it too.  The
Transformers export check, :mod:`registry.hf.verify`, is no part of verify-remote.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..core.errors import Problem
from ..core.models import Index
from ..core.names import UNLISTED_OK
from .content import REDACTED
from .gates import entry_files
from .plan import RemoteFile

REPUBLISH = "put the registry's bytes back with `registry publish --restore`, run from the registry that holds them"


def remote_findings(
    sums: Mapping[str, str], tree: Mapping[str, RemoteFile], plain_sha256: Mapping[str, str]
) -> Iterator[Problem]:
    """Every file SHA256SUMS lists is in the tree with that sha256 (LFS oid, or the hash of the plain
    file's bytes in ``plain_sha256``), and the tree holds nothing it does not list."""
    for path, sha in sorted(sums.items()):
        remote = tree.get(path)
        if remote is None:
            yield Problem("remote.missing-file", path, "listed in the remote SHA256SUMS but not in the repo", REPUBLISH)
            continue
        actual = remote.lfs_sha256 or plain_sha256.get(path)
        if actual != sha and actual != REDACTED:  # a redacted oid is unverifiable, not wrong (see .content)
            yield Problem(
                "remote.mismatch",
                path,
                f"the Hub holds sha256 {str(actual)[:12]}… but its SHA256SUMS says {sha[:12]}…",
                REPUBLISH,
            )
    for path in sorted(set(tree) - set(sums) - UNLISTED_OK):
        yield Problem(
            "remote.unlisted-file",
            path,
            "in the repo but not in its SHA256SUMS",
            "publish with --delete-remote-extra, or add the file to the registry",
        )


def index_findings(index: Index, sums: Mapping[str, str]) -> Iterator[Problem]:
    """Every file of every entry in index.json is listed in SHA256SUMS with the entry's sha256."""
    for entry in index.entries:
        expected = {entry.path: entry.sha256, **{s.path: s.sha256 for s in entry.shards}}
        for path in entry_files(entry):
            if sums.get(path) != expected[path]:
                yield Problem("remote.index-mismatch", path, "index.json and SHA256SUMS on the Hub disagree", REPUBLISH)


def compare_findings(local: Mapping[str, str], remote: Mapping[str, str]) -> Iterator[Problem]:
    """The local SHA256SUMS against the remote one."""
    for path in sorted(set(local) | set(remote)):
        if path not in remote:
            yield Problem(
                "local.unpublished", path, "in the local registry but not on the Hub", "run `registry publish`"
            )
        elif path not in local:
            yield Problem(
                "local.missing",
                path,
                "on the Hub but not in the local registry",
                "run `registry pull` into a new folder, or publish the deletion",
            )
        elif local[path] != remote[path]:
            yield Problem(
                "local.differs",
                path,
                f"local sha256 {local[path][:12]}… but the Hub's is {remote[path][:12]}…",
                "restore the published bytes, or publish a recorded rewrite",
            )
