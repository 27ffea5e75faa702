"""Weights and the data they were trained on, bound both ways by the data sha256.

A model registry's entries record the sha256 of the file the trainer read (``data.sha256``); a
dataset registry's versions record that file and its sha256.  :func:`trained_weights` derives the
dataset card's table from a model index (nothing is typed in by hand); :func:`citing_problems`
checks the model side (every entry's data is a version, still with those bytes);
:func:`listed_problems` the dataset side (every weight listed still exists and cites it).  Both
sides also pair what the weight and its version state (:func:`pairing_problems`: vocabulary,
thinking mode against the profile, stop text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from ..core.errors import Problem, RegistryError
from ..core.models import Entry, Index
from ..core.names import INDEX_NAME
from ..core.repo import Repo, is_dataset
from .models import PROFILES, DatasetIndex, DataVersion, ModelSource, TrainedWeight

RELINK = "run `registry dataset link` again in the dataset registry"


def _cites(entry_repo: str | None, dataset_repo: str | None) -> bool:
    """An entry is about this dataset unless both name a repo and the names differ."""
    return entry_repo is None or dataset_repo is None or entry_repo == dataset_repo


def trained_weights(models: Index, dataset: DatasetIndex) -> list[TrainedWeight]:
    """The model index's weights trained on one of the dataset's versions (twins are shown with their source)."""
    names = {b.sha256: b.name for b in models.bases}
    versions = dataset.by_data_sha()
    return [
        TrainedWeight(
            path=e.path,
            method=e.method,
            base=names.get(e.base_sha256, e.path.split("/", 1)[0]),
            base_sha256=e.base_sha256,
            sha256=e.sha256,
            data_version=e.data.version,
            data_sha256=e.data.sha256,
            recommended=e.recommended,
        )  # fmt: skip
        for e in models.entries
        if e.derived_from is None and e.data.sha256 in versions and _cites(e.data.dataset_repo, dataset.dataset.repo_id)
    ]


def _vocabulary(name: str) -> str:
    return name.removesuffix(".txt")


def pairing_problems(entry: Entry, models: Index, version: DataVersion, file: str) -> Iterator[Problem]:
    """What the weight ``entry`` and the version it was trained on state about the same three things:
    the vocabulary (its base's against the rows'), the thinking mode (its serving profile's against
    the rows'), and the stop text (the weight's stop texts hold the text every row ends with)."""
    base = next((b for b in models.bases if b.sha256 == entry.base_sha256), None)
    data = f"data {version.version}"
    if base is not None and base.vocab and _vocabulary(base.vocab) != _vocabulary(version.vocabulary):
        yield Problem(
            "link.vocabulary-mismatch", file, f"{entry.path}'s base {base.name} uses vocabulary {base.vocab}, but {data} was checked against {version.vocabulary}",
            "train on data checked against the base's vocabulary (a new vocabulary is a new data version), or correct the base's vocab",
        )  # fmt: skip
    profile = entry.serving.profile if entry.serving else None
    known = PROFILES.get(profile or "")
    if known is not None and known.thinking != version.thinking:
        yield Problem(
            "link.thinking-mismatch", file, f"{entry.path} is served with profile {profile} (thinking={known.thinking}), but {data} was rendered with thinking={version.thinking} ({version.profile or 'no profile stated'})",
            "serve the weight with the profile its data was rendered in (seed 001: MiSS 必须用 g1k-think), or correct serving.profile",
        )  # fmt: skip
    elif profile and known is None and version.profile and profile != version.profile:
        yield Problem(
            "link.thinking-mismatch",
            file,
            f"{entry.path} is served with profile {profile}, but {data} was rendered for profile {version.profile}",
            "serve the weight with the profile its data was rendered in, or correct serving.profile",
        )
    stops = entry.stop.texts if entry.stop else []
    if stops and version.stop and version.stop not in stops:
        yield Problem(
            "link.stop-mismatch", file, f"{entry.path} stops at {', '.join(repr(t) for t in stops)}, but every row of {data} ends with {version.stop!r}, the text it learned to stop at",
            f"add {version.stop!r} to the entry's stop texts, or train on data ending in its stop text",
        )  # fmt: skip


def citing_problems(
    models: Index, dataset: DatasetIndex, where: str, actual: Callable[[DataVersion], str | None] | None = None
) -> Iterator[Problem]:
    """The model side: every entry that cites this dataset names a version by its sha256 and name,
    and (``actual``: the trained file's sha256 now, None when unknown) the file still has those bytes."""
    versions = dataset.by_data_sha()
    seen: dict[str, str | None] = {}  # the trained file's sha256 now, by version: each read once

    def now(version: DataVersion) -> str | None:
        if actual is None:
            return None
        if version.version not in seen:
            seen[version.version] = actual(version)
        return seen[version.version]

    for entry in models.entries:
        if not _cites(entry.data.dataset_repo, dataset.dataset.repo_id):
            continue
        data = entry.data
        if data.sha256 is None:  # seed 000: a dataset repo and a revision, no file hash
            yield Problem(
                "link.no-data-sha256", entry.path, f"names its data by {data.dataset_repo} at revision {data.dataset_revision}, with no file sha256, so it cannot be matched to a version of {where} by hash",
                "to check it by its bytes, record the sha256 of the file the trainer read (train.json's data.sha256 and the entry's); until then this link is checked by hand",
            )  # fmt: skip
            continue
        version = versions.get(data.sha256)
        if version is None:
            yield Problem(
                "link.data-not-in-dataset",
                entry.path,
                f"was trained on data {data.version} sha256 {data.sha256[:12]}…, which is no version of {where}",
                "record the data sha256 the trainer really read (train.json), or add that version to the dataset registry",
            )
        elif version.version != data.version:
            yield Problem(
                "link.version-mismatch",
                entry.path,
                f"says data version {data.version}, but sha256 {data.sha256[:12]}… is version {version.version} of {where}",
                f"record data version {version.version}",
            )
        elif (found := now(version)) is not None and found != data.sha256:
            yield Problem(
                "link.data-changed", f"{where}/{version.version}/{version.trained_file.path}",
                f"the file {entry.path} was trained on now has sha256 {found[:12]}…, not the {data.sha256[:12]}… the weight cites",
                "restore the file the weights were trained on (changed data is a new version, with new weights)",
            )  # fmt: skip
        else:
            yield from pairing_problems(entry, models, version, entry.path)


def listed_problems(dataset: DatasetIndex, source: ModelSource, models: Index, where: str) -> Iterator[Problem]:
    """The dataset side: every weight listed from ``source`` still exists there, with the same bytes,
    and cites the same data; and no weight trained on a version is missing from the list."""
    entries = {e.path: e for e in models.entries}
    versions = dataset.by_data_sha()
    for weight in source.weights:
        entry = entries.get(weight.path)
        if entry is None:
            yield Problem(
                "link.weight-gone",
                INDEX_NAME,
                f"lists {weight.path} as trained on {weight.data_version}, but {where} has no such weight",
                RELINK,
            )
        elif entry.sha256 != weight.sha256:
            yield Problem(
                "link.weight-changed",
                INDEX_NAME,
                f"lists {weight.path} with sha256 {weight.sha256[:12]}…, but in {where} it is {entry.sha256[:12]}…",
                RELINK,
            )
        elif entry.data.sha256 != weight.data_sha256:
            yield Problem(
                "link.weight-cites-other",
                INDEX_NAME,
                f"lists {weight.path} as trained on {weight.data_version}, but in {where} it cites data {entry.data.identity}",
                RELINK,
            )
        elif (version := versions.get(weight.data_sha256)) is not None:
            yield from pairing_problems(entry, models, version, INDEX_NAME)
    listed = {w.path for w in source.weights}
    for weight in trained_weights(models, dataset):
        if weight.path not in listed:
            yield Problem(
                "link.weight-unlisted",
                INDEX_NAME,
                f"{where} has {weight.path}, trained on {weight.data_version}, which the card does not list",
                RELINK,
            )


def local_models(path: Path) -> Index:
    repo = Repo.open(path)
    if is_dataset(repo.root):
        raise RegistryError(
            "link.not-a-model-registry",
            path,
            "is a dataset registry",
            "pass the model registry trained on this dataset to --linked",
        )
    return repo.load_index()
