"""A dataset registry on disk: telling it from a model registry, reading its index, the rules a
writing command checks first, and the derived files (card, SHA256SUMS) it stages."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Set

from ..core.atomic import Transaction
from ..core.errors import Problem, RegistryError
from ..core.names import CARD_NAME, INDEX_NAME
from ..core.repo import Repo, is_dataset
from ..core.schemas import load_model
from ..core.staged_sums import stage_sums
from .models import DatasetIndex


def load(repo: Repo) -> DatasetIndex:
    if not is_dataset(repo.root) and repo.index_path.is_file():
        raise RegistryError(
            "layout.model-registry",
            INDEX_NAME,
            'this is a model registry (no "kind": "dataset" in index.json)',
            "pass a dataset registry with -C (`registry dataset init` creates one)",
        )
    return load_model(repo.refuse_link(repo.index_path), DatasetIndex, INDEX_NAME)


def index_problems(index: DatasetIndex) -> Iterator[Problem]:
    """What is wrong with a dataset index on its own."""
    for name, count in Counter(v.version for v in index.versions).items():
        if count > 1:
            yield Problem(
                "index.duplicate-version",
                INDEX_NAME,
                f"version {name} listed {count} times",
                "remove the duplicate from versions",
            )
    for sha, count in Counter(v.trained_file.sha256 for v in index.versions).items():
        if count > 1:
            yield Problem(
                "index.duplicate-data",
                INDEX_NAME,
                f"{count} versions name one trained file sha256 {sha[:12]}…",
                "one file is one version: remove the duplicate",
            )
    versions = index.by_data_sha()
    for source in index.models:
        for weight in source.weights:
            version = versions.get(weight.data_sha256)
            if version is None or version.version != weight.data_version:
                yield Problem(
                    "link.unknown-data",
                    INDEX_NAME,
                    f"weight {weight.path} cites data {weight.data_version} "
                    f"sha256 {weight.data_sha256[:12]}…, which is no version here",
                    "run `registry dataset link` again",
                )


def index_to_change(repo: Repo) -> DatasetIndex:
    """The index a writing command builds on, read under its lock; refused while it breaks the rules."""
    index = load(repo)
    problems = list(index_problems(index))
    if problems:
        raise RegistryError.of(problems)  # one line per problem, each with its fix
    return index


def stage_derived(
    repo: Repo,
    txn: Transaction,
    index: DatasetIndex,
    absorb: bool | Set[str] = False,
    card: str | None = None,
    known: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Stage the dataset card and SHA256SUMS after a command's own writes (as the model registry's);
    ``card``: the card already rendered (adopt renders it while planning), ``known``: digests
    already computed (:func:`~registry.core.staged_sums.stage_sums`)."""
    txn.write(CARD_NAME, (card if card is not None else render_card(index, current_card(repo))).encode("utf-8"))
    return stage_sums(repo, txn, absorb=absorb, known=known)


def render_card(index: DatasetIndex, existing: str | None) -> str:
    from .card import render_dataset_card  # the card imports the Jinja2 machinery  # noqa: PLC0415 start-up: light commands import no jinja2 (test_light_commands)

    return render_dataset_card(index, existing)


def current_card(repo: Repo) -> str | None:
    from ..card.render import decode_card  # noqa: PLC0415 start-up: light commands import no jinja2 (test_light_commands)

    path = repo.card_path
    if not (path.is_file() or path.is_symlink()):
        return None
    return decode_card(repo.read_bytes(path))
