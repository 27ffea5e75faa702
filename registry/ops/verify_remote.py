"""``registry verify-remote``: check the Hub's files against its SHA256SUMS and index.json."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..dataset.models import DatasetIndex
from ..errors import Problem
from ..hub.local import local_sums
from ..hub.plan import plain_paths
from ..hub.remote import Hub
from ..hub.verify import compare_findings, index_findings, remote_findings, sha256_file, trained_file_findings
from ..models import Index
from ..repo import INDEX_NAME, Repo
from ..schemas import load_model
from ..sums import SUMS_NAME, parse_sums


@dataclass(frozen=True)
class RemoteReport:
    repo_id: str
    revision: str
    commit: str
    files: int
    problems: list[Problem] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "ok": not self.problems,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "commit": self.commit,
            "files": self.files,
            "problems": [p.as_dict() for p in self.problems],
        }


def verify_remote(repo_id: str, revision: str = "main", registry: Path | None = None, hub: Hub | None = None, repo_type: str = "model") -> RemoteReport:
    """Check the remote against its SHA256SUMS and index.json (and the local registry's SHA256SUMS);
    a dataset repo's index.json against its SHA256SUMS by each version's trained file."""
    hub = hub or Hub(repo_id, revision, repo_type=repo_type)
    state = hub.existing_state()
    with tempfile.TemporaryDirectory(prefix="registry-verify-") as tmp:
        sums = parse_sums(hub.download(SUMS_NAME, state.head, Path(tmp)).read_bytes(), f"{repo_id}/{SUMS_NAME}")
        index_file = hub.download(INDEX_NAME, state.head, Path(tmp))
        if hub.repo_type == "dataset":
            index_problems = list(trained_file_findings(load_model(index_file, DatasetIndex, f"{repo_id}/{INDEX_NAME}"), sums))
        else:
            index_problems = list(index_findings(load_model(index_file, Index, f"{repo_id}/{INDEX_NAME}"), sums))
        plain = {p: sha256_file(hub.download(p, state.head, Path(tmp))) for p in plain_paths(sums, state.files)}
    findings = [*remote_findings(sums, state.files, plain), *index_problems]
    if registry is not None:
        findings += compare_findings(local_sums(Repo.open(registry)), sums)
    return RemoteReport(repo_id, revision, state.head, len(state.files), findings)
