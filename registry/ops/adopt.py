"""``registry adopt``: a hand-made Hub repo (a clone or a download) becomes a registry in place.

Everything is checked before anything is written, without the lock and without creating the
private folder, so a refusal leaves the folder exactly as it was:

1. the tree: no links, special files or Git LFS pointers (``git lfs pull`` first);
2. every file is hashed once, and an existing SHA256SUMS must agree with the files, each
   difference named;
3. a hand-written index.json is read for what maps (:mod:`registry.index.handmade`);
4. each ``<base>/`` folder gets its base from ``--base-file`` (read, as add-base reads it), the
   known-bases catalog, or ``--sha256 --metadata-only``; each weight is inspected exactly as
   ``registry add`` inspects it (:func:`registry.artifacts.accept.accept_weight`), each train.json is read
   as people write it (:mod:`registry.core.train`) and checked against its folder, once; a full
   fine-tune at the root (seed 000's ``rwkv-final.pth``) stays there under its name, declared in
   index.json, its base and data version read from the root's train.json;
5. where the hand-written index and the files disagree, or a file it lists is absent, the files
   win only with ``--trust-files``; two recommended files need ``--recommended``, a
   ``.safetensors`` beside a ``.pth`` of the same name with other tensors ``--not-a-twin``;
6. what no field holds is kept as written in index.json's ``kept_facts``; the README's front
   matter in ``registry.front_matter``; the card is rendered (so ``--dry-run`` refuses alike).

Then one transaction (the lock, then the files re-checked unchanged since step 2) writes index.json,
the card (the hand-written README kept whole as its hand-written section), evaluation.json,
SHA256SUMS, .gitattributes and .gitignore; the replaced originals are kept in ``.registry/adopted/``.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..artifacts.accept import BaseRequest, accept_weight, content_version, fingerprint_base
from ..artifacts.twins import twin_difference
from ..card import stage_rendered
from ..card.facts import on_disk
from ..card.handwritten import keep_whole, prose_languages, split_front_matter
from ..card.metadata import added_keys, read_front_matter
from ..card.render import decode_card
from ..card.sync import rendered, stage_kept_card
from ..core.adoptable import check_existing_sums, check_folder, file_identity, require_unchanged
from ..core.atomic import transaction
from ..core.author_evaluation import (
    author_evaluation_of,
    declare_found_evaluations,
    read_author_evaluation,
    root_is_authors,
    stray_evaluations,
)
from ..core.errors import Problem, RegistryError
from ..core.files import dry_run
from ..core.gitfiles import git_file_changes, stage_git_files
from ..core.hashing import hash_files
from ..core.hashing.engine import Progress
from ..core.layout import Placement, export_folder, gguf_folder, is_weight, place
from ..core.lfs import refuse_pointers
from ..core.models import (
    DATA_VERSION_PATTERN,
    METHODS,
    Base,
    Checkpoint,
    DataRef,
    Entry,
    FileRef,
    Index,
    Reference,
    RegistryInfo,
    Serving,
)
from ..core.names import (
    CARD_NAME,
    CONFIG_NAME,
    DERIVED,
    DOCS_DIR,
    EVALUATION_NAME,
    INDEX_NAME,
    SAVED_DIR,
    SHARD_INDEX,
    SUMS_NAME,
    TRAIN_JSON,
)
from ..core.repo import Repo, render_index
from ..core.schemas import read_json
from ..core.staged_sums import remember_digests, stage_sums
from ..core.train import TrainFacts, read_train, train_problems
from ..core.tree import scan_tree
from ..dataset.layout import dataset_repo_signs
from ..hf.checkpoint import (
    base_fit_problems,
    checkpoint_file,
    in_folder,
    is_checkpoint_folder,
    manifest_problems,
    read_checkpoint,
    read_manifest,
)
from ..index.arguments import check_repo_id, require_sha
from ..index.catalog import check_against_catalog, known_base, load_catalog
from ..index.derived import stage_manifests
from ..index.editing import set_recommended
from ..index.handmade import HandIndex, HandReference, read_hand_index
from ..index.rules import index_problems

TRUST_FILES = "--trust-files"
NOT_A_TWIN = "--not-a-twin"


@dataclass(frozen=True)
class AdoptOptions:
    base_files: tuple[Path, ...] = ()
    sha256: str | None = None  # with metadata_only: the one base folder no other source names
    metadata_only: bool = False
    source: str | None = None
    vocab: str | None = None
    trust_files: bool = False  # where the hand-written index.json and the files disagree, the files win
    dry_run: bool = False
    recommended: tuple[str, ...] = ()  # where index.json marks two files of one base and method recommended: these win
    not_twins: tuple[str, ...] = ()  # .safetensors beside a .pth of the same name, registered as weights of their own
    repo_id: str | None = None  # the Hub repo the folder came from (pull): recorded as registry.repo_id


@dataclass
class AdoptReport:
    """What adopt found and did (or, with --dry-run, would do)."""

    root: Path
    dry_run: bool
    index: Index
    writes: list[str] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)
    mapped: list[str] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    overridden: list[str] = field(default_factory=list)
    readme: str = "none"
    disputes: list[Problem] = field(
        default_factory=list, repr=False
    )  # index.json against the files: refused unless --trust-files
    given: str = ""  # the folder as the user named it, for the next steps
    base_paths: dict[str, str] = field(default_factory=dict)  # base name -> --base-file as the user gave it
    front_matter_added: list[str] = field(
        default_factory=list
    )  # what the card's metadata adds to the author's, "key: value"
    read_digests: dict[str, str] = field(
        default_factory=dict, repr=False
    )  # sha256 of every file as adopt read it, before it rewrote any
    manifest_updated: list[str] = field(
        default_factory=list
    )  # files the registry rewrote (README.md) whose line in checkpoint_manifest.json now holds their new sha256

    @property
    def next_steps(self) -> list[str]:
        """The commands still to run, each runnable exactly as printed: the gate, publishing."""
        index, root = self.index, shlex.quote(self.given or str(self.root))
        steps = []
        for base in index.bases:
            if any(e.base_sha256 == base.sha256 for e in index.entries) and base.name in self.base_paths:
                steps.append(f"registry smoke -C {root} --base-file {shlex.quote(self.base_paths[base.name])}")
        if any(c.rwkv7 for c in index.checkpoints) and not steps:
            steps.append(f"registry smoke -C {root}")
        if index.registry.repo_id:
            steps.append(f"registry publish -C {root}")
        return steps

    @property
    def advice(self) -> list[str]:
        """What only the owner can decide, said in words (no command with a blank to fill)."""
        lines = []
        if not self.index.registry.license:
            lines.append(
                "no licence found: the card says none is given; `registry set license` records the SPDX id you choose"
            )
        if not self.index.registry.repo_id:
            lines.append(
                "no repo id found: pass the Hub repo's id to `registry publish --repo-id`, or record it with "
                "`registry set repo-id`"
            )
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "dry_run": self.dry_run,
            "registry": str(self.root),
            "bases": [
                {"name": b.name, "sha256": b.sha256, "source": b.source, "checked": b.architecture is not None}
                for b in self.index.bases
            ],
            "entries": [
                {
                    "path": e.path,
                    "method": e.method,
                    "data_version": e.data.version,
                    "sha256": e.sha256,
                    "recommended": e.recommended,
                    "scores": len(e.scores),
                }
                for e in self.index.entries
            ],
            "writes": self.writes,
            "saved": self.saved,
            "mapped": self.mapped,
            "unmapped": self.unmapped,
            "checkpoints": [
                {
                    "path": c.path,
                    "architecture": c.architecture,
                    "model_type": c.model_type,
                    "initialized_from": c.initialized_from,
                    "gate": "applies" if c.rwkv7 else "does not apply (not RWKV-7)",
                }
                for c in self.index.checkpoints
            ],
            "manifest_updated": self.manifest_updated,
            "overridden": self.overridden,
            "readme": self.readme,
            "next_steps": self.next_steps,
            "advice": self.advice,
            "front_matter": {"kept": list(self.index.registry.front_matter), "added": self.front_matter_added},
        }


@dataclass
class _Plan:
    report: AdoptReport
    digests: dict[str, str]
    identities: dict[str, tuple[int, ...]]
    originals: dict[str, bytes]


def adopt(
    root: Path, options: AdoptOptions, catalog: Index | None = None, progress: Progress | None = None
) -> AdoptReport:
    """Adopt the folder ``root`` (see the module docstring); a refusal changes nothing."""
    given, root = str(root), Path(root).absolute()
    with dry_run(options.dry_run):  # a dry run writes nothing, caches included
        check_folder(root)
        plan = _plan(root, options, catalog if catalog is not None else load_catalog(), progress)
    plan.report.given, plan.report.read_digests = given, dict(plan.digests)
    if options.dry_run:
        return plan.report
    repo = Repo(root)
    with transaction(root) as txn:
        require_unchanged(root, plan.identities)
        txn.write(INDEX_NAME, render_index(plan.report.index))
        for name, data in plan.originals.items():
            txn.write(f"{SAVED_DIR}/{name}", data)
        stage_git_files(repo, txn)
        stage_kept_card(repo, txn)
        stage_rendered(repo, txn, plan.report.index)
        plan.report.manifest_updated = stage_manifests(repo, txn, plan.report.index)
        stage_sums(repo, txn, progress, absorb=True, known=plan.digests)
        txn.after_commit(lambda: remember_digests(repo, plan.digests))
    return plan.report


# ----------------------------------------------------------------------------------------------
# Planning: every check, nothing written


def _plan(root: Path, options: AdoptOptions, catalog: Index, progress: Progress | None) -> _Plan:
    scan = scan_tree(root)
    if scan.findings:
        raise RegistryError.of(scan.findings)
    sign = dataset_repo_signs(scan.files, _front_matter(root, scan.files), any(is_weight(rel) for rel in scan.files))
    if sign:
        raise RegistryError(
            "adopt.dataset-repo",
            root,
            f"{sign}: a dataset repo",
            f"run `registry dataset adopt {shlex.quote(str(root))}`",
        )
    refuse_pointers(root, scan.files)
    identities = {rel: file_identity(os.stat(root / rel, follow_symlinks=False)) for rel in scan.files}
    hashed = hash_files([root / rel for rel in scan.files], progress)
    digests = {path.relative_to(root).as_posix(): sha for path, sha in hashed.items()}
    repo = Repo(root)  # its read_bytes refuses a link (SHA256SUMS is outside the tree walk)
    originals = {
        name: repo.read_bytes(root / name)
        for name in (INDEX_NAME, CARD_NAME, SUMS_NAME)
        if (root / name).is_file() or (root / name).is_symlink()
    }
    check_existing_sums(root, originals.get(SUMS_NAME), digests)
    hand = read_hand_index(read_json(root / INDEX_NAME, INDEX_NAME)) if INDEX_NAME in originals else HandIndex()
    report = AdoptReport(
        root,
        options.dry_run,
        Index(),
        unmapped=list(hand.unmapped),
        saved=sorted(f"{SAVED_DIR}/{n}" for n in originals),
    )
    report.base_paths = {Path(f).name.removesuffix(".pth"): str(f) for f in options.base_files}
    checkpoint = _checkpoint(root, "", scan.files, digests) if is_checkpoint_folder(scan.files) else None
    layout_folders = _layout_checkpoint_folders(scan.files)
    held = ([""] if checkpoint is not None else []) + layout_folders
    files = [rel for rel in scan.files if not any(checkpoint_file(rel, folder) for folder in held)]
    at_root = _root_weights(root, files, hand, options)
    bases = _bases(root, files, options, catalog, hand, report, progress, {p.base for p in at_root.values()})
    under = _layout_checkpoints(root, layout_folders, scan.files, bases, digests, at_root)
    entries = _entries(root, files, bases, digests, options, at_root)
    report.index = _index(bases, entries, hand, originals.get(CARD_NAME), report, options)
    if checkpoint is not None:
        report.index.checkpoints = [_initialized_from(checkpoint, report.index.registry.front_matter, report)]
    report.index.checkpoints += under
    strays = stray_evaluations(scan.files, report.index)
    if strays:
        raise RegistryError.of(strays)
    if options.repo_id is not None:
        report.index.registry.repo_id = options.repo_id
    _claims(report, options)
    _preview_card(repo, report.index, report)
    derived = DERIVED - {EVALUATION_NAME} if root_is_authors(report.index) else DERIVED
    report.writes = sorted(
        {*derived, *git_file_changes(repo), *report.saved, *_manifest_follows(root, checkpoint, derived)}
    )
    return _Plan(report, digests, identities, originals)


def _front_matter(root: Path, files: list[str]) -> dict[str, Any]:
    """The README's front matter as the Hub reads it ({} without one)."""
    if CARD_NAME not in files:
        return {}
    front, _ = split_front_matter(decode_card(Repo(root).read_bytes(root / CARD_NAME)))
    return read_front_matter(front, CARD_NAME) if front.strip() else {}


def _checkpoint(
    root: Path, folder: str, files: list[str], digests: dict[str, str], base: Base | None = None
) -> Checkpoint:
    """The Transformers checkpoint in ``folder`` (the root: seed 004; or ``<base>/full/<v>/[<run>/]``
    on ``base``, whose shape it must have), checked as Transformers loads it and against the
    author's checkpoint_manifest.json; every file stays where it is, byte for byte
    (:mod:`registry.hf.checkpoint`)."""
    facts = read_checkpoint(root, folder, files)
    problems = (
        base_fit_problems(in_folder(folder, CONFIG_NAME), facts.config, base.architecture, base.name) if base else []
    )
    if facts.manifest is not None:
        sizes = {rel: (root / rel).stat().st_size for rel in files}
        data = Repo(root).read_bytes(root / facts.manifest)
        problems += manifest_problems(facts.manifest, data, folder, digests, sizes)
    if problems:
        raise RegistryError.of(problems)

    def ref(rel: str) -> FileRef:
        return FileRef(path=rel, sha256=digests[rel], size=(root / rel).stat().st_size)

    evaluation = author_evaluation_of(root, facts.index)  # the author's, kept byte for byte (seed 004)
    if evaluation is not None:
        read_author_evaluation(root / evaluation, evaluation)
    return Checkpoint(
        path=facts.index,
        sha256=digests[facts.index],
        size=(root / facts.index).stat().st_size,
        architecture=facts.architecture,
        model_type=facts.model_type,
        evaluation=evaluation,
        shards=[ref(rel) for rel in facts.shards],
        files=[ref(rel) for rel in facts.files],
        manifest=facts.manifest,
        base_sha256=base.sha256 if base else None,
    )


def _layout_checkpoint_folders(files: list[str]) -> list[str]:
    """The folders below the root that hold a Transformers checkpoint made by hand (an export
    folder made by hand aside: refused as before, `registry export-hf` makes one)."""
    folders = sorted({rel.rsplit("/", 1)[0] for rel in files if "/" in rel})
    return [f for f in folders if is_checkpoint_folder(files, f) and export_folder(in_folder(f, SHARD_INDEX)) is None]


def _layout_checkpoints(
    root: Path,
    folders: list[str],
    files: list[str],
    bases: dict[str, Base],
    digests: dict[str, str],
    at_root: dict[str, Placement],
) -> list[Checkpoint]:
    """Each checkpoint folder under the layout, ``<base>/full/<data-version>/[<run>/]``, as a full
    fine-tune of its base: the base read (its shape is the config's), the version's train.json
    read for its data; every problem of every folder refused at once, one line each."""
    problems: list[Problem] = []
    found: list[Checkpoint] = []
    trains: dict[str, TrainFacts | RegistryError] = {}
    for folder in folders:
        placed = place(in_folder(folder, SHARD_INDEX), set(bases), at_root)
        if not isinstance(placed, Placement) or placed.method != "full":
            problems.append(
                Problem(
                    "adopt.checkpoint-place",
                    folder,
                    "a Transformers checkpoint folder outside the layout",
                    "move it to <base>/full/<data-version>/ (a full fine-tune of that base) or hold it at the root",
                )
            )
            continue
        base = bases[placed.base]
        try:
            if base.architecture is None:
                raise RegistryError(
                    "adopt.needs-base-file",
                    folder,
                    f"the base {base.name} was not read, so its shapes are unknown and this checkpoint "
                    "cannot be checked",
                    f"pass --base-file {base.filename} (read, not copied)",
                )
            checkpoint = _checkpoint(root, folder, files, digests, base)
            train = _train_json(root, placed, base, trains)
        except RegistryError as err:
            problems.extend(err.problems)
            continue
        except _Reported:
            continue
        data = DataRef(
            version=placed.version,
            sha256=train.data_sha256,
            dataset_repo=train.data.repo,
            dataset_revision=train.data.revision,
        )
        found.append(checkpoint.model_copy(update={"data": data}))
    if problems:
        raise RegistryError.of(problems)
    return found


def _manifest_follows(root: Path, checkpoint: Checkpoint | None, rewritten: frozenset[str]) -> list[str]:
    """The manifest, where it lists a file adopt rewrites (``rewritten``: the card…): its line follows."""
    if checkpoint is None or checkpoint.manifest is None:
        return []
    listed = read_manifest(Repo(root).read_bytes(root / checkpoint.manifest), checkpoint.manifest)
    return [checkpoint.manifest] if set(listed) & rewritten else []


def _initialized_from(checkpoint: Checkpoint, front_matter: dict[str, Any], report: AdoptReport) -> Checkpoint:
    """The repo training started from, where the card says so: its front matter's ``base_model``."""
    named = front_matter.get("base_model")
    repo = named[0] if isinstance(named, list) and len(named) == 1 else named
    if not isinstance(repo, str) or not repo:
        return checkpoint
    report.mapped.append(f"README.md base_model -> checkpoints[{checkpoint.path}].initialized_from ({repo})")
    return checkpoint.model_copy(update={"initialized_from": repo})


def _base_dirs(files: list[str]) -> list[str]:
    """Top-level folders laid out as ``<base>/<method>/…`` (others are checked by the layout rules)."""
    return sorted(
        {
            rel.split("/")[0]
            for rel in files
            if rel.count("/") >= 2 and rel.split("/")[0] != DOCS_DIR and rel.split("/")[1] in METHODS
        }
    )


def _root_weights(root: Path, files: list[str], hand: HandIndex, options: AdoptOptions) -> dict[str, Placement]:
    """The weights at the root, which stay there: full fine-tunes (seed 000's ``rwkv-final.pth``,
    downloaded by that name), their base and data version read from the root's train.json.  One
    root weight (and its ``.safetensors`` twin) is taken as the release; beside another, each must
    be listed in the hand-written index.json."""
    weights = [rel for rel in files if "/" not in rel and is_weight(rel)]
    if not weights:
        return {}
    if TRAIN_JSON not in files:
        raise RegistryError(
            "adopt.missing-train-json",
            TRAIN_JSON,
            f"{weights[0]} sits at the root with no train.json beside it to name its base and training data",
            "write train.json at the root (its base, trainer, hyperparameters, command, and the data: a "
            'sha256, or the dataset repo and revision: docs/formats.md, "train.json"), then adopt again',
        )
    stems = {rel.rsplit(".", 1)[0] for rel in weights}
    if len(stems) > 1:
        unlisted = [rel for rel in weights if hand.entry(rel) is None]
        if unlisted:
            raise RegistryError(
                "adopt.undeclared-root-weight",
                unlisted[0],
                f"one of {len(weights)} weights at the root ({', '.join(weights)}), and index.json does not list it",
                "list each root weight in index.json's entries (or write one if there is none), or move the "
                "others into <base>/full/<data-version>/ with their train.json",
            )
    train = read_train(root / TRAIN_JSON, TRAIN_JSON)
    named = [claim.filename.removesuffix(".pth") for claim in train.bases if claim.filename]
    given = [
        Path(f).name.removesuffix(".pth")
        for f in options.base_files
        if Path(f).name.removesuffix(".pth") not in _base_dirs(files)
    ]
    base = named[0] if named else (given[0] if len(given) == 1 else None)
    if base is None:
        raise RegistryError(
            "adopt.root-base",
            TRAIN_JSON,
            "names no base for the weights at the root",
            f'add "base": "<base file>.pth" to {TRAIN_JSON} (the checkpoint training started from), or pass '
            "--base-file with that file",
        )
    version = train.data.version or "v1"
    version = version if version.startswith("v") else f"v{version}"
    if re.fullmatch(DATA_VERSION_PATTERN, version) is None:
        raise RegistryError(
            "train.invalid",
            TRAIN_JSON,
            f"the data version {train.data.version!r} does not look like v1.41 or v2.1",
            f"write the data version as v<major>[.<minor>] in {TRAIN_JSON}",
        )
    return {rel: Placement(base, "full", version, None, rel, root=True) for rel in weights}


def _bases(
    root: Path,
    files: list[str],
    options: AdoptOptions,
    catalog: Index,
    hand: HandIndex,
    report: AdoptReport,
    progress: Progress | None,
    root_bases: set[str],
) -> dict[str, Base]:
    names = sorted({*_base_dirs(files), *root_bases})
    given = {Path(f).name.removesuffix(".pth"): Path(f) for f in options.base_files}
    for name, path in given.items():
        if name not in names:
            raise RegistryError(
                "adopt.unused-base-file",
                path,
                f"no folder {name}/ of weights in {root}, and the root's train.json names no such base",
                f"pass the base file whose name (without .pth) is one of: {', '.join(names) or 'none here'}",
            )
    unresolved = [n for n in names if n not in given and known_base(catalog, f"{n}.pth") is None]
    if options.metadata_only and len(unresolved) != 1:
        raise RegistryError(
            "adopt.metadata-only",
            root,
            f"--sha256 --metadata-only names one base folder, but {len(unresolved)} have no base "
            f"({', '.join(unresolved) or 'none'})",
            "pass --base-file for each base folder",
        )
    bases: dict[str, Base] = {}
    for name in names:
        request = BaseRequest(path=given.get(name), filename=f"{name}.pth", source=options.source, vocab=options.vocab)
        if name in given:
            base = fingerprint_base(request, name, None, progress)
        elif options.metadata_only and name in unresolved:
            if options.sha256 is None:
                raise RegistryError(
                    "args.missing",
                    "--sha256",
                    "--metadata-only needs --sha256",
                    "pass the base's published sha256 with --sha256",
                )
            base = fingerprint_base(
                BaseRequest(None, request.filename, options.source, options.vocab),
                name,
                require_sha(options.sha256, "--sha256"),
                None,
            )
        elif name in unresolved:
            raise RegistryError(
                "adopt.unknown-base",
                f"{name}/",
                f"{name}.pth is not in the known-bases catalog, so the weights under {name}/ cannot be "
                "checked against it",
                f"pass --base-file {name}.pth (read, not copied)",
            )
        else:
            base = _catalog_base(catalog, name)
        bases[name] = _with_hand_base(check_against_catalog(base, catalog), hand, report)
    return bases


def _catalog_base(catalog: Index, name: str) -> Base:
    known = known_base(catalog, f"{name}.pth")
    assert known is not None, "a base folder that is not unresolved is in the catalog"
    return known


def _with_hand_base(base: Base, hand: HandIndex, report: AdoptReport) -> Base:
    claim = hand.base(base.name, base.filename)
    if claim is None:
        return base
    facts = claim.facts
    for key in ("source", "vocab"):
        if facts.get(key) and getattr(base, key) is None:
            base = base.model_copy(update={key: facts[key]})
            report.mapped.append(f"{claim.where}.{key} -> bases[{base.name}].{key}")
    for score in claim.scores:
        if score.score is not None:
            base.scores.append(score.score)
            report.mapped.append(f"{score.where} -> bases[{base.name}].scores")
    if facts.get("sha256") not in (None, base.sha256):
        _dispute(
            report,
            Problem(
                "adopt.disagrees",
                INDEX_NAME,
                f"{claim.where}.sha256: index.json says {facts['sha256']} but the base is {base.sha256}",
                f"correct index.json or pass the base file it names, or pass {TRUST_FILES} to record the base given",
            ),
        )
    elif facts.get("sha256"):
        report.mapped.append(f"{claim.where}.sha256 (agrees with the base)")
    return base


def _train_json(root: Path, placed: Placement, base: Base, trains: dict[str, TrainFacts | RegistryError]) -> TrainFacts:
    """The data-version folder's train.json, read once: a refusal is raised for its first weight
    and then stands for the others (one line, not one per weight)."""
    rel = placed.train_json
    if rel in trains:
        found = trains[rel]
        if isinstance(found, RegistryError):
            raise _Reported()
        return found
    try:
        if not (root / rel).is_file():
            raise RegistryError(
                "adopt.missing-train-json",
                rel,
                "the weights of this data version have no train.json",
                "write it beside them (trainer, hyperparameters, command, data sha256: docs/formats.md, "
                '"train.json"), then adopt again',
            )
        train = read_train(root / rel, rel)
        problems = train_problems(train, rel, base, placed.version)
        if problems:
            raise RegistryError.of(problems)
    except RegistryError as err:
        trains[rel] = err
        raise
    trains[rel] = train
    return train


class _Reported(Exception):
    """A refusal already reported for another weight of the same folder."""


def _entries(
    root: Path,
    files: list[str],
    bases: dict[str, Base],
    digests: dict[str, str],
    options: AdoptOptions,
    at_root: dict[str, Placement],
) -> list[Entry]:
    problems: list[Problem] = []
    entries: list[Entry] = []
    trains: dict[str, TrainFacts | RegistryError] = {}
    for rel in files:
        placed = place(rel, set(bases), at_root)
        if isinstance(placed, Problem):
            problems.append(placed)
        elif placed is None and rel.split("/")[0] in bases and export_folder(rel) is not None:
            problems.append(
                Problem(
                    "adopt.export-folder",
                    rel,
                    "a Transformers export folder made by hand",
                    "move it out of the folder; `registry export-hf` makes one the registry checks",
                )
            )
        elif placed is None and rel.split("/")[0] in bases and gguf_folder(rel) is not None:
            problems.append(
                Problem(
                    "adopt.gguf-folder",
                    rel,
                    "a GGUF file made by hand, with no record of how",
                    "move it out of the folder; `registry export-gguf` makes one the registry checks",
                )
            )
        elif placed is not None and placed.name == SHARD_INDEX:
            problems.append(
                Problem(
                    "adopt.sharded",
                    rel,
                    "a sharded checkpoint",
                    "adopt the .pth it was converted from and run `registry convert`",
                )
            )
        elif placed is not None and placed.name == EVALUATION_NAME:
            continue  # an author's evaluation.json: declared by the weights beside it (declare_found_evaluations)
        elif placed is not None and placed.name == TRAIN_JSON:
            try:
                _train_json(root, placed, bases[placed.base], trains)
            except RegistryError as err:
                problems.extend(err.problems)
            except _Reported:
                pass
        elif placed is not None:
            try:
                entries.append(_entry(root, rel, placed, bases[placed.base], digests[rel], trains))
            except RegistryError as err:
                problems.extend(err.naming(str(root / rel), rel).problems)
            except _Reported:
                pass
    by_sha: dict[str, str] = {}
    for entry in entries:
        other = by_sha.setdefault(entry.sha256, entry.path)
        if other != entry.path:
            problems.append(
                Problem("entry.duplicate", entry.path, f"the same bytes as {other}", "keep one of the two files")
            )
    problems += _twins(root, entries, options)
    problems += declare_found_evaluations(root, entries)
    if problems:
        raise RegistryError.of(problems)
    return entries


def _twins(root: Path, entries: list[Entry], options: AdoptOptions) -> list[Problem]:
    """A ``.safetensors`` beside a ``.pth`` of the same name is its twin when it holds the same
    tensors (recorded as converted from it); with other tensors it is refused unless
    ``--not-a-twin`` names it: then it is a weight of its own."""
    problems = []
    by_path = {e.path: e for e in entries}
    for entry in entries:
        source = (
            by_path.get(entry.path.removesuffix(".safetensors") + ".pth") if entry.format == "safetensors" else None
        )
        if source is None or entry.path in options.not_twins:
            continue
        difference = twin_difference(root / source.path, root / entry.path)
        if difference is None:
            entry.derived_from, entry.content_version = source.path, source.content_version
        else:
            problems.append(
                Problem(
                    "adopt.twin-differs",
                    entry.path,
                    f"beside {Path(source.path).name} with the same name but {difference}",
                    f"delete the stale one, rename one of them, or pass {NOT_A_TWIN} {entry.path} to "
                    "register it as a weight of its own",
                )
            )
    return problems


def _entry(
    root: Path, rel: str, placed: Placement, base: Base, sha: str, trains: dict[str, TrainFacts | RegistryError]
) -> Entry:
    if base.architecture is None:
        raise RegistryError(
            "adopt.needs-base-file",
            rel,
            f"the base {base.name} was not read, so its shapes are unknown and this weight cannot be checked",
            f"pass --base-file {base.filename} (read, not copied)",
        )
    inspection = accept_weight(root / rel, placed.method, base, rel)
    train = _train_json(root, placed, base, trains)
    data = DataRef(
        version=placed.version,
        sha256=train.data_sha256,
        dataset_repo=train.data.repo,
        dataset_revision=train.data.revision,
    )
    return Entry(
        path=rel,
        method=placed.method,
        base_sha256=base.sha256,
        data=data,
        sha256=sha,
        size=(root / rel).stat().st_size,
        format="safetensors" if rel.endswith(".safetensors") else "pth",
        content_version=content_version(inspection),
    )


# ----------------------------------------------------------------------------------------------
# The hand-written index and README against the files


def _index(
    bases: dict[str, Base],
    entries: list[Entry],
    hand: HandIndex,
    readme: bytes | None,
    report: AdoptReport,
    options: AdoptOptions,
) -> Index:
    info = RegistryInfo()
    text = decode_card(readme) if readme is not None else ""
    front, body = split_front_matter(text)
    title = hand.facts.get("title") or next(
        (line[2:].strip() for line in body.splitlines() if line.startswith("# ")), None
    )
    if title:
        info.title = title
    repo_id = hand.facts.get("repo_id")
    if repo_id is not None:
        try:
            info.repo_id = check_repo_id(repo_id, INDEX_NAME)
            report.mapped.append(f"$.repo_id -> registry.repo_id ({repo_id})")
        except RegistryError as err:
            report.unmapped.append(f"$.repo_id: {repo_id} ({err.message})")
            hand.kept["$.repo_id"] = repo_id
    info.front_matter = read_front_matter(front, CARD_NAME) if front.strip() else {}
    written = info.front_matter.get("license")
    info.license = hand.facts.get("license") or (written if isinstance(written, str) else None)
    if body.strip():
        info.languages = prose_languages(body)
    report.readme = (
        "kept whole as the card's hand-written section" if body.strip() else "none: the card starts from the default"
    )
    index = Index(registry=info, bases=list(bases.values()), entries=entries)
    claimed: list[Entry] = []
    for entry in entries:
        if _apply_hand_entry(index, entry, hand, report):
            claimed.append(entry)
    _recommend(index, claimed, report, options)
    for reference in hand.references:
        _apply_reference(index, reference, report)
    index.kept_facts = dict(hand.kept)
    for claim in hand.entries:
        if index.entry_by_path(claim.path) is None:
            _dispute(
                report,
                Problem(
                    "adopt.listed-missing",
                    INDEX_NAME,
                    f"{claim.where} lists {claim.path}, which is not in the folder",
                    "restore the file (download it again), remove the item from index.json, or "
                    f"pass {TRUST_FILES} to adopt without it",
                ),
            )
    try:
        index = Index.model_validate(index.model_dump(mode="json"))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RegistryError(
            "adopt.invalid",
            INDEX_NAME,
            f"the adopted index would be invalid at {first['loc']}: {first['msg']}",
            "correct the value in the hand-written index.json",
        ) from exc
    problems = index_problems(index)
    if problems:
        raise RegistryError.of(problems)
    return index


# Hand-written facts about an entry, and what the files say of each.
def _file_facts(entry: Entry, base: Base) -> dict[str, Any]:
    return {
        "sha256": entry.sha256,
        "size": entry.size,
        "method": entry.method,
        "data_version": entry.data.version,
        "data_sha256": entry.data.sha256,
        "base_sha256": entry.base_sha256,
        "base": base.name,
        "content_version": entry.content_version,
    }


def _apply_reference(index: Index, claim: HandReference, report: AdoptReport) -> None:
    """An item with a name and no file: weights compared against but not uploaded, a reference on its base."""
    facts = claim.facts
    named = facts.get("base_sha256") or facts.get("base")
    base = (
        next((b for b in index.bases if named in (b.sha256, b.name, b.filename)), None)
        if named
        else (index.bases[0] if len(index.bases) == 1 else None)
    )
    if base is None:
        report.unmapped.append(f"{claim.where}: {facts['name']} (a reference, but on which base is not said)")
        index.kept_facts[claim.where] = {**facts, "scores": [s.fields for s in claim.scores]}
        return
    location = None if facts.get("uploaded") is False else facts.get("location")
    method = facts.get("method") if facts.get("method") in METHODS else None
    reference = Reference(
        name=facts["name"],
        method=method,
        location=location,
        scores=[s.score for s in claim.scores if s.score is not None],
    )
    base.references.append(reference)
    report.mapped.append(f"{claim.where} -> bases[{base.name}].references[{reference.name}]")


def _dispute(report: AdoptReport, problem: Problem) -> None:
    report.disputes.append(problem)
    report.overridden.append(problem.message)


def _recommend(index: Index, claimed: list[Entry], report: AdoptReport, options: AdoptOptions) -> None:
    """One recommended file per base and method: two claims are refused unless --recommended says which wins."""
    for path in options.recommended:
        if index.entry_by_path(path) is None:
            raise RegistryError(
                "args.unknown-entry",
                path,
                "--recommended names no weight in the folder",
                f"pass one of: {', '.join(e.path for e in index.entries) or 'none'}",
            )
    groups: dict[tuple[str, str], list[Entry]] = {}
    for entry in claimed:
        groups.setdefault((entry.base_sha256, entry.method), []).append(entry)
    for path in options.recommended:
        chosen = index.entry_by_path(path)
        assert chosen is not None
        groups[(chosen.base_sha256, chosen.method)] = [chosen]
        report.mapped.append(f"--recommended {path} -> entries[{path}].recommended")
    for (_, method), group in groups.items():
        if len(group) > 1:
            paths = [e.path for e in group]
            raise RegistryError(
                "adopt.two-recommended",
                INDEX_NAME,
                f"marks {len(paths)} {method} files of one base recommended ({', '.join(paths)}); one is "
                "shown as the recommended one",
                f'keep "recommended": true on one of them, or pass --recommended {paths[0]} (or another) to '
                "say which wins",
            )
        set_recommended(index, group[0])


def _apply_hand_entry(index: Index, entry: Entry, hand: HandIndex, report: AdoptReport) -> bool:
    """Apply what index.json says of ``entry``; True when it marks it recommended."""
    claim = hand.entry(entry.path)
    if claim is None:
        return False
    recommended = False
    base = index.base_by_sha(entry.base_sha256)
    assert base is not None
    actual = _file_facts(entry, base)
    for key, value in claim.facts.items():
        where = f"{claim.where}.{key}"
        value = value.removesuffix(".pth") if key == "base" else value
        if key in actual:
            if value != actual[key]:
                _dispute(
                    report,
                    Problem(
                        "adopt.disagrees",
                        INDEX_NAME,
                        f"{where}: index.json says {value} but the file's {key} is {actual[key]}",
                        f"correct index.json or the file, or pass {TRUST_FILES} to record what the files say",
                    ),
                )
            else:
                report.mapped.append(f"{where} (agrees with the file)")
        elif key == "recommended":
            recommended = bool(value)
            report.mapped.append(f"{where} -> entries[{entry.path}].recommended")
        elif key == "dataset_repo" and entry.data.dataset_repo not in (None, value):
            _dispute(
                report,
                Problem(
                    "adopt.disagrees",
                    INDEX_NAME,
                    f"{where}: index.json says {value} but train.json's data.repo is {entry.data.dataset_repo}",
                    f"correct index.json or train.json, or pass {TRUST_FILES} to record train.json's",
                ),
            )
        elif key in ("adapter_id", "profile", "sampling"):
            entry.serving = (entry.serving or Serving()).model_copy(update={key: value})
            report.mapped.append(f"{where} -> entries[{entry.path}].serving.{key}")
        elif key in ("notes", "dataset_repo"):
            if key == "notes":
                entry.notes = value
            else:
                entry.data.dataset_repo = value
            report.mapped.append(f"{where} -> entries[{entry.path}].{key}")
    for score in claim.scores:
        if score.score is not None:
            entry.scores.append(score.score)
            report.mapped.append(f"{score.where} -> entries[{entry.path}].scores")
    return recommended


def _claims(report: AdoptReport, options: AdoptOptions) -> None:
    """Refuse where the hand-written index contradicts the files, unless the user let the files win."""
    if report.disputes and not options.trust_files:
        raise RegistryError.of(report.disputes)


def _preview_card(repo: Repo, index: Index, report: AdoptReport) -> None:
    """Render the card as the transaction will (the README kept whole as its hand-written section),
    so a refusal of the renderer comes before anything is written, and --dry-run shows it too;
    the report says what the card's front matter adds to the author's."""
    card = repo.card_path
    text = decode_card(repo.read_bytes(card)) if card.is_file() else None
    kept = keep_whole(text) if text is not None else None
    states = rendered(repo, index, on_disk(repo), kept if kept is not None else text)
    front, _ = split_front_matter(states[0].expected)
    report.front_matter_added = added_keys(index.registry.front_matter, read_front_matter(front, CARD_NAME))
