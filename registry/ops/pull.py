"""``registry pull``: a registry from the Hub, verified before it appears.

Everything is downloaded into a hidden sibling of the target folder, checked there (the tree's
LFS oids against the downloaded SHA256SUMS, its Xet hashes against the downloaded bytes, then a
full ``validate``: every file's sha256, the index, the card), recorded as published, and only then
renamed into place.  The tree may hold nothing SHA256SUMS does not list but SHA256SUMS itself and
model.sig (.gitattributes included: a remote one that SHA256SUMS does not cover is refused, never
written).  The target either
does not exist or is empty; a failed pull leaves it as it was.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ..artifacts.signature import SignaturePolicy
from ..core.collisions import collision_problems
from ..core.errors import Problem, RegistryError
from ..core.hashing.engine import hash_file
from ..core.models import path_problem
from ..core.names import HUB_DOWNLOAD_CACHE, INDEX_NAME, PRIVATE_DIR, SUMS_NAME
from ..core.progress import Say, silent
from ..core.published import RemoteRecord, record_remote
from ..core.repo import Repo
from ..core.schemas import read_json
from ..hub.content import check_local_bytes, content_problems
from ..hub.listing import remote_findings
from ..hub.local import local_sums
from ..hub.plan import ExistingState, RemoteFile, plain_paths
from ..hub.remote import Hub
from .adopt import AdoptOptions, AdoptReport, adopt
from .validate import validate


def _check_target(target: Path) -> None:
    if target.exists() and not (target.is_dir() and not any(target.iterdir())):
        raise RegistryError(
            "pull.not-empty", target, "exists and is not an empty directory", "pass a new or empty directory"
        )


def _check_download(staging: Path, tree: Mapping[str, RemoteFile], signature: SignaturePolicy) -> dict[str, str]:
    """The downloaded SHA256SUMS, once the download agrees with it, with the tree and with validate."""
    if not (staging / SUMS_NAME).is_file():
        raise RegistryError(
            "pull.no-sums",
            SUMS_NAME,
            "the repo has no SHA256SUMS, so its files cannot be verified",
            "publish the registry with `registry publish`",
        )
    sums = local_sums(Repo(staging))
    plain = {p: hash_file(staging / p) for p in plain_paths(sums, tree)}
    content = check_local_bytes(staging, None, tree, sums)
    findings = [
        *remote_findings(sums, tree, plain),
        *content_problems(content, "pull", "pull from a repo whose files were published intact"),
        *validate(staging),
    ]
    if findings:
        raise RegistryError.of(findings)
    findings = signature.folder_problems(Repo(staging), sums)  # the sha256s it is checked against are true now
    if findings:
        raise RegistryError.of(findings)
    return sums


def _check_tree_paths(repo_id: str, tree: Mapping[str, RemoteFile]) -> None:
    """Refuse a remote tree naming a path that could land outside the download folder, that reads
    as another name, or that is one file with another on macOS and Windows."""
    for path in sorted(tree):
        problem = path_problem(path) or (
            f"{path}, in the tool's private folder, which publish never sends"
            if path.split("/", 1)[0] == PRIVATE_DIR
            else None
        )
        if problem:
            raise RegistryError(
                "remote.bad-path",
                repo_id,
                f"the repo's tree holds {problem} (a hostile or broken remote); nothing was downloaded",
                "pull from a repo you trust, or report it to its owner",
            )
    clashes = list(collision_problems(tree))
    if clashes:
        raise RegistryError.of(
            [
                Problem(
                    "remote.name-collision",
                    repo_id,
                    f"the repo's tree holds {c.message}; nothing was downloaded",
                    "ask the repo's owner to rename all but one of them",
                )
                for c in clashes
            ]
        )


def _is_registry(hub: Hub, state: ExistingState) -> bool:
    """Whether the repo was published by registry: SHA256SUMS and an index.json the tool wrote
    (it always names format_version; a hand-written one need not)."""
    if SUMS_NAME not in state.files or INDEX_NAME not in state.files:
        return False
    with tempfile.TemporaryDirectory(prefix="registry-pull-") as tmp:
        try:
            data = read_json(hub.download(INDEX_NAME, state.head, Path(tmp)), INDEX_NAME)
        except RegistryError:
            return False
    return isinstance(data, dict) and "format_version" in data


def _adopt_download(
    staging: Path, tree: Mapping[str, RemoteFile], options: AdoptOptions
) -> tuple[dict[str, str], AdoptReport]:
    """A hand-made repo, adopted where it was downloaded (adopt checks its own SHA256SUMS, if any,
    first); every LFS file must be the bytes the Hub's tree names."""
    report = adopt(staging, options)
    sums = local_sums(Repo(staging))
    # The downloaded bytes are the ones adopt read (a README.md or index.json it then rewrote
    # included, as in a repo that keeps them in LFS), checked by sha256 against the Hub's tree.
    downloaded = {**sums, **report.read_digests}
    differ = [
        p
        for p, remote in sorted(tree.items())
        if remote.lfs_sha256 and downloaded.get(p) not in (None, remote.lfs_sha256)
    ]
    if differ:
        raise RegistryError(
            "pull.mismatch",
            differ[0],
            "the downloaded bytes are not the ones the Hub's tree names",
            "run the pull again",
        )
    unchanged = [
        p for p in sums if downloaded.get(p) == sums[p]
    ]  # a rewritten file's Xet hash is of its new bytes: checked by sha256 above
    findings = content_problems(
        check_local_bytes(staging, None, tree, sums, unchanged),
        "pull",
        "pull from a repo whose files were published intact",
    )
    if findings:
        raise RegistryError.of(findings)
    return sums, report


@dataclass(frozen=True)
class Pulled:
    root: Path
    files: int
    remote: RemoteRecord
    adopted: AdoptReport | None = None  # the repo was not a registry yet: what adopt did


def pull(
    repo_id: str,
    directory: Path,
    revision: str = "main",
    hub: Hub | None = None,
    say: Say | None = None,
    signature: SignaturePolicy = SignaturePolicy(),
    adopt_options: AdoptOptions | None = None,
    repo_type: str = "model",
    hub_progress: bool = True,
) -> Pulled:
    """Download, verify (model.sig too, when present or required) and atomically place the
    registry at ``directory`` (``repo_type`` "dataset": a dataset registry); a repo that is not a
    registry yet is adopted on the way (``adopt_options``: its --base-file and --trust-files;
    ``hub_progress``: the Hub client's bars)."""
    say = say or silent
    target = Path(directory).absolute()
    _check_target(target)
    hub = hub or Hub(repo_id, revision, repo_type=repo_type, progress=hub_progress)
    state = hub.existing_state()
    _check_tree_paths(repo_id, state.files)
    is_registry, adopted = _is_registry(hub, state), None
    if (
        not is_registry and repo_type == "dataset"
    ):  # its version facts come from flags or a model registry: adopted where it lies
        raise RegistryError(
            "pull.dataset-not-registry", repo_id, "is a hand-made dataset repo, not a registry yet; its versions' facts (the trained file, thinking mode, teacher, dates) are not in its files",
            f"download it (`hf download {repo_id} --repo-type dataset --local-dir DIR`), then run `registry dataset adopt DIR` (with `--models` where a model registry cites its files)",
        )  # fmt: skip
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.pull-{secrets.token_hex(4)}"
    staging.mkdir()  # a plain mkdir: the folder keeps the mode a user's mkdir would give it
    try:
        say(f"downloading {len(state.files)} file(s) of {repo_id}@{state.head[:12]}")
        hub.snapshot(state.head, staging)
        shutil.rmtree(staging / HUB_DOWNLOAD_CACHE, ignore_errors=True)
        if is_registry:
            say("verifying")
            sums = _check_download(staging, state.files, signature)
        else:
            say(f"{repo_id} is not a registry yet: adopting it")
            sums, adopted = _adopt_download(
                staging, state.files, replace(adopt_options or AdoptOptions(), repo_id=repo_id)
            )
        remote = RemoteRecord(repo_id=repo_id, revision=revision, commit=state.head)
        record_remote(Repo(staging), sums, remote)
        os.replace(staging, target)  # an empty target directory is replaced too
        if adopted:
            adopted.root, adopted.given = target, str(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Pulled(target, len(state.files), remote, adopted)
