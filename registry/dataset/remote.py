"""The other registry of a link, read from the Hub at a pinned commit through the Hub client."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from ..core.errors import Problem
from ..core.names import INDEX_NAME
from ..core.schemas import load_model
from ..hub.listing import REPUBLISH
from ..hub.plan import RemoteFile
from ..hub.remote import Hub
from .models import DatasetIndex

M = TypeVar("M", bound=BaseModel)


def fetch_index(
    repo_id: str, revision: str, repo_type: str, model: type[M], progress: bool = True
) -> tuple[M, str, Mapping[str, RemoteFile]]:
    """index.json of ``repo_id`` at ``revision``, the commit it resolved to, and the tree there
    (whose LFS oids are the files' sha256); ``progress``: the Hub client's bars."""
    hub = Hub(repo_id, revision, repo_type=repo_type, progress=progress)
    state = hub.existing_state()
    with tempfile.TemporaryDirectory(prefix="registry-link-") as tmp:
        index = load_model(
            hub.download(INDEX_NAME, state.head, Path(tmp)), model, f"{repo_id}@{state.head[:12]}/{INDEX_NAME}"
        )
    return index, state.head, state.files


def trained_file_findings(index: DatasetIndex, sums: Mapping[str, str]) -> Iterator[Problem]:
    """A dataset repo: every version's trained file is listed in SHA256SUMS with the sha256 weights cite."""
    for version in index.versions:
        path = f"{version.version}/{version.trained_file.path}"
        if sums.get(path) != version.trained_file.sha256:
            yield Problem("remote.index-mismatch", path, "index.json and SHA256SUMS on the Hub disagree", REPUBLISH)
