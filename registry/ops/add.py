"""``registry add``: put a weight at its canonical path, refusing what does not fit its base.

The plan (shared with add-base and score): check every input (without touching the registry), stage the
new index, the file and the derived files (card, SHA256SUMS) in one transaction, commit.  Any
refusal happens before the first rename, so the registry stays byte-identical.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from ..artifacts.accept import accept_weight, content_version
from ..core.atomic import transaction
from ..core.author_evaluation import read_author_evaluation
from ..core.collisions import collisions, shown
from ..core.errors import RegistryError
from ..core.hashing import hash_file
from ..core.hashing.engine import Progress
from ..core.layout import canonical_path
from ..core.models import (
    DATA_VERSION_PATTERN,
    Base,
    Checkpoint,
    DataRef,
    Entry,
    FileRef,
    Index,
)
from ..core.names import (
    CONFIG_NAME,
    EVALUATION_NAME,
    GGUF_DIR,
    HF_DIR,
    INDEX_NAME,
    SHARD_INDEX,
    TRAIN_JSON,
    WEIGHT_SUFFIXES,
)
from ..core.pinned import copy_hashing, pinned
from ..core.repo import Repo, render_index
from ..core.schemas import read_bounded
from ..core.sums import MAX_SUMS_BYTES, parse_sums
from ..core.train import TrainFacts, read_train, train_problems
from ..core.tree import scan_tree
from ..hf.checkpoint import base_fit_problems, checkpoint_file, manifest_problems, read_checkpoint
from ..index.arguments import require_file_name, require_name, require_sha, require_text
from ..index.derived import stage_derived
from ..index.editing import set_recommended
from ..index.rules import index_to_change, weight_path_problem


@dataclass
class AddRequest:
    file: Path
    base: str
    method: str
    data_version: str
    train_json: Path
    run: str | None = None
    data_sha256: str | None = None
    dataset_repo: str | None = None
    data_sums: Path | None = None
    recommended: bool = False
    notes: str = ""
    move: bool = False


def _require_data_version(data_version: str) -> None:
    if not re.fullmatch(DATA_VERSION_PATTERN, data_version):
        raise RegistryError(
            "args.bad-data-version",
            repr(data_version),
            f"data version {data_version!r} must look like v1.41 or v2.1",
            "pass --data-version v<major>[.<minor>]",
        )


def _known_base(index: Index, name: str) -> Base:
    base = index.base_by_name(name)
    if base is None:
        raise RegistryError(
            "base.unknown", name, "no such base in index.json", f"run `registry add-base {name}.pth` first"
        )
    return base


def _train_json_place(root: Path, base: str, method: str, data_version: str, train_bytes: bytes) -> tuple[str, bool]:
    """Where the data version's train.json goes, and whether it is there already (with these bytes);
    another train.json there is refused."""
    train_rel = canonical_path(base, method, data_version, TRAIN_JSON)
    existing_train = root / train_rel
    present = existing_train.is_file()
    if present and existing_train.read_bytes() != train_bytes:
        raise RegistryError(
            "train.conflict",
            train_rel,
            "a different train.json is already in this data-version directory",
            f"pass --train-json {existing_train}",
        )
    return train_rel, present


def _check_request(request: AddRequest, index: Index) -> Base:
    # Every name that becomes part of the entry's path, and the text the card shows, before anything is staged.
    require_name(request.base, "base name", "--base")
    if request.run is not None:
        require_name(request.run, "run name", "--run")
        if request.run in (HF_DIR, GGUF_DIR):
            raise RegistryError(
                "args.bad-name",
                request.run,
                f"run name {request.run!r} is the folder name of Transformers exports (export-hf) or GGUF "
                "files (export-gguf)",
                "pass another --run name",
            )
    require_file_name(request.file.name, "file name", "registry add")
    require_text(request.notes, "--notes")
    if request.dataset_repo is not None:
        require_text(request.dataset_repo, "--dataset-repo")
    _require_data_version(request.data_version)
    if request.method == "miss" and not request.run:
        raise RegistryError(
            "args.missing",
            request.file,
            "MiSS adapters live in a run directory",
            "pass --run NAME (e.g. r16-lr2e-5-e2)",
        )
    if not request.file.is_file():
        raise RegistryError("args.missing-file", request.file, "no such file", "check the path")
    if not request.train_json.is_file():
        raise RegistryError(
            "train.missing",
            request.train_json,
            "train.json not found",
            "pass --train-json with the trainer, hyperparameters, command and data sha256",
        )
    base = _known_base(index, request.base)
    rel = canonical_path(base.name, request.method, request.data_version, request.file.name, request.run)
    if (
        weight_path_problem(rel, {base.name}) is not None
    ):  # validate's rule, so that no entry is added that validate then rejects
        raise RegistryError(
            "args.not-a-weight-name",
            request.file,
            f"{request.file.name!r} is not the name of a weight file (validate would refuse {rel})",
            f"rename the file to end in {' or '.join(WEIGHT_SUFFIXES)} and pass it to registry add",
        )
    return base


def _check_train_json(request: AddRequest, source: Path, base: Base) -> tuple[TrainFacts, str | None]:
    """The train.json's facts and its data sha256 (None where it names a dataset repo and revision
    instead), checked against the base and the flags."""
    shown = str(request.train_json)
    train = read_train(source, shown)
    problems = train_problems(train, shown, base, request.data_version)
    if problems:
        raise RegistryError.of(problems)
    if request.data_sha256 and require_sha(request.data_sha256, "--data-sha256") != train.data_sha256:
        raise RegistryError(
            "train.data-mismatch",
            request.train_json,
            f"data sha256 is {train.data_sha256} but --data-sha256 says {request.data_sha256}",
            "train on and declare the same data, or fix train.json",
        )
    if request.dataset_repo and train.data.repo and request.dataset_repo != train.data.repo:
        raise RegistryError(
            "train.data-mismatch",
            request.train_json,
            f"data.repo is {train.data.repo} but --dataset-repo says {request.dataset_repo}",
            "pass the dataset repo train.json names, or fix train.json",
        )
    return train, train.data_sha256


def _check_data_sums(request: AddRequest, data_sha: str | None) -> None:
    """The dataset repo's SHA256SUMS must list a file with exactly this training-data hash."""
    if request.data_sums is None:
        return
    if data_sha is None:
        raise RegistryError(
            "data.no-sha256",
            request.train_json,
            "names its data by dataset repo and revision, with no file sha256 to look up in --data-sums",
            "add the sha256 of the file the trainer read to train.json's data, or leave out --data-sums",
        )

    # Not read_bytes(): /dev/zero would fill memory and a FIFO would block; anything but a regular
    # file of at most MAX_SUMS_BYTES is refused before it is read.
    data = read_bounded(request.data_sums, MAX_SUMS_BYTES, str(request.data_sums), "dataset SHA256SUMS", "sums")
    listed = parse_sums(data, request.data_sums)
    if data_sha not in listed.values():
        raise RegistryError(
            "data.not-in-dataset",
            request.data_sums,
            f"no file in the dataset's SHA256SUMS has sha256 {data_sha}",
            "pass the SHA256SUMS of the dataset version the weights were trained on",
        )


def _stage_weight(request: AddRequest, staging: Path, progress: Progress | None) -> tuple[Path, str]:
    """Move or copy the weight into staging (hashing it on the way); the file and its sha256."""
    staged = staging / f"add-{os.getpid()}.part"
    try:
        with pinned(request.file, "weight file") as source:
            if request.move and source.stat.st_dev == staging.stat().st_dev:
                # A second link, not a rename: until the commit, the user's file stays where it was,
                # so a refusal or a kill never loses it; it is unlinked once the entry is in place.
                os.link(request.file, staged)
                linked = staged.stat()
                if (linked.st_dev, linked.st_ino) != (source.stat.st_dev, source.stat.st_ino):
                    raise RegistryError(
                        "fs.changed",
                        request.file,
                        "the weight file was replaced while it was being added",
                        "run the command again once nothing else writes to it",
                    )
                return staged, hash_file(staged, progress)
            return staged, copy_hashing(source, staged, progress)
    except BaseException:
        _unstage(staged)
        raise


def _unstage(staged: Path) -> None:
    staged.unlink(missing_ok=True)


def add_weight(root: Path, request: AddRequest, progress: Progress | None = None) -> Entry:
    """Register ``request.file``; everything is checked on the bytes that land in the registry."""
    repo = Repo.open(root)
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        base = _check_request(request, index)
        with pinned(request.train_json, TRAIN_JSON) as train_source:
            train, data_sha = _check_train_json(request, train_source.stable, base)
            train_bytes = train_source.read_bytes()
        _check_data_sums(request, data_sha)
        rel = canonical_path(base.name, request.method, request.data_version, request.file.name, request.run)
        if index.entry_by_path(rel) or (repo.root / rel).exists():
            raise RegistryError(
                "entry.exists",
                rel,
                "a file is already registered at this path",
                "use another --run or file name; published files are never replaced",
            )
        clash = next(
            (
                group
                for group in collisions([*scan_tree(repo.root).files, rel])
                if any(rel == name or rel.startswith(f"{name}/") for name in group)
            ),
            None,
        )
        if clash:
            raise RegistryError(
                "args.name-collision",
                request.file,
                f"{' and '.join(map(shown, clash))} differ only in case or Unicode normalization: one file "
                "on macOS and Windows checkouts",
                "rename the file (or pass another --run) so that it differs in more",
            )
        train_rel, train_present = _train_json_place(
            repo.root, base.name, request.method, request.data_version, train_bytes
        )
        staged, sha = _stage_weight(request, txn.staging, progress)
        try:
            # The staged file is what gets registered: inspect that, not the path the user named.
            inspection = accept_weight(staged, request.method, base, request.file)
            duplicate = next((e for e in index.entries if e.sha256 == sha), None)
            if duplicate:
                raise RegistryError(
                    "entry.duplicate",
                    request.file,
                    f"the same bytes are already registered as {duplicate.path}",
                    "nothing to do",
                )
        except RegistryError as err:
            _unstage(staged)
            raise err.naming(str(staged), str(request.file)) from err
        except BaseException:
            _unstage(staged)
            raise
        entry = Entry(
            path=rel,
            method=request.method,
            base_sha256=base.sha256,
            data=DataRef(
                version=request.data_version,
                sha256=data_sha,
                dataset_repo=request.dataset_repo or train.data.repo,
                dataset_revision=train.data.revision,
            ),
            sha256=sha,
            size=staged.stat().st_size,
            format="safetensors" if rel.endswith(".safetensors") else "pth",
            content_version=content_version(inspection),
            notes=request.notes,
        )
        index.entries.append(entry)
        if request.recommended:
            set_recommended(index, entry)
        txn.move(staged, rel, sha)
        if not train_present:
            txn.write(train_rel, train_bytes)
        if request.move:  # before the stat cache remembers the entry: dropping a link changes its ctime
            txn.after_commit(lambda: request.file.unlink(missing_ok=True))
        txn.write(INDEX_NAME, render_index(index))
        stage_derived(repo, txn, index, progress)
    return entry


def add_checkpoint(root: Path, request: AddRequest, progress: Progress | None = None) -> Checkpoint:
    """Register the Transformers checkpoint folder ``request.file`` (seed 004's shape: shards, their
    index, config.json, the generation config and tokenizer files, the author's manifest and
    evaluation.json) as ``<base>/full/<data-version>/[<run>/]``, every file copied byte for byte and
    checked on the copies (:mod:`registry.hf.checkpoint`), in one transaction."""
    repo = Repo.open(root)
    source = request.file
    if request.method != "full":
        raise RegistryError(
            "args.bad-method",
            source,
            f"a Transformers checkpoint is a whole model, not a {request.method} file",
            "pass --method full",
        )
    names = sorted(p.name for p in source.iterdir())
    strays = [n for n in names if not (source / n).is_file() or (source / n).is_symlink() or not checkpoint_file(n)]
    if strays:
        raise RegistryError(
            "checkpoint.stray-file",
            source / strays[0],
            "is not a file of a Transformers checkpoint (shards, their index, config, generation config, "
            "tokenizer files, checkpoint_manifest.json, evaluation.json)",
            "move it out of the folder (the registry's card is the README at its root)",
        )
    with transaction(repo.root) as txn:
        index = index_to_change(repo)
        base = _known_base(index, request.base)
        _require_data_version(request.data_version)
        if request.run is not None:
            require_name(request.run, "run name", "--run")
        folder = canonical_path(base.name, "full", request.data_version, SHARD_INDEX, request.run).rsplit("/", 1)[0]
        taken = [n for n in names if (repo.root / folder / n).exists()]
        if taken or index.checkpoint_by_path(f"{folder}/{SHARD_INDEX}"):
            raise RegistryError(
                "entry.exists",
                f"{folder}/{taken[0] if taken else SHARD_INDEX}",
                "a file is already registered at this path",
                "pass another --run or --data-version; published files are never replaced",
            )
        with pinned(request.train_json, TRAIN_JSON) as train_source:
            train, data_sha = _check_train_json(request, train_source.stable, base)
            train_bytes = train_source.read_bytes()
        train_rel, train_present = _train_json_place(repo.root, base.name, "full", request.data_version, train_bytes)
        staged = txn.staging / f"add-checkpoint-{os.getpid()}"
        staged.mkdir()
        try:
            digests = {}
            for name in names:  # copied while hashing; what is checked below is what lands
                with pinned(source / name, "checkpoint file") as pin:
                    digests[name] = copy_hashing(pin, staged / name, progress)
            facts = read_checkpoint(staged, "", names, registry_root=False)
            problems = base_fit_problems(CONFIG_NAME, facts.config, base.architecture, base.name)
            if facts.manifest is not None:
                sizes = {n: (staged / n).stat().st_size for n in names}
                problems += manifest_problems(
                    facts.manifest, (staged / facts.manifest).read_bytes(), "", digests, sizes
                )
            if EVALUATION_NAME in names:  # the author's, kept byte for byte, shown on the card
                read_author_evaluation(staged / EVALUATION_NAME, EVALUATION_NAME)
            if problems:
                raise RegistryError.of(problems)
        except RegistryError as err:
            shutil.rmtree(staged, ignore_errors=True)
            renamed = [replace(p, file=str(source / p.file)) if p.file in names else p for p in err.problems]
            raise RegistryError.of(renamed, err.payload, err.exit_code) from err
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise

        def ref(name: str) -> FileRef:
            return FileRef(path=f"{folder}/{name}", sha256=digests[name], size=(staged / name).stat().st_size)

        checkpoint = Checkpoint(
            path=f"{folder}/{SHARD_INDEX}",
            sha256=digests[SHARD_INDEX],
            size=(staged / SHARD_INDEX).stat().st_size,
            architecture=facts.architecture,
            model_type=facts.model_type,
            base_sha256=base.sha256,
            data=DataRef(
                version=request.data_version,
                sha256=data_sha,
                dataset_repo=request.dataset_repo or train.data.repo,
                dataset_revision=train.data.revision,
            ),
            shards=[ref(n) for n in facts.shards],
            files=[ref(n) for n in facts.files],
            manifest=f"{folder}/{facts.manifest}" if facts.manifest else None,
            evaluation=f"{folder}/{EVALUATION_NAME}" if EVALUATION_NAME in names else None,
        )
        index.checkpoints.append(checkpoint)
        for i, name in enumerate(names):  # the journal moves files from staging's top level
            flat = txn.staging / f"{staged.name}-{i}.part"
            os.rename(staged / name, flat)
            txn.move(flat, f"{folder}/{name}", digests[name])
        staged.rmdir()
        if not train_present:
            txn.write(train_rel, train_bytes)
        txn.write(INDEX_NAME, render_index(index))
        stage_derived(repo, txn, index, progress)
    return checkpoint
