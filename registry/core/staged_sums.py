"""SHA256SUMS staged into a transaction for the tree as it will be once the transaction commits,
refusing to launder a change made behind the tool's back; the digests of the files the tool wrote
kept in the stat cache."""

from __future__ import annotations

import stat
from collections.abc import Callable, Mapping, Set
from pathlib import Path

from .atomic import Transaction
from .errors import Problem, RegistryError, warn
from .hashing import StatCache
from .hashing.engine import Progress
from .hashing.tree import digest_tree
from .layout import is_excluded
from .lfs import refuse_pointers
from .names import CARRIED, SIGNATURE_NAME, SUMS_NAME
from .repo import Repo
from .sums import parse_sums, render_sums, sums_problems
from .tree import scan_tree

STALE_SIGNATURE_FIX = "registry sign --key KEY.pem (sign again over the files as they are now)"


def stage_sums(
    repo: Repo,
    txn: Transaction,
    progress: Progress | None = None,
    absorb: bool | Set[str] = False,
    known: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Stage SHA256SUMS for the tree as it will be once ``txn`` commits.

    Only the files ``txn`` writes get new lines, and those it removes lose theirs.  Every other
    file must still be what SHA256SUMS says, or the command refuses with validate's findings: an
    unrelated write must never launder a change made behind the tool's back into the registry's
    own checksums.  The same holds for the files a command rewrites from their own old bytes
    (:data:`registry.core.names.CARRIED`): their bytes on disk are checked before the new ones replace them,
    since a hand edit would be carried into SHA256SUMS by the rewrite.
    ``absorb``: True takes the tree as it is (``registry sums``, ``init``, ``adopt``); a set of
    paths accepts their new bytes (``validate --allow-rewrite``, which records why; ``card``, the
    hand-written section of README.md).  ``known``: sha256 the caller computed, under this lock, of
    files it checked are unchanged since (adopt: not hashed twice).
    """
    staged = {rel: sha for rel, sha in txn.staged_files().items() if not is_excluded(rel)}
    removed = txn.removed_files()
    on_disk = [
        rel for rel in scan_tree(repo.root).files if rel not in removed and (rel not in staged or rel in CARRIED)
    ]
    refuse_pointers(repo.root, on_disk)  # a pointer's hash is not the weight's: never into SHA256SUMS
    known = known or {}
    digests = digest_tree(
        repo.root, [rel for rel in on_disk if rel not in known], StatCache(repo.stat_cache_path), progress
    )
    digests.update({rel: known[rel] for rel in on_disk if rel in known})
    if absorb is not True:
        _require_unchanged(repo, digests, (set(staged) - CARRIED) | removed | set(absorb or ()))
    digests.update(staged)
    new_sums = render_sums(digests)
    txn.write(SUMS_NAME, new_sums)
    txn.after_commit(lambda: remember_digests(repo, staged))
    txn.after_commit(_warn_if_signature_left_stale(repo, new_sums))
    return digests


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size) if stat.S_ISREG(st.st_mode) else None


def _warn_if_signature_left_stale(repo: Repo, new_sums: bytes) -> Callable[[], None]:
    """Every write goes through here: once it commits, a model.sig it did not replace no longer
    signs SHA256SUMS (and the files it lists) when those changed, and the command says so."""
    signature = repo.root / SIGNATURE_NAME
    before = _identity(signature)
    old_sums = (
        repo.read_bytes(repo.sums_path)
        if before and repo.sums_path.is_file() and not repo.sums_path.is_symlink()
        else None
    )

    def check() -> None:
        if before is not None and _identity(signature) == before and old_sums != new_sums:
            warn(
                Problem(
                    "sign.stale",
                    SIGNATURE_NAME,
                    "stale signature: this command changed signed files after `registry sign`",
                    STALE_SIGNATURE_FIX,
                )
            )

    return check


def _require_unchanged(repo: Repo, digests: dict[str, str], written: set[str]) -> None:
    if not repo.sums_path.is_file() and not repo.sums_path.is_symlink():
        raise RegistryError(
            "sums.missing",
            SUMS_NAME,
            "SHA256SUMS is missing, so the files cannot be checked before this change",
            "run `registry sums` (after checking the files), then this command again",
        )
    listed = {rel: sha for rel, sha in parse_sums(repo.read_bytes(repo.sums_path)).items() if rel not in written}
    problems = sums_problems(listed, {rel: sha for rel, sha in digests.items() if rel not in written})
    if problems:
        raise RegistryError.of(problems)  # one line per file, each with its fix


def remember_digests(repo: Repo, digests: dict[str, str]) -> None:
    """Put files the tool just wrote or moved in the stat cache: their hashes are known, so the
    next command need not read a freshly added multi-GB weight again."""
    cache = StatCache(repo.stat_cache_path)
    for rel, sha in digests.items():
        cache.store(rel, (repo.root / rel).stat(), sha)
    cache.save()
