"""``registry rollback REV``: one Hub commit whose tree is REV's, with no weight sent again.

1. the branch's head and tree are read, and REV's tree; REV must be a release of the registry
   whose files agree with its own SHA256SUMS and index.json (the comparisons ``verify-remote``
   makes), with no path that could land outside the registry;
2. every path whose blob differs from REV's is a server-side copy from REV
   (``CommitOperationCopy``: an LFS or Xet file is committed by the oid the Hub already holds,
   so none is uploaded; a plain git file, small by definition, goes in the commit payload), and
   every path REV does not hold is deleted, all in one commit whose ``parent_commit`` is the head
   read in step 1: a push in between makes the Hub refuse it (nothing is committed);
3. the new commit's tree is checked like publish's (:func:`registry.hub.plan.verify_tree`: every
   path and content id is REV's, nothing else), and the Xet hashes
   (:mod:`registry.hub.content`) against the local bytes where the registry holds them, else
   against REV's own listing;
4. the local registry, when it was exactly the release the head held (nothing unpublished), is
   brought to REV in one transaction (plain files from the verified download, any weight it lacks
   downloaded and checked by sha256; files REV does not hold removed) and the publish record
   names the new commit.  Otherwise it is left alone and the result says how to pull REV.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ..core.atomic import locked_transaction, registry_lock
from ..core.errors import Exit, Problem, RegistryError
from ..core.hashing import StatCache
from ..core.hashing.engine import hash_file
from ..core.hashing.tree import digest_tree
from ..core.hashing.xet import xet_digests
from ..core.models import path_problem
from ..core.names import SUMS_NAME, UNLISTED_OK
from ..core.progress import Say, silent
from ..core.published import RemoteRecord, published_sums, record_remote, recorded_remote
from ..core.repo import Repo
from ..core.sums import parse_sums
from ..core.tree import scan_tree
from ..dataset.models import DatasetIndex
from ..dataset.remote import trained_file_findings
from ..hub.content import ContentCheck, check_content, content_problems
from ..hub.listing import index_findings, remote_findings
from ..hub.local import local_sums
from ..hub.plan import ExistingState, LocalFile, RemoteFile, make_plan, verify_tree
from ..hub.remote import Hub
from ..hub.upload import copy_operations
from ..index.releases import RELEASE_FILES, read_release, registry_hub

FIX_MOVED = "run `registry history` to see what was pushed, then `registry rollback REV` again"


@dataclass(frozen=True)
class Rollback:
    repo_id: str
    revision: str
    head: str  # the commit rolled back from
    target: str  # REV's commit
    copied: tuple[str, ...]
    deleted: tuple[str, ...]
    commit: str | None = None  # None: a dry run, or REV's tree is the head's already
    content: tuple[ContentCheck, ...] = ()
    local: str = "unchanged"  # "updated", "unchanged" (see local_note)
    local_note: str = ""

    def as_dict(self) -> dict:
        return {
            "ok": True, "repo_id": self.repo_id, "revision": self.revision, "from": self.head, "to": self.target, "commit": self.commit,
            "copied": list(self.copied), "deleted": list(self.deleted),
            "content": [c.as_dict() for c in self.content], "local": self.local, "local_note": self.local_note,
        }  # fmt: skip


def _tree_problems(hub: Hub, tree: Mapping[str, RemoteFile]) -> list[Problem]:
    fix = "roll back to a release the registry published"
    return [
        Problem("rollback.bad-path", hub.repo_id, f"REV's tree holds {problem}", fix)
        for p in sorted(tree)
        if (problem := path_problem(p))
    ]


def _read_target(hub: Hub, target: str, tree: Mapping[str, RemoteFile], folder: Path) -> dict[str, str]:
    """REV's SHA256SUMS, once its plain files (downloaded into ``folder``) and its LFS oids agree with it."""
    if SUMS_NAME not in tree:
        raise RegistryError(
            "rollback.not-a-release",
            hub.repo_id,
            f"{target[:12]} holds no SHA256SUMS: it is not a release of a registry",
            "pick a release from `registry history`",
        )
    problems = _tree_problems(hub, tree)
    if problems:
        raise RegistryError.of(problems)
    plain = [p for p, f in tree.items() if f.lfs_sha256 is None]
    for path in plain:
        hub.download(path, target, folder)
    sums = parse_sums((folder / SUMS_NAME).read_bytes(), f"{hub.repo_id}@{target[:12]}/{SUMS_NAME}")
    findings = list(remote_findings(sums, tree, {p: hash_file(folder / p) for p in plain}))
    index = read_release(
        target, {n: folder / n for n in RELEASE_FILES if n in tree}, target, f"{hub.repo_id}@{target[:12]}/"
    ).index
    if isinstance(index, DatasetIndex):
        findings += trained_file_findings(index, sums)
    elif index is not None:
        findings += index_findings(index, sums)
    if findings:
        raise RegistryError.of(
            [
                Problem(
                    f.code,
                    f.file,
                    f"at {target[:12]}: {f.message}",
                    "roll back to a release whose files agree with its SHA256SUMS",
                )
                for f in findings
            ]
        )
    return sums


def _expected(tree: Mapping[str, RemoteFile]) -> dict[str, LocalFile]:
    """REV's files as publish's verification wants them: by LFS oid, or by git blob id."""
    return {p: LocalFile(p, f.lfs_sha256 or "", f.size, f.blob_id) for p, f in tree.items()}


def _verify(
    repo: Repo,
    state: ExistingState,
    tree: Mapping[str, RemoteFile],
    sums: Mapping[str, str],
    after: Mapping[str, RemoteFile],
) -> list[ContentCheck]:
    """The new commit's tree is REV's; the Xet hash of every Xet file is that of the local bytes
    (where the registry holds the same sha256) or REV's own."""
    expected = _expected(tree)
    problems = verify_tree(make_plan(expected, state, delete_extra=True), expected, after)
    mine = local_sums(repo) if repo.sums_path.is_file() else {}
    held = sorted(p for p, sha in sums.items() if mine.get(p) == sha and p in after and after[p].xet_hash)
    xet = {p: f.xet_hash for p, f in tree.items() if f.xet_hash} | (
        xet_digests(repo.root, held, repo.xet_cache_path) or {}
    )
    checks = check_content(after, {p: sums.get(p, f.lfs_sha256 or "") for p, f in tree.items() if f.lfs_sha256}, xet)
    problems += content_problems(checks, "verify", "inspect the commit on the Hub; roll back again")
    if problems:
        raise RegistryError.of(problems)
    return checks


def _local_state(repo: Repo, hub: Hub, head: str) -> str | None:
    """Why the local registry cannot follow the rollback (None: it is exactly the head's release)."""
    record = recorded_remote(repo)
    if record is None or record.repo_id != hub.repo_id or record.commit != head:
        return f"the local record is not of {hub.repo_id}@{head[:12]}"
    on_disk = digest_tree(
        repo.root, scan_tree(repo.root).files, StatCache(repo.stat_cache_path)
    )  # the bytes, not what SHA256SUMS says
    if not repo.sums_path.is_file() or not published_sums(repo) == local_sums(repo) == on_disk:
        return "the local registry holds unpublished changes"
    return None


def _follow(
    repo: Repo, hub: Hub, target: str, sums: Mapping[str, str], tree: Mapping[str, RemoteFile], folder: Path, say: Say
) -> None:
    """Bring the local registry to REV in one transaction (its plain files from ``folder``)."""
    mine = local_sums(repo)
    mine.update({name: hash_file(repo.root / name) for name in UNLISTED_OK if (repo.root / name).is_file()})
    wanted = {**sums, **{p: hash_file(folder / p) for p in UNLISTED_OK if p in tree}}
    with locked_transaction(repo.root) as txn:
        downloads = txn.staging / "rollback-downloads"  # on the registry's file system: moved, not copied
        txn.after_commit(lambda: shutil.rmtree(downloads, ignore_errors=True))
        for path, sha in sorted(wanted.items()):
            if mine.get(path) == sha:
                continue
            if tree[path].lfs_sha256 is None:
                txn.write(path, (folder / path).read_bytes())
                continue
            say(f"downloading {path}")
            downloaded = hub.download(path, target, downloads)
            if hash_file(downloaded) != sha:
                raise RegistryError(
                    "rollback.download-mismatch",
                    path,
                    "the downloaded bytes are not the sha256 REV lists",
                    "run the rollback's pull again",
                )
            staged = txn.staging / f".rollback.{len(txn.staged_files())}"
            os.replace(downloaded, staged)
            txn.move(staged, path, sha)
        for path in sorted(set(mine) - set(wanted)):
            txn.remove(path)
        txn.after_commit(lambda: _prune_empty(repo.root, set(mine) - set(wanted)))


def _prune_empty(root: Path, removed: set[str]) -> None:
    """Remove the folders the removals left empty (a weight's data-version folder)."""
    for path in sorted(removed, key=lambda p: -p.count("/")):
        folder = (root / path).parent
        while folder != root and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent


def rollback(
    root: Path | str, rev: str, repo_id: str | None = None, revision: str = "main", dry_run: bool = False, follow: bool = True,
    hub: Hub | None = None, say: Say | None = None, hub_progress: bool = True,
) -> Rollback:  # fmt: skip
    """Make ``revision`` on the Hub hold REV's tree again in one verified commit; see the module docstring."""
    say = say or silent
    repo = Repo.open(root)
    hub = hub or registry_hub(repo, repo_id, revision, hub_progress)
    if hub is None:
        raise RegistryError(
            "args.missing",
            "--repo-id",
            "no repo id given, in index.json or in the publish record",
            "pass --repo-id NAMESPACE/NAME",
        )
    with registry_lock(repo.root), tempfile.TemporaryDirectory(prefix="registry-rollback-") as tmp:
        state = hub.existing_state()
        target = hub.resolve(rev)
        tree = hub.tree(target)
        say(f"reading {rev} ({target[:12]}) against {hub.revision} ({state.head[:12]})")
        sums = _read_target(hub, target, tree, Path(tmp))
        copied = tuple(
            sorted(p for p, f in tree.items() if p not in state.files or state.files[p].blob_id != f.blob_id)
        )
        deleted = tuple(sorted(set(state.files) - set(tree)))
        result = Rollback(hub.repo_id, hub.revision, state.head, target, copied, deleted)
        if dry_run or not (copied or deleted):
            return result
        why_not = None if follow else "--hub-only"
        why_not = why_not or _local_state(repo, hub, state.head)
        operations = copy_operations(target, copied, deleted)
        say(f"one commit: {len(copied)} file(s) copied from {target[:12]} on the Hub, {len(deleted)} deleted")
        description = "\n".join(
            [
                *(f"restore {p} from {target}" for p in copied),
                *(f"delete {p}" for p in deleted),
                "copied on the Hub by rwkv-registry: no file uploaded again",
            ]
        )
        try:
            commit = hub.commit(
                operations, f"Roll back to {target[:12]}", description, parent=state.head, create_pr=False
            )
        except RegistryError as err:
            if err.problems[0].code == "hub.moved":
                raise RegistryError(
                    "hub.moved",
                    hub.repo_id,
                    f"{hub.revision} moved since it was read at {state.head[:12]}; nothing was committed",
                    FIX_MOVED,
                    Exit.RETRY,
                ) from err
            raise
        say(f"verifying commit {commit.oid[:12]}")
        checks = tuple(_verify(repo, state, tree, sums, hub.tree(commit.oid)))
        pull = f"`registry pull --repo-id {hub.repo_id} --revision {commit.oid} NEW_DIR`"
        result = replace(result, commit=commit.oid, content=checks)
        if why_not is not None:
            return replace(
                result, local_note=f"local registry left as it was ({why_not}); to get the rolled-back registry: {pull}"
            )
        try:
            _follow(repo, hub, target, sums, tree, Path(tmp), say)
        except RegistryError as err:
            problem = err.problems[0]
            note = f"the Hub holds the rollback (commit {commit.oid[:12]}), but the local registry was left as it was ({problem.message}); fix: {pull}"
            raise RegistryError("rollback.local-failed", problem.file, note, pull, err.exit_code) from err
        record_remote(repo, dict(sums), RemoteRecord(repo_id=hub.repo_id, revision=hub.revision, commit=commit.oid))
        return replace(result, local="updated", local_note=f"local registry now holds {target[:12]}'s release")
