"""``registry dataset adopt``: a hand-made dataset repo (seed 002: ``v1.41/``, ``v2.1/`` version
folders as the packer left them, a README, SHA256SUMS) becomes a dataset registry in place.

No data file is moved or changed.  Everything is checked before anything is written, without the
lock and without creating the private folder, so a refusal leaves the folder exactly as it was:

1. the tree: no links, special files or Git LFS pointers; every file is hashed once and an
   existing SHA256SUMS must agree with the files (as ``registry adopt`` checks a model repo);
2. every file has its place (:func:`registry.dataset.layout.place`): ``<version>/…`` folders,
   README.md, SHA256SUMS, .gitattributes (a weight file: a model repo, for ``registry adopt``);
   with no version folder yet, the folder becomes an empty dataset registry;
3. each version's facts, each from the first source that states it (the report says which):
   a flag (``--date v1.41=2026-10-13``), the folder (each split's ``manifest.json`` ``rows``, the
   first row's ``meta.wire_canonical`` and its ``thinking=``, and any of :data:`FOLDER_KEYS` the
   train split's ``manifest.json`` or ``release-manifest.json`` states), the model registry given
   with ``--models`` (the file whose sha256 a weight cites as its data is the trained file; the
   weight's serving profile gives the profile and thinking mode, its base the vocabulary).  A fact
   no source states is refused, every missing one at once, each naming its flag;
4. each version is checked exactly as ``registry dataset add`` checks a folder
   (:func:`registry.dataset.versions.version_problems`), in place;
5. with ``--models``, the weights table is derived as ``registry dataset link`` derives it.

Then one transaction (the lock, then the files re-checked unchanged since step 1) writes
index.json, the card (the hand-written README kept whole as its hand-written section),
SHA256SUMS, .gitattributes and .gitignore; the replaced originals are kept in
``.registry/adopted/``.  ``--dry-run`` runs steps 1-5 and reports the same plan.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..card.handwritten import keep_whole, prose_languages, split_front_matter
from ..card.metadata import read_front_matter
from ..card.render import decode_card
from ..core.adoptable import check_existing_sums, check_folder, file_identity, require_unchanged
from ..core.atomic import transaction
from ..core.errors import Problem, RegistryError
from ..core.gitfiles import git_file_changes, stage_git_files
from ..core.hashing import hash_files
from ..core.hashing.engine import Progress
from ..core.layout import is_weight
from ..core.lfs import refuse_pointers
from ..core.models import Index
from ..core.names import (
    CARD_NAME,
    DATASET_CHECKED_NAME,
    FINAL_STATS,
    INDEX_NAME,
    RELEASE_MANIFEST,
    ROWS_NAME,
    SAVED_DIR,
    SPLIT_MANIFEST,
    SPLIT_PARENT,
    SPLITS,
    SUMS_NAME,
)
from ..core.repo import Repo, render_index
from ..core.schemas import read_json
from ..core.staged_sums import remember_digests
from ..core.tree import scan_tree
from ..dataset import store
from ..dataset.card import OWNED
from ..dataset.checked import CheckedVersions, check_key
from ..dataset.content import TokenCache
from ..dataset.layout import GITATTRIBUTES, place, version_folders
from ..dataset.links import citing_problems, local_models, trained_weights
from ..dataset.models import PROFILES, DatasetIndex, DatasetInfo, DataVersion, ModelSource, wire_hash, wire_thinking
from ..dataset.versions import MAX_MANIFEST_BYTES, version_of, version_problems
from ..index.arguments import check_repo_id

# Per-version facts a flag may state: field -> its flag (each given as VERSION=VALUE, repeatable).
FLAGS = {
    "date": "--date", "thinking": "--thinking", "profile": "--profile", "teachers": "--teacher", "trained_file": "--trained-file",
    "train_rows": "--train-rows", "validation_rows": "--validation-rows", "wire_canonical": "--wire-canonical", "vocabulary": "--vocab",
    "stop_text": "--stop-text", "context": "--context", "family_key": "--family-key", "split_rule": "--split-rule", "flag_key": "--flag-key", "flagged_rows": "--flagged-rows",
}  # fmt: skip
# The keys of a version's manifests (the train split's manifest.json, release-manifest.json) read as its facts.
FOLDER_KEYS = {
    "date": ("date",), "thinking": ("thinking",), "profile": ("profile",), "teachers": ("teachers", "teacher"), "vocabulary": ("vocabulary", "vocab"),
    "stop_text": ("stop_text",), "context": ("context",), "family_key": ("family_key",), "split_rule": ("split_rule",), "flag_key": ("flag_key",), "flagged_rows": ("flagged_rows",),
}  # fmt: skip
REQUIRED = (
    "date",
    "thinking",
    "teachers",
    "trained_file",
    "train_rows",
    "validation_rows",
    "wire_canonical",
    "vocabulary",
)
EXAMPLES = {
    "date": "YYYY-MM-DD", "thinking": "off|full", "teachers": "'<teacher model>'", "trained_file": f"{SPLIT_PARENT}/train/<the file the trainer read>",
    "train_rows": "<rows>", "validation_rows": "<rows>", "wire_canonical": "'<meta.wire_canonical>'", "vocabulary": "rwkv_vocab_v20230424.txt",
}  # fmt: skip
WORDS = {
    "teachers": "teacher",
    "trained_file": "file the trainer read",
    "train_rows": "train row count",
    "validation_rows": "validation row count",
}
# The README front matter keys the dataset card carries from the author's values, and those it renders itself.
INTEGERS = ("train_rows", "validation_rows", "context", "flagged_rows")
MAX_FIRST_ROW = 16 << 20


@dataclass(frozen=True)
class DatasetAdoptOptions:
    models: Path | None = None  # a model registry whose weights cite the versions' trained files by sha256
    flags: dict[str, tuple[str, ...]] = field(default_factory=dict)  # field -> its flag's values, each VERSION=VALUE
    repo_id: str | None = None
    dry_run: bool = False


@dataclass
class DatasetAdoptReport:
    """What dataset adopt found and did (or, with --dry-run, would do)."""

    root: Path
    dry_run: bool
    index: DatasetIndex
    sources: dict[str, dict[str, str]] = field(default_factory=dict)  # version -> fact -> where it came from
    writes: list[str] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)
    readme: str = "none"
    given: str = ""
    front_matter_kept: list[str] = field(default_factory=list)  # the author's keys the card's front matter carries
    front_matter_dropped: list[str] = field(
        default_factory=list
    )  # the author's keys the registry computes itself (size_categories, configs)

    @property
    def next_steps(self) -> list[str]:
        """The commands still to run, each runnable exactly as printed."""
        root = shlex.quote(self.given or str(self.root))
        steps = [f"registry validate {root}"]
        if self.index.dataset.repo_id:
            steps.append(f"registry publish -C {root}")
        return steps

    @property
    def advice(self) -> list[str]:
        lines = []
        if not self.index.models:
            lines.append(
                "no model registry given: `registry dataset link --models` with the model registry trained on these versions lists its weights on the card"
            )
        if self.front_matter_dropped:
            lines.append(
                f"the README's front matter keys {', '.join(self.front_matter_dropped)} are computed from the versions in the card's metadata (the author's values are kept as written in a comment of its hand-written section)"
            )
        if not self.index.dataset.repo_id:
            lines.append(
                "no repo id found: pass the Hub dataset repo's id to `registry publish --repo-id`, or record it with `registry dataset set repo-id`"
            )
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": True, "dry_run": self.dry_run, "registry": str(self.root), "kind": "dataset",
            "versions": [v.model_dump(mode="json") for v in self.index.versions], "sources": self.sources,
            "weights": [w.model_dump(mode="json") for s in self.index.models for w in s.weights],
            "writes": self.writes, "saved": self.saved, "readme": self.readme, "front_matter": {"kept": self.front_matter_kept, "not_in_metadata": self.front_matter_dropped}, "next_steps": self.next_steps, "advice": self.advice,
        }  # fmt: skip


@dataclass
class _Plan:
    report: DatasetAdoptReport
    digests: dict[str, str]
    identities: dict[str, tuple[int, ...]]
    originals: dict[str, bytes]
    card: str
    version_files: dict[str, dict[str, str]]  # version -> its files (path inside it -> sha256), as checked


def adopt_dataset(root: Path, options: DatasetAdoptOptions, progress: Progress | None = None) -> DatasetAdoptReport:
    """Adopt the dataset repo ``root`` in place (see the module docstring); a refusal changes nothing."""
    given, root = str(root), Path(root).absolute()
    check_folder(root)
    if (root / INDEX_NAME).exists():
        raise RegistryError(
            "adopt.dataset-has-index",
            root / INDEX_NAME,
            "the folder already holds an index.json",
            f"a registry needs no adopting (`registry validate {given}`); move a hand-written index.json out of the folder, then adopt again",
        )
    plan = _plan(root, options, progress)
    plan.report.given = given
    if options.dry_run:
        return plan.report
    repo = Repo(root)
    with transaction(root) as txn:
        require_unchanged(root, plan.identities)
        index = plan.report.index
        txn.write(INDEX_NAME, render_index(index))
        for name, data in plan.originals.items():
            txn.write(f"{SAVED_DIR}/{name}", data)
        stage_git_files(repo, txn, GITATTRIBUTES)
        store.stage_derived(repo, txn, index, absorb=True, card=plan.card, known=plan.digests)
        txn.after_commit(lambda: _remember(repo, plan))
    return plan.report


def _remember(repo: Repo, plan: _Plan) -> None:
    """The file hashes in the stat cache, and each version as checked clean (its check key: these
    statements, these bytes, these rules), so the first ``validate`` reads no row again."""
    remember_digests(repo, plan.digests)
    checked = CheckedVersions(repo.private / DATASET_CHECKED_NAME)
    for version in plan.report.index.versions:
        checked.record(version.version, check_key(version, plan.version_files[version.version]))
    checked.save()


def _plan(root: Path, options: DatasetAdoptOptions, progress: Progress | None) -> _Plan:
    scan = scan_tree(root)
    if scan.findings:
        raise RegistryError.of(scan.findings)
    refuse_pointers(root, scan.files)
    identities = {rel: file_identity((root / rel).lstat()) for rel in scan.files}
    hashed = hash_files([root / rel for rel in scan.files], progress)
    digests = {path.relative_to(root).as_posix(): sha for path, sha in hashed.items()}
    repo = Repo(root)
    originals = {
        name: repo.read_bytes(root / name)
        for name in (CARD_NAME, SUMS_NAME)
        if (root / name).is_file() or (root / name).is_symlink()
    }
    check_existing_sums(root, originals.get(SUMS_NAME), digests)
    names = version_folders(scan.files)
    weights = [rel for rel in scan.files if is_weight(rel)]
    if weights:
        raise RegistryError(
            "adopt.model-repo",
            weights[0],
            "a weight file: this is a model repo",
            f"run `registry adopt {shlex.quote(str(root))}`",
        )
    problems = [p for rel in scan.files if isinstance(p := place(rel, set(names)), Problem)]
    if problems:
        raise RegistryError.of(problems)
    models = local_models(options.models) if options.models is not None else None
    flags, problems = _flag_values(options.flags, names)
    report = DatasetAdoptReport(
        root, options.dry_run, DatasetIndex(), saved=sorted(f"{SAVED_DIR}/{n}" for n in originals)
    )
    versions: list[DataVersion] = []
    version_files: dict[str, dict[str, str]] = {}
    for name in names:
        files = version_files[name] = {
            rel.split("/", 1)[1]: sha for rel, sha in digests.items() if rel.startswith(f"{name}/")
        }
        facts, sources, missing = _facts(root, name, files, flags.get(name, {}), models, options.models)
        report.sources[name] = sources
        problems += missing
        if missing:
            continue
        if facts["trained_file"] not in files:
            problems.append(
                Problem(
                    "adopt.dataset-trained-file",
                    f"{name}/{facts['trained_file']}",
                    f"the trained file ({sources['trained_file']}) is not in the version folder",
                    f"pass {FLAGS['trained_file']} {name}=<the file the trainer read, inside {name}/>",
                )
            )
            continue
        facts.update(trained_sha256=files[facts["trained_file"]], wire_hash=wire_hash(facts["wire_canonical"]))
        sizes = {rel: (root / name / rel).stat().st_size for rel in files}
        version = version_of(_typed(facts, name), sizes)
        problems += version_problems(version, files, (root / name).joinpath, progress, TokenCache(None))
        versions.append(version)
    if problems:
        raise RegistryError.of(problems)  # one line per problem, each naming its file
    readme = decode_card(originals[CARD_NAME]) if CARD_NAME in originals else ""
    index = DatasetIndex(dataset=_info(readme, options.repo_id, models, versions, report), versions=versions)
    if models is not None:
        _link(index, models, str(options.models))
    report.index = index
    report.readme = (
        "kept whole as the card's hand-written section" if readme.strip() else "none: the card starts from the default"
    )
    card = store.render_card(index, keep_whole(readme) if readme.strip() else None)
    report.writes = sorted({INDEX_NAME, CARD_NAME, SUMS_NAME, *git_file_changes(repo, GITATTRIBUTES), *report.saved})
    return _Plan(report, digests, identities, originals, card, version_files)


def _flag_values(
    given: dict[str, tuple[str, ...]], names: list[str]
) -> tuple[dict[str, dict[str, list[str]]], list[Problem]]:
    """``{version: {field: [values]}}`` from the flags' ``VERSION=VALUE`` values."""
    values: dict[str, dict[str, list[str]]] = {}
    problems = []
    for name, items in given.items():
        flag = FLAGS[name]
        for item in items:
            version, sep, value = item.partition("=")
            if not sep or version not in names:
                problems.append(
                    Problem(
                        "args.bad-version-fact",
                        flag,
                        f"{item!r} does not name a version folder of the repo ({', '.join(names)})",
                        f"pass {flag} VERSION=VALUE, e.g. {flag} {names[0]}=…",
                    )
                )
            else:
                values.setdefault(version, {}).setdefault(name, []).append(value)
    return values, problems


def _manifest(root: Path, name: str, rel: str, files: dict[str, str]) -> dict[str, Any]:
    if rel not in files:
        return {}
    data = read_json(root / name / rel, f"{name}/{rel}", MAX_MANIFEST_BYTES)
    return data if isinstance(data, dict) else {}


def _first_row_wire(path: Path) -> str | None:
    """The first row's ``meta.wire_canonical`` (every row's is checked against it)."""
    with open(path, "rb") as handle:
        line = handle.readline(MAX_FIRST_ROW)
    try:
        meta = json.loads(line).get("meta")
    except (ValueError, AttributeError):
        return None  # the row check names what is wrong with the row
    wire = meta.get("wire_canonical") if isinstance(meta, dict) else None
    return wire if isinstance(wire, str) and wire else None


def _facts(
    root: Path,
    name: str,
    files: dict[str, str],
    flags: dict[str, list[str]],
    models: Index | None,
    models_dir: Path | None,
) -> tuple[dict[str, Any], dict[str, str], list[Problem]]:
    """The version's facts, each from its first source (flag, folder, model registry), where each came from, and the missing ones."""
    facts: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def state(key: str, value: Any, source: str) -> None:
        if key not in facts and value is not None and value != []:
            facts[key], sources[key] = value, source

    for key, values in flags.items():
        state(key, values if key == "teachers" else values[-1], f"{FLAGS[key]} {name}=…")
    for split in SPLITS:
        rel = f"{SPLIT_PARENT}/{split}/{SPLIT_MANIFEST}"
        rows = _manifest(root, name, rel, files).get("rows")
        state(
            f"{split}_rows",
            rows if isinstance(rows, int) and not isinstance(rows, bool) else None,
            f"{name}/{rel} rows",
        )
    rows_rel = f"{SPLIT_PARENT}/train/{ROWS_NAME}"
    if rows_rel in files:
        state("wire_canonical", _first_row_wire(root / name / rows_rel), f"{name}/{rows_rel} meta.wire_canonical")
    if "wire_canonical" in facts:
        state("thinking", wire_thinking(facts["wire_canonical"]), "the wire canonical's thinking=")
    for rel in (f"{SPLIT_PARENT}/train/{SPLIT_MANIFEST}", RELEASE_MANIFEST, FINAL_STATS):
        manifest = _manifest(root, name, rel, files)
        for key, names in FOLDER_KEYS.items():
            for written in names:
                value = manifest.get(written)
                state(
                    key, [value] if key == "teachers" and isinstance(value, str) else value, f"{name}/{rel} {written}"
                )
    if models is not None:
        _model_facts(name, files, models, str(models_dir), state)
    missing = [
        Problem("adopt.dataset-missing-fact", name, f"no {WORDS.get(key, key.replace('_', ' '))} is stated (not by the folder{', nor by --models' if models is not None else ''})", f"pass {FLAGS[key]} {name}={EXAMPLES[key]}")
        for key in REQUIRED if key not in facts
    ]  # fmt: skip
    return facts, sources, missing


def _model_facts(name: str, files: dict[str, str], models: Index, where: str, state: Any) -> None:
    """What the model registry's weights say of the version whose file they cite by sha256."""
    by_sha = {sha: rel for rel, sha in files.items() if rel.startswith(f"{SPLIT_PARENT}/train/")}
    for entry in sorted(models.entries, key=lambda e: (not e.recommended, e.path)):
        rel = (
            by_sha.get(entry.data.sha256) if entry.data.sha256 else None
        )  # a weight may name its data by repo and revision only
        if rel is None or entry.derived_from is not None:
            continue
        source = f"--models {where}: {entry.path}"
        state("trained_file", rel, f"{source} cites its sha256")
        profile = entry.serving.profile if entry.serving else None
        state("profile", profile, f"{source} serving.profile")
        state("thinking", PROFILES[profile].thinking if profile in PROFILES else None, f"{source} serving.profile")
        base = models.base_by_sha(entry.base_sha256)
        state("vocabulary", base.vocab if base is not None else None, f"{source} base vocab")


def _typed(facts: dict[str, Any], name: str) -> dict[str, Any]:
    """The facts as ``registry dataset add`` takes them (a bad value names its flag)."""
    typed = dict(facts, version=name)
    for key in INTEGERS:
        if isinstance(typed.get(key), str):
            try:
                typed[key] = int(typed[key])
            except ValueError as exc:
                raise RegistryError(
                    "args.invalid",
                    FLAGS[key],
                    f"{name}={typed[key]!r} is not a whole number",
                    f"pass {FLAGS[key]} {name}=<a number>",
                ) from exc
    if isinstance(typed["date"], str):
        try:
            typed["date"] = date.fromisoformat(typed["date"])
        except ValueError as exc:
            raise RegistryError(
                "args.invalid",
                FLAGS["date"],
                f"{name}={typed['date']!r} is not a date",
                f"pass {FLAGS['date']} {name}=YYYY-MM-DD",
            ) from exc
    return typed


def _merged(author: Any, default: list[str]) -> list[str]:
    """The author's list first, then the registry's values it lacks (nothing removed)."""
    written = [author] if isinstance(author, str) else list(author) if isinstance(author, list) else []
    return written + [v for v in default if v not in written]


def _info(
    readme: str, repo_id: str | None, models: Index | None, versions: list[DataVersion], report: DatasetAdoptReport
) -> DatasetInfo:
    """The card-level facts: from the author's README (its front matter's ``pretty_name``, ``license``,
    ``language``, ``tags``, ``task_categories`` stand, lists merged; else the first ``# `` heading is the
    title), the repo id given or the one the weights cite."""
    front, body = split_front_matter(readme)
    written = read_front_matter(front, CARD_NAME) if front.strip() else {}
    defaults = DatasetInfo()
    heading = next((line[2:].strip() for line in body.splitlines() if line.startswith("# ")), None)
    fields: dict[str, Any] = {
        "title": written.get("pretty_name") or heading or defaults.title,
        "license": written.get("license"),
    }
    if body.strip():
        fields["languages"] = prose_languages(body)
    if "language" in written:
        fields["data_languages"] = _merged(written["language"], [])
    fields["tags"] = _merged(written.get("tags"), defaults.tags)
    fields["task_categories"] = _merged(written.get("task_categories"), defaults.task_categories)
    shas = {v.trained_file.sha256 for v in versions}
    cited = {
        e.data.dataset_repo
        for e in (models.entries if models is not None else [])
        if e.data.sha256 in shas and e.data.dataset_repo
    }
    repo_id = repo_id or (cited.pop() if len(cited) == 1 else None)
    fields["repo_id"] = check_repo_id(repo_id, "--repo-id") if repo_id else None
    try:
        info = DatasetInfo.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RegistryError(
            "adopt.dataset-front-matter",
            CARD_NAME,
            f"its front matter's {first['loc'][0]} cannot be the card's: {first['msg']}",
            "correct the YAML between the --- lines of README.md",
        ) from exc
    info.front_matter = written
    report.front_matter_kept = sorted(k for k in written if k not in OWNED)
    report.front_matter_dropped = sorted(k for k in written if k in OWNED)
    return info


def _link(index: DatasetIndex, models: Index, where: str) -> None:
    """The weights table, as ``registry dataset link --models`` derives it (refused alike)."""
    problems = list(citing_problems(models, index, "this dataset"))
    if problems:
        raise RegistryError.of(problems)  # one line per weight, each with its fix
    index.models = [ModelSource(repo_id=models.registry.repo_id, weights=trained_weights(models, index))]
