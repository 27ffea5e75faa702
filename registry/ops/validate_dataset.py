"""``registry validate`` on a dataset registry, and the checks that bind weights and data both ways.

A dataset registry is checked like a model registry (schema, layout, SHA256SUMS through the same
code, published files unchanged, the card fresh) and, for every version, against what index.json
states (:mod:`registry.dataset.versions`: row counts, the trained file's sha256, the wire hash of
every row, manifests, the three row forms).  With a linked model registry (``--linked DIR``, or
``--linked-hub``: the model repo at the revision the card was derived from) every weight listed
must still exist and cite its version.  On a model registry, :func:`model_link_findings` checks
every entry's data sha256 against a linked dataset registry (``--linked DIR``, or ``--linked-hub``:
each entry's ``dataset_repo`` at its ``dataset_revision``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import Problem, RegistryError
from ..core.hashing import StatCache, hash_file
from ..core.hashing.engine import Progress
from ..core.models import Index
from ..core.names import DATASET_CHECKED_NAME, DATASET_TOKENS_NAME, INDEX_NAME
from ..core.repo import Repo, is_dataset
from ..core.schemas import read_json, schema_errors
from ..core.tree import scan_tree
from ..dataset import store
from ..dataset.card import card_problems
from ..dataset.checked import CheckedVersions, check_key
from ..dataset.content import TokenCache
from ..dataset.layout import VersionPath, place
from ..dataset.links import citing_problems, listed_problems, local_models
from ..dataset.models import DatasetIndex, DataVersion
from ..dataset.versions import version_problems
from ..index.validation import Context, check_immutable, check_sums  # the model registry's checks of the same files

if TYPE_CHECKING:
    from ..hub.plan import RemoteFile


def _index(repo: Repo) -> tuple[list[Problem], DatasetIndex | None]:
    try:
        data = read_json(repo.index_path, INDEX_NAME)
        problems = [
            Problem(
                "schema.invalid",
                INDEX_NAME,
                f"{where}: {message}",
                f"correct {where} (see schemas/dataset-index.schema.json)",
            )
            for where, message in schema_errors(data, "dataset-index")
        ]
        return (problems, None) if problems else ([], store.load(repo))
    except RegistryError as err:
        return [err.problem.about(INDEX_NAME)], None


def validate_dataset(
    repo: Repo,
    progress: Progress | None = None,
    linked: Path | None = None,
    linked_hub: bool = False,
    hub_progress: bool = True,
) -> list[Problem]:
    """All findings for the dataset registry ``repo`` (empty when clean)."""

    findings, index = _index(repo)
    if index is None:
        return findings
    findings += store.index_problems(index)
    scan = scan_tree(repo.root)
    ctx = Context(repo=repo, scan=scan, index=Index(), progress=progress)  # a dataset holds no weights
    findings += scan.findings
    findings += [_no_rewrite(p) for p in (*check_sums(ctx), *check_immutable(ctx))]
    names = {v.version for v in index.versions}
    by_version: dict[str, dict[str, str]] = {name: {} for name in names}
    for rel in scan.files:
        placed = place(rel, names)
        if isinstance(placed, Problem):
            findings.append(placed)
        elif isinstance(placed, VersionPath) and rel in ctx.digests:
            by_version[placed.version][placed.rel] = ctx.digests[rel]
    checked = CheckedVersions(repo.private / DATASET_CHECKED_NAME)
    tokens = TokenCache(repo.private / DATASET_TOKENS_NAME)
    for version in index.versions:
        files = by_version[version.version]
        key = check_key(version, files)
        if checked.is_clean(version.version, key):
            continue  # these statements, these bytes, these rules: checked clean before
        problems = version_problems(version, files, (repo.root / version.version).joinpath, progress, tokens)
        checked.record(version.version, None if problems else key)
        findings += problems
    checked.save()
    findings += card_problems(index, store.current_card(repo))
    if linked is not None:
        models = local_models(linked)
        for source in index.models:
            if source.repo_id in (None, models.registry.repo_id):
                findings += listed_problems(index, source, models, str(linked))
    if linked_hub:
        from ..dataset.remote import fetch_index  # the Hub client, only for a check against the Hub

        for source in index.models:
            if source.repo_id and source.revision:
                remote, _, _ = fetch_index(source.repo_id, source.revision, "model", Index, progress=hub_progress)
                findings += listed_problems(index, source, remote, f"{source.repo_id}@{source.revision[:12]}")
    return findings


NEW_VERSION = (
    "restore the published bytes: changed data is a new version (`registry dataset add`), trained into new weights"
)


def _no_rewrite(problem: Problem) -> Problem:
    """A dataset's files are not rewritten in place: the model registry's --allow-rewrite fix does not apply."""
    return replace(problem, fix=NEW_VERSION) if "--allow-rewrite" in problem.fix else problem


def local_dataset(path: Path) -> tuple[Repo, DatasetIndex]:
    repo = Repo.open(path)
    if not is_dataset(repo.root):
        raise RegistryError(
            "link.not-a-dataset",
            path,
            'is not a dataset registry (its index.json has no "kind": "dataset")',
            "pass the dataset registry's folder",
        )
    return repo, store.load(repo)


def _trained_sha(repo: Repo, version: DataVersion) -> str | None:
    """The sha256 of a local version's trained file now (the dataset's stat cache is read, never written)."""
    rel = f"{version.version}/{version.trained_file.path}"
    path = repo.root / rel
    if not path.is_file() or path.is_symlink():
        return None
    return StatCache(repo.stat_cache_path).lookup(rel, path.stat()) or hash_file(path)


def model_link_findings(index: Index, options: dict[str, Any]) -> Iterator[Problem]:
    """A model registry's entries against the dataset registries they cite (see the module docstring)."""
    linked = options.get("linked")
    if linked is not None:
        repo, dataset = local_dataset(Path(linked))
        yield from citing_problems(index, dataset, str(linked), lambda version: _trained_sha(repo, version))
    if options.get("linked_hub"):
        from ..dataset.remote import fetch_index

        pinned = sorted(
            {
                (e.data.dataset_repo, e.data.dataset_revision)
                for e in index.entries
                if e.data.dataset_repo and e.data.dataset_revision
            }
        )
        for repo_id, revision in pinned:
            assert repo_id is not None and revision is not None
            dataset, _, tree = fetch_index(
                repo_id, revision, "dataset", DatasetIndex, progress=options.get("hub_progress", True)
            )
            citing = Index(
                bases=index.bases,
                entries=[
                    e for e in index.entries if (e.data.dataset_repo, e.data.dataset_revision) == (repo_id, revision)
                ],
            )

            def remote_sha(version: DataVersion, tree: Mapping[str, RemoteFile] = tree) -> str | None:
                remote = tree.get(f"{version.version}/{version.trained_file.path}")
                return remote.lfs_sha256 if remote else None

            yield from citing_problems(citing, dataset, f"{repo_id}@{revision[:12]}", remote_sha)
