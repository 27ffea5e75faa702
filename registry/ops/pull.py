"""``registry pull``: a registry from the Hub, verified before it appears.

Everything is downloaded into a hidden sibling of the target folder, checked there (the tree's
LFS oids against the downloaded SHA256SUMS, then a full ``validate``: every file's sha256, the
index, the card), recorded as published, and only then renamed into place.  The target either
does not exist or is empty; a failed pull leaves it as it was.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import Problem, RegistryError
from ..hub.local import local_sums
from ..hub.plan import RemoteFile, plain_paths
from ..hub.record import RemoteRecord, record_remote
from ..hub.remote import Hub
from ..hub.verify import remote_findings, sha256_file
from ..models import path_problem
from ..names import collision_problems
from ..repo import Repo
from ..sums import SUMS_NAME
from .validate import validate

# snapshot_download(local_dir=...) keeps its bookkeeping here; it is no part of the registry.
DOWNLOAD_METADATA = ".cache"


def _check_target(target: Path) -> None:
    if target.exists() and not (target.is_dir() and not any(target.iterdir())):
        raise RegistryError("pull.not-empty", target, "exists and is not an empty directory", "pass a new or empty directory")


def _check_download(staging: Path, tree: Mapping[str, RemoteFile]) -> dict[str, str]:
    """The downloaded SHA256SUMS, once the download agrees with it, with the tree and with validate."""
    if not (staging / SUMS_NAME).is_file():
        raise RegistryError("pull.no-sums", SUMS_NAME, "the repo has no SHA256SUMS, so its files cannot be verified", "publish the registry with `registry publish`")
    sums = local_sums(Repo(staging))
    plain = {p: sha256_file(staging / p) for p in plain_paths(sums, tree)}
    findings = [*remote_findings(sums, tree, plain), *validate(staging)]
    if findings:
        raise RegistryError.of(findings)
    return sums


def _check_tree_paths(repo_id: str, tree: Mapping[str, RemoteFile]) -> None:
    """Refuse a remote tree naming a path that could land outside the download folder, that reads
    as another name, or that is one file with another on macOS and Windows."""
    for path in sorted(tree):
        problem = path_problem(path)
        if problem:
            raise RegistryError("remote.bad-path", repo_id, f"the repo's tree holds {problem} (a hostile or broken remote); nothing was downloaded", "pull from a repo you trust, or report it to its owner")
    clashes = list(collision_problems(tree))
    if clashes:
        raise RegistryError.of(
            [Problem("remote.name-collision", repo_id, f"the repo's tree holds {c.message}; nothing was downloaded", "ask the repo's owner to rename all but one of them") for c in clashes]
        )


@dataclass(frozen=True)
class Pulled:
    root: Path
    files: int
    remote: RemoteRecord


def pull(repo_id: str, directory: Path, revision: str = "main", hub: Hub | None = None, say: Callable[[str], None] | None = None) -> Pulled:
    """Download, verify and atomically place the registry at ``directory``."""
    say = say or (lambda _line: None)
    target = Path(directory).absolute()
    _check_target(target)
    hub = hub or Hub(repo_id, revision)
    state = hub.existing_state()
    _check_tree_paths(repo_id, state.files)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.pull-{secrets.token_hex(4)}"
    staging.mkdir()  # a plain mkdir: the folder keeps the mode a user's mkdir would give it
    try:
        say(f"downloading {len(state.files)} file(s) of {repo_id}@{state.head[:12]}")
        hub.snapshot(state.head, staging)
        shutil.rmtree(staging / DOWNLOAD_METADATA, ignore_errors=True)
        say("verifying")
        sums = _check_download(staging, state.files)
        remote = RemoteRecord(repo_id=repo_id, revision=revision, commit=state.head)
        record_remote(Repo(staging), sums, remote)
        os.replace(staging, target)  # an empty target directory is replaced too
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Pulled(target, len(state.files), remote)
