"""``registry dataset link``: derive the card's table of weights trained on each version from a
model registry (a local folder, or a Hub model repo at a revision), matched by data sha256.

The table is recorded in index.json (``models``: the source and its weights) so the card stays a
pure function of the index; ``validate --linked`` / ``--linked-hub`` checks it is still true.
Refused when the model registry has a weight that cites this dataset with data in no version.
"""

from __future__ import annotations

from pathlib import Path

from ..core.atomic import transaction
from ..core.errors import RegistryError
from ..core.models import Index
from ..core.names import INDEX_NAME
from ..core.repo import Repo, render_index
from ..dataset import store
from ..dataset.links import citing_problems, local_models, trained_weights
from ..dataset.models import ModelSource
from ..dataset.remote import fetch_index


def link_models(
    root: Path,
    models: Path | None = None,
    repo_id: str | None = None,
    revision: str = "main",
    hub_progress: bool = True,
) -> ModelSource:
    """Record the weights of ``models`` (local) or ``repo_id``@``revision`` (Hub) trained on this dataset's versions
    (``hub_progress``: the Hub client's bars)."""
    if (models is None) == (repo_id is None):
        raise RegistryError(
            "args.conflict",
            "--models",
            "give either a local model registry or --repo-id",
            "pass --models DIR, or --repo-id NS/NAME [--revision REV]",
        )
    index: Index
    if models is not None:
        index = local_models(models)
        source_repo, commit = index.registry.repo_id, None
    else:
        assert repo_id is not None
        index, commit, _ = fetch_index(repo_id, revision, "model", Index, progress=hub_progress)
        source_repo = repo_id
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        dataset = store.index_to_change(repo)
        problems = list(citing_problems(index, dataset, "this dataset"))
        if problems:
            raise RegistryError.of(problems)  # one line per weight, each with its fix
        source = ModelSource(repo_id=source_repo, revision=commit, weights=trained_weights(index, dataset))
        dataset.models = [s for s in dataset.models if not same_registry(s, source_repo, index)] + [source]
        txn.write(INDEX_NAME, render_index(dataset))
        store.stage_derived(repo, txn, dataset)
    return source


def same_registry(source: ModelSource, repo_id: str | None, index: Index | None) -> bool:
    """Whether a recorded source is the model registry ``repo_id`` (``index``: its index.json, when read):
    the same repo id, or a local registry not yet published (no repo id) and its published copy,
    which hold the same weight files (a sha256 in common)."""
    if source.repo_id is not None and repo_id is not None:
        return source.repo_id == repo_id
    return index is not None and bool({w.sha256 for w in source.weights} & {e.sha256 for e in index.entries})


def unlink_models(root: Path, models: Path | None = None, repo_id: str | None = None) -> list[ModelSource]:
    """Drop the recorded weights table of ``models`` (a local registry, and its published copy) or of
    ``repo_id``; the card no longer lists them.  The sources removed."""
    if (models is None) == (repo_id is None):
        raise RegistryError(
            "args.conflict",
            "--unlink",
            "name the model registry to unlink with either --models or --repo-id",
            "pass --unlink --models DIR, or --unlink --repo-id NS/NAME",
        )
    index = local_models(models) if models is not None else None
    name = (index.registry.repo_id if index is not None else repo_id) if repo_id is None else repo_id
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        dataset = store.index_to_change(repo)
        gone = [s for s in dataset.models if same_registry(s, name, index)]
        if not gone:
            listed = ", ".join(s.repo_id or "a local registry" for s in dataset.models) or "none"
            raise RegistryError(
                "link.not-linked",
                str(models or repo_id),
                "is not linked to this dataset",
                f"name a linked model registry (linked: {listed})",
            )
        dataset.models = [s for s in dataset.models if s not in gone]
        txn.write(INDEX_NAME, render_index(dataset))
        store.stage_derived(repo, txn, dataset)
    return gone
