"""What the registry remembers of the Hub: the published SHA256SUMS and where it went.

``.registry/published/SHA256SUMS`` is the immutability record (see :mod:`registry.published`);
``.registry/published/remote.json`` says which repo, revision and commit it describes.  Both are
written only after the remote was verified to hold exactly those bytes.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..atomic import atomic_write
from ..names import REMOTE_NAME
from ..published import record_published
from ..repo import Repo


class RemoteRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repo_id: str
    revision: str
    commit: str


def record_remote(repo: Repo, sums: dict[str, str], remote: RemoteRecord) -> None:
    record_published(repo, sums)
    atomic_write(repo.published_dir / REMOTE_NAME, (remote.model_dump_json(indent=2) + "\n").encode())

