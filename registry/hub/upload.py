"""The commit's operations, built so that the Hub is handed no sha256 that was not just checked.

hf_xet stores whatever sha256 the client asserts for a file, beside the bytes it actually chunked
(xet-core does not verify it).  So a large file is handed over by path with *no* sha256: hf_xet
computes it from the very bytes it uploads, and :func:`check_uploaded` compares that with the plan
before anything is committed.  A small file (any file the Hub could keep as a plain git blob) is
read into memory and its sha256 checked on the spot: the commit then sends those bytes, not
whatever the path holds when the commit is built.  A file changed between plan and upload is
refused, and nothing is committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from huggingface_hub import CommitOperationAdd, CommitOperationCopy, CommitOperationDelete

from ..core.errors import RegistryError
from ..core.hashing.digest import sha256_hex
from .local import source
from .plan import Plan, PlannedFile

# Up to this size a file is sent from memory (the Hub keeps files under 10 MB as plain git blobs).
IN_MEMORY = 10 << 20


def _changed(path: str) -> RegistryError:
    return RegistryError(
        "publish.changed-meanwhile",
        path,
        "the file changed while publish was running; nothing was committed",
        "run `registry publish` again",
    )


def _addition(root: Path, planned: PlannedFile, staged: Mapping[str, Path]) -> CommitOperationAdd:
    path = source(root, planned.path, staged)
    if planned.local_file.size > IN_MEMORY:
        return CommitOperationAdd(path_in_repo=planned.path, path_or_fileobj=str(path))  # hashed by the uploader
    data = path.read_bytes()
    if sha256_hex(data) != planned.local_file.sha256:
        raise _changed(planned.path)
    return CommitOperationAdd(path_in_repo=planned.path, path_or_fileobj=data)


def operations(
    root: Path, plan: Plan, staged: Mapping[str, Path] | None = None
) -> list[CommitOperationAdd | CommitOperationDelete]:
    """Every operation of the plan's commit (a file staged by publish's own transaction is sent from
    ``staged``); a small file whose bytes changed since the plan is refused here."""
    ops: list[CommitOperationAdd | CommitOperationDelete] = [_addition(root, f, staged or {}) for f in plan.uploads]
    return ops + [CommitOperationDelete(path_in_repo=f.path) for f in plan.deletions]


def check_uploaded(plan: Plan, ops: list[CommitOperationAdd | CommitOperationDelete]) -> None:
    """After the upload, before the commit: the sha256 the uploader computed from the bytes it sent
    (or was given after the check above) must be the planned one."""
    planned = {f.path: f.local_file.sha256 for f in plan.uploads}
    for op in ops:
        if isinstance(op, CommitOperationAdd) and op.upload_info.sha256.hex() != planned[op.path_in_repo]:
            raise _changed(op.path_in_repo)


def copy_operations(
    source: str, copied: Iterable[str], deleted: Iterable[str]
) -> list[CommitOperationCopy | CommitOperationDelete]:
    """A commit putting ``copied`` back as they are at commit ``source``, copied on the Hub (an LFS
    or Xet file is committed by the oid the Hub holds: nothing is uploaded; huggingface_hub sends
    a plain git file's bytes in the commit itself), and deleting ``deleted``."""
    ops: list[CommitOperationCopy | CommitOperationDelete] = [
        CommitOperationCopy(p, p, src_revision=source) for p in copied
    ]
    return ops + [CommitOperationDelete(path_in_repo=p) for p in deleted]
