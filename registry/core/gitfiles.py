"""The git files a registry keeps beside its own: ``.gitignore`` (the tool's private folder stays
out of commits) and ``.gitattributes`` (weights go through LFS).  A user's existing file is
extended, never replaced; :func:`ignore_private` and :func:`lfs_attributes` return the new bytes, or None
when nothing is missing; :func:`stage_git_files` stages what a registry lacks (init, adopt, export-gguf)."""

from __future__ import annotations

from .atomic import Transaction
from .names import GITATTRIBUTES_NAME, GITIGNORE_NAME, PRIVATE_DIR
from .repo import GITATTRIBUTES, Repo

IGNORE_LINE = f"{PRIVATE_DIR}/"


def _appended(existing: bytes, lines: list[str]) -> bytes:
    head = existing if not existing or existing.endswith(b"\n") else existing + b"\n"
    return head + "".join(f"{line}\n" for line in lines).encode()


def ignore_private(existing: bytes | None) -> bytes | None:
    """``.gitignore`` with the private folder ignored (statcache, gates, journal stay out of commits).
    A file with any rule for it already (``.registry/*`` with ``!.registry/gates/``, say) is the
    user's choice and is left alone."""
    existing = existing or b""
    rules = [line.strip().lstrip("/") for line in existing.decode("utf-8", errors="replace").splitlines()]
    return (
        None
        if any(rule == PRIVATE_DIR or rule.startswith(f"{PRIVATE_DIR}/") for rule in rules)
        else _appended(existing, [IGNORE_LINE])
    )


def lfs_attributes(existing: bytes | None, wanted: str = GITATTRIBUTES) -> bytes | None:
    """``.gitattributes`` routing the ``wanted`` patterns through LFS (a model registry's
    ``*.pth`` and ``*.safetensors``, which the Hub's own default file already routes; a user's
    other lines are kept)."""
    if existing is None:
        return wanted.encode()
    present = {
        line.split()[0] for line in existing.decode("utf-8", errors="replace").splitlines() if "filter=lfs" in line
    }
    missing = [line for line in wanted.splitlines() if line.split()[0] not in present]
    return _appended(existing, missing) if missing else None


def git_file_changes(repo: Repo, attributes: str = GITATTRIBUTES) -> dict[str, bytes]:
    """.gitignore and .gitattributes extended (or written) with what a registry needs, where they
    lack it (``attributes``: the LFS lines, a model registry's by default)."""
    changes = {}
    for name, extended in (
        (GITIGNORE_NAME, ignore_private),
        (GITATTRIBUTES_NAME, lambda existing: lfs_attributes(existing, attributes)),
    ):
        path = repo.root / name
        data = extended(repo.read_bytes(path) if path.is_file() or path.is_symlink() else None)
        if data is not None:
            changes[name] = data
    return changes


def stage_git_files(repo: Repo, txn: Transaction, attributes: str = GITATTRIBUTES) -> None:
    for name, data in git_file_changes(repo, attributes).items():
        txn.write(name, data)
