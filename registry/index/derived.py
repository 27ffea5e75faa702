"""The files derived from index.json and the tree (the card, evaluation.json, the GGUF files'
Ollama Modelfiles, SHA256SUMS), staged
into a writing command's transaction after its own writes."""

from __future__ import annotations

from collections.abc import Set

from ..card import stage_rendered
from ..core.atomic import Transaction
from ..core.errors import Problem, warn
from ..core.hashing.engine import Progress, hash_file
from ..core.models import Index
from ..core.repo import Repo
from ..core.staged_sums import stage_sums
from ..gguf.modelfile import modelfiles
from ..hf.checkpoint import in_folder, read_manifest, updated_manifest


def stage_derived(
    repo: Repo, txn: Transaction, index: Index, progress: Progress | None = None, absorb: bool | Set[str] = False
) -> dict[str, str]:
    """Stage the files derived from the index (card, evaluation.json, Modelfiles, SHA256SUMS) after
    the other staged writes.

    SHA256SUMS must cover the new index, card and evaluation.json, so they are hashed from the
    staged bytes (``absorb``: see :func:`stage_sums`).
    """
    stage_rendered(repo, txn, index)
    stage_modelfiles(repo, txn, index)
    stage_manifests(repo, txn, index)
    return stage_sums(repo, txn, progress, absorb)


def stage_manifests(repo: Repo, txn: Transaction, index: Index) -> list[str]:
    """Keep each checkpoint's ``checkpoint_manifest.json`` (the author's hash list) in step with
    what this transaction rewrites: a listed file staged here (README.md, the card) gets its new
    sha256 and size in the manifest, in the same commit, and the command says so (a warning
    line, ``warnings`` under --json).  Lines of files the transaction does not write are left as
    the author wrote them (validate names the manifest where they no longer hold).  Returns the
    paths whose lines changed."""
    updated: list[str] = []
    for checkpoint in index.checkpoints:
        manifest = checkpoint.manifest
        if manifest is None:
            continue
        staged_manifest = txn.staged_source(manifest)
        data = staged_manifest.read_bytes() if staged_manifest else repo.read_bytes(repo.root / manifest)
        changed = {}
        for path, line in read_manifest(data, manifest).items():
            source = txn.staged_source(in_folder(checkpoint.folder, path))
            if source is None:
                continue
            sha, size = hash_file(source), source.stat().st_size
            if (sha, size) != (line.sha256, line.size if line.size is not None else size):
                changed[path] = (sha, size)
        new = updated_manifest(data, manifest, changed) if changed else None
        if new is None:
            continue
        txn.write(manifest, new)
        for path in sorted(changed):
            updated.append(in_folder(checkpoint.folder, path))
            warn(
                Problem(
                    "checkpoint.manifest-updated",
                    manifest,
                    f"{path} was rewritten, so its line now holds its new sha256 "
                    f"{changed[path][0][:12]}… ({changed[path][1]} bytes)",
                    "nothing to do: the manifest stays in step with SHA256SUMS, and publish sends both",
                )
            )
    return updated


def stage_modelfiles(repo: Repo, txn: Transaction, index: Index) -> None:
    """Stage the Ollama Modelfile of every GGUF file where it is missing or not the one it derives
    (:mod:`registry.gguf.modelfile`: it depends only on the GGUF's path)."""
    for rel, text in modelfiles([g.path for g in index.ggufs]).items():
        data, path = text.encode("utf-8"), repo.root / rel
        if txn.staged_source(rel) is None and not (
            path.is_file() and not path.is_symlink() and repo.read_bytes(path) == data
        ):
            txn.write(rel, data)
