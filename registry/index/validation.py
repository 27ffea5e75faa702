"""validate's run over one registry (:class:`Context`) and the checks a model registry and a dataset
registry share: SHA256SUMS against the files on disk, and published files unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.errors import Problem, RegistryError
from ..core.hashing import StatCache
from ..core.hashing.engine import Progress
from ..core.hashing.tree import digest_tree
from ..core.layout import Placement
from ..core.lfs import Pointer
from ..core.models import Index
from ..core.names import MUTABLE, SUMS_NAME
from ..core.published import immutability_findings, published_sums
from ..core.repo import Repo
from ..core.sums import parse_sums, sums_problems
from ..core.tree import TreeScan
from .rules import weight_paths


@dataclass
class Context:
    repo: Repo
    scan: TreeScan
    index: Index
    placements: dict[str, Placement] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # actual sha256 of every file
    listed_sums: dict[str, str] | None = None
    progress: Progress | None = None
    options: dict[str, Any] = field(
        default_factory=dict
    )  # linked, linked_hub, hub_progress, public_key: see validate()
    pointers: dict[str, Pointer] = field(default_factory=dict)  # pointer mode: Git LFS pointers standing for files

    @property
    def root(self) -> Path:
        return self.repo.root


Check = Callable[[Context], Iterator[Problem]]


ACCEPT_BYTES = (
    "restore the original bytes, or accept the new ones with `registry validate --allow-rewrite REASON` (updates "
    "the entry and records why)"
)


def check_sums(ctx: Context) -> Iterator[Problem]:
    """SHA256SUMS lists exactly the files on disk, with their real hashes."""
    ctx.digests = digest_tree(ctx.root, ctx.scan.files, StatCache(ctx.repo.stat_cache_path), ctx.progress)
    ctx.digests.update({rel: pointer.oid for rel, pointer in ctx.pointers.items()})  # an LFS oid is the file's sha256
    if not ctx.repo.sums_path.is_file():
        yield Problem("sums.missing", SUMS_NAME, "SHA256SUMS is missing", "run `registry sums`")
        return
    try:
        ctx.listed_sums = parse_sums(ctx.repo.read_bytes(ctx.repo.sums_path))
    except RegistryError as err:
        yield err.problem.about(SUMS_NAME)
        return
    pinned = set(weight_paths(ctx.index)) | (set(published_sums(ctx.repo)) - MUTABLE)
    for problem in sums_problems(ctx.listed_sums, ctx.digests):
        if problem.file in ctx.pointers:
            yield _pointer_finding(problem, ctx.pointers[problem.file], ctx.listed_sums.get(problem.file))
        else:
            yield (
                replace(problem, fix=ACCEPT_BYTES)
                if problem.code == "sums.mismatch" and problem.file in pinned
                else problem
            )


POINTER_FIX = (
    "check out the commit whose pointers match SHA256SUMS, or fetch the bytes (`git lfs pull`) and run `registry "
    "validate --require-bytes`"
)


def _pointer_finding(problem: Problem, pointer: Pointer, listed: str | None) -> Problem:
    """A SHA256SUMS finding about a Git LFS pointer, said of the pointer: its oid is what differs."""
    if listed is None:
        return Problem(
            "lfs.unlisted",
            problem.file,
            f"a Git LFS pointer (oid {pointer.oid[:12]}…) to a file SHA256SUMS does not list",
            "remove the pointer, or register the file where its bytes are (`git lfs pull`, then `registry "
            "add` or `registry sums`)",
        )
    return Problem(
        "lfs.oid-mismatch",
        problem.file,
        f"the Git LFS pointer's oid is {pointer.oid[:12]}… but SHA256SUMS says {listed[:12]}…",
        POINTER_FIX,
    )


def check_immutable(ctx: Context) -> Iterator[Problem]:
    yield from immutability_findings(ctx.repo, ctx.index, ctx.digests)
