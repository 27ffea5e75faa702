"""``registry verify-remote``: check the Hub's files against its SHA256SUMS and index.json, and, given
a local registry, the Hub's Xet hashes against the local bytes (:mod:`registry.hub.content`)."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..artifacts.signature import SignaturePolicy
from ..core.errors import Problem
from ..core.hashing.engine import hash_file
from ..core.lfs import Pointer, pointers, read_pointer
from ..core.models import Index
from ..core.names import INDEX_NAME, SIGNATURE_NAME, SUMS_NAME
from ..core.repo import Repo
from ..core.schemas import load_model
from ..core.sums import parse_sums
from ..core.tree import scan_tree
from ..dataset.models import DatasetIndex
from ..dataset.remote import trained_file_findings
from ..hub.content import REDACTED, ContentCheck, check_content, check_local_bytes, content_problems
from ..hub.listing import REPUBLISH, compare_findings, index_findings, remote_findings
from ..hub.local import local_sums
from ..hub.plan import RemoteFile, plain_paths
from ..hub.remote import Hub


@dataclass(frozen=True)
class RemoteReport:
    repo_id: str
    revision: str
    commit: str
    files: int
    problems: list[Problem] = field(default_factory=list)
    content: list[ContentCheck] = field(default_factory=list)
    kept: list[str] = field(
        default_factory=list
    )  # files on the Hub that SHA256SUMS does not list: someone else's, kept by publish

    def as_dict(self) -> dict:
        return {
            "ok": not self.problems,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "commit": self.commit,
            "files": self.files,
            "problems": [p.as_dict() for p in self.problems],
            "content": [c.as_dict() for c in self.content],
            "kept": self.kept,
        }


def verify_remote(
    repo_id: str,
    revision: str = "main",
    registry: Path | None = None,
    hub: Hub | None = None,
    signature: SignaturePolicy = SignaturePolicy(),
    repo_type: str = "model",
    hub_progress: bool = True,
) -> RemoteReport:
    """Check the remote against its SHA256SUMS, index.json and model.sig (and the local registry's
    SHA256SUMS); a dataset repo's index.json against its SHA256SUMS by each version's trained file
    (``hub_progress``: the Hub client's bars)."""
    hub = hub or Hub(repo_id, revision, repo_type=repo_type, progress=hub_progress)
    state = hub.existing_state()
    with tempfile.TemporaryDirectory(prefix="registry-verify-") as tmp:
        sums_bytes = hub.download(SUMS_NAME, state.head, Path(tmp)).read_bytes()
        sums = parse_sums(sums_bytes, f"{repo_id}/{SUMS_NAME}")
        index_file = hub.download(INDEX_NAME, state.head, Path(tmp))
        signer = None
        if hub.repo_type == "dataset":
            index_problems = list(
                trained_file_findings(load_model(index_file, DatasetIndex, f"{repo_id}/{INDEX_NAME}"), sums)
            )
        else:
            index = load_model(index_file, Index, f"{repo_id}/{INDEX_NAME}")
            index_problems, signer = list(index_findings(index, sums)), index.registry.signer
        plain = {p: hash_file(hub.download(p, state.head, Path(tmp))) for p in plain_paths(sums, state.files)}
        signed = (
            hub.download(SIGNATURE_NAME, state.head, Path(tmp)).read_bytes() if SIGNATURE_NAME in state.files else None
        )
    findings = [*remote_findings(sums, state.files, plain), *index_problems]
    findings += signature.problems(signed, sums, sums_bytes, signer)
    content = check_content(state.files, sums, None)
    if registry is not None:
        repo = Repo.open(registry)
        mine = local_sums(repo)
        findings += compare_findings(mine, sums)
        found = _pointers(repo, mine)
        findings += pointer_findings(found, state.files)
        same = [
            p for p, sha in mine.items() if sums.get(p) == sha and p not in found
        ]  # a differing file is reported above
        content = check_local_bytes(
            repo.root, repo.xet_cache_path, state.files, sums, same
        )  # a pointer's bytes: not-compared
    findings += content_problems(content, "remote", REPUBLISH)
    # A file SHA256SUMS does not list is no part of the registry: publish keeps it (someone else's,
    # unless --delete-remote-extra), so it is said, never counted as the registry's failure.
    kept = [p.file for p in findings if p.code == "remote.unlisted-file" and p.file]
    findings = [p for p in findings if p.code != "remote.unlisted-file"]
    return RemoteReport(repo_id, revision, state.head, len(state.files), findings, content, kept)


def _pointers(repo: Repo, listed: dict[str, str]) -> dict[str, Pointer]:
    """The Git LFS pointers standing for listed files in a checkout made without their bytes (CI)."""
    files = set(scan_tree(repo.root).files)  # never a path SHA256SUMS names outside the root or through a link
    read = {rel: read_pointer(repo.root, rel) for rel in pointers(repo.root, [p for p in listed if p in files])}
    return {
        rel: pointer for rel, pointer in read.items() if isinstance(pointer, Pointer)
    }  # a malformed one: validate's finding


def pointer_findings(found: dict[str, Pointer], tree: Mapping[str, RemoteFile]) -> list[Problem]:
    """Each local pointer against the Hub's tree: the Hub's LFS oid and size are the pointer's."""
    problems = []
    for rel, pointer in sorted(found.items()):
        remote = tree.get(rel)
        if remote is not None and (remote.lfs_sha256 not in (pointer.oid, REDACTED) or remote.size != pointer.size):
            problems.append(
                Problem(
                    "remote.pointer-mismatch",
                    rel,
                    f"the local Git LFS pointer says sha256 {pointer.oid[:12]}…, {pointer.size} bytes; the Hub holds {str(remote.lfs_sha256)[:12]}…, {remote.size} bytes",
                    "check out the revision you verify (`--revision` the commit of this checkout)",
                )
            )
    return problems
