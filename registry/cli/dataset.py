"""``registry dataset …``: the commands only a dataset registry has (seed 002's repo shape).

validate, sums, card, publish, pull and verify-remote work on a dataset registry as they are: they
tell it by index.json's ``"kind": "dataset"``.  Each command only parses options and prints; the
logic is in ``registry/ops/dataset_<command>.py``.
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import click

from .app import DIR_ARG, REGISTRY_OPT, card_front_options, main, registry_dir
from .output import json_option, output


@main.group("dataset")
def dataset_group() -> None:
    """Dataset registries: one folder per data version, index.json (kind: dataset), SHA256SUMS, the dataset card.

    \b
    registry dataset init DIR          create one
    registry dataset adopt [DIR] [--models DIR] [--date VERSION=YYYY-MM-DD ...]
                                       make a hand-made dataset repo a registry, in place
    registry dataset add FOLDER ...    check and register a version folder
    registry dataset link --models DIR | --repo-id NS/NAME [--revision REV]
                                       derive the card's table of weights trained on each version
    registry dataset set FIELD ...     title, license, repo-id, languages, summary, ...
    """


@dataset_group.command("init")
@DIR_ARG
@REGISTRY_OPT
@card_front_options("dataset card")
@json_option
def init_cmd(directory: Path | None, registry: Path, title: str | None, license_: str | None) -> None:
    """Create an empty dataset registry in DIR (default: -C, else the current directory).

    index.json says "kind": "dataset" (docs/formats.md, "Dataset registries").
    """
    from ..ops.dataset_init import init_dataset

    repo = init_dataset(registry_dir(directory, registry), title=title, license=license_)
    output().result(
        {"ok": True, "registry": str(repo.root), "kind": "dataset"}, f"initialised dataset registry at {repo.root}"
    )


def _day(_ctx: click.Context, _param: click.Parameter, value: str) -> date:
    try:
        return datetime.strptime(value, "%Y-%m-%d").date()
    except ValueError as exc:
        raise click.BadParameter("expected YYYY-MM-DD") from exc


@dataset_group.command("add")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@REGISTRY_OPT
@click.option(
    "--version", "version", required=True, help="The data version, e.g. v1.41 (the folder's name in the registry)."
)
@click.option("--date", "day", required=True, callback=_day, help="The version's date, YYYY-MM-DD.")
@click.option(
    "--thinking",
    type=click.Choice(["off", "full"]),
    required=True,
    help="Rendered without (off) or with (full) thinking; must agree with the wire canonical's thinking=.",
)
@click.option("--profile", help="The chat format profile, e.g. g1k or g1k-think.")
@click.option("--teacher", "teachers", multiple=True, required=True, help="A teacher model (repeat for several).")
@click.option(
    "--trained-file",
    required=True,
    help="The file the trainer read, inside FOLDER, e.g. dataset/train/segments-1-41.jsonl.",
)
@click.option(
    "--trained-sha256", required=True, help="Its sha256 (checked against the file): the data sha256 weights cite."
)
@click.option("--train-rows", type=click.IntRange(min=0), required=True, help="Rows in the train split (checked).")
@click.option(
    "--validation-rows", type=click.IntRange(min=0), required=True, help="Rows in the validation split (checked)."
)
@click.option("--wire-canonical", required=True, help="meta.wire_canonical of every row (checked on every row).")
@click.option(
    "--wire-hash",
    required=True,
    help="meta.wire_hash of every row: the sha256 of the wire canonical's UTF-8 bytes (checked).",
)
@click.option(
    "--vocab",
    "vocabulary",
    required=True,
    help="The vocabulary the rows were checked against, e.g. rwkv_vocab_v20230424.txt.",
)
@click.option(
    "--stop-text",
    help="The text every row ends with, e.g. $'\\n\\nUser:' (default: the profile's, for g1k and g1k-think). Checked on every row.",
)
@click.option(
    "--context",
    type=click.IntRange(min=1),
    help="The most tokens a row holds, e.g. 8128 (checked with the rwkv World tokenizer and --vocab).",
)
@click.option(
    "--family-key",
    help="The meta key naming a row's family (default: --split-rule's); no family may be in both splits.",
)
@click.option(
    "--split-rule",
    help="How the validation split was chosen, e.g. 'sha256(family) mod 32 == 0' (recomputed for every row).",
)
@click.option("--flag-key", help="A meta flag the card warns about, e.g. seeded_from_test (with --flagged-rows).")
@click.option(
    "--flagged-rows",
    type=click.IntRange(min=0),
    help="How many rows (both splits) have the --flag-key flag true (counted; shown in the card's known issues).",
)
@click.option("--summary", "summary", multiple=True, help="What the folder is, in --lang (repeatable).")
@click.option("--composition", multiple=True, help="A line of the composition section, in --lang (repeatable).")
@click.option("--known-issue", "known_issues", multiple=True, help="A known issue, in --lang (repeatable).")
@click.option(
    "--lang",
    type=click.Choice(["zh", "en"]),
    default="zh",
    show_default=True,
    help="The language of --summary, --composition and --known-issue.",
)
@click.option(
    "--known-issue-en",
    "known_issues_en",
    multiple=True,
    help="A known issue in English, beside --known-issue in Chinese (repeatable).",
)
@json_option
def add_cmd(folder: Path, registry: Path, version: str, day: date, thinking: str, profile: str | None, teachers: tuple[str, ...], trained_file: str, trained_sha256: str,
            train_rows: int, validation_rows: int, wire_canonical: str, wire_hash: str, vocabulary: str, summary: tuple[str, ...], composition: tuple[str, ...],
            known_issues: tuple[str, ...], lang: str, known_issues_en: tuple[str, ...], stop_text: str | None, context: int | None, family_key: str | None,
            split_rule: str | None, flag_key: str | None, flagged_rows: int | None) -> None:  # fmt: skip
    """Check the version FOLDER against what the options state and copy it to <version>/ in one transaction.

    Checked: row counts, the trained file's sha256, the wire hash of every row, the three row forms,
    release-manifest.json and the manifests; with the rwkv World tokenizer, the stop text, token counts within the
    context and the manifests' quantiles, no loss-span boundary inside a token, families and the split rule, flagged
    rows (docs/formats.md). A trained file another version holds is refused.
    """
    from ..core.models import Localized
    from ..ops.dataset_add import VersionRequest, add_version

    def text(items: tuple[str, ...], english: tuple[str, ...] = ()) -> Localized:
        return Localized.model_validate({lang: list(items), **({"en": list(english)} if english else {})})

    request = VersionRequest(
        source=folder, version=version, date=day, thinking=thinking, teachers=list(teachers), trained_file=trained_file, trained_sha256=trained_sha256,
        train_rows=train_rows, validation_rows=validation_rows, wire_canonical=wire_canonical, wire_hash=wire_hash, vocabulary=vocabulary, profile=profile,
        summary=text(summary), composition=text(composition), known_issues=text(known_issues, known_issues_en),
        stop_text=stop_text, context=context, family_key=family_key, split_rule=split_rule, flag_key=flag_key, flagged_rows=flagged_rows,
    )  # fmt: skip
    out = output()
    with out.bar("checking") as bar:
        added = add_version(registry, request, bar.advance)
    line = f"added {added.version}: {added.train_rows} / {added.validation_rows} rows, trained file {added.trained_file.path} sha256 {added.trained_file.sha256[:12]}…"
    out.result({"ok": True, "version": added.model_dump(mode="json")}, line)


_FACT = "VERSION=VALUE"


@dataset_group.command("adopt")
@DIR_ARG
@REGISTRY_OPT
@click.option(
    "--models",
    type=click.Path(file_okay=False, path_type=Path),
    help="A model registry whose weights cite the versions' trained files by sha256: it says which file the trainer read, the profile and thinking mode, the vocabulary; its weights are linked.",
)
@click.option("--repo-id", metavar="NS/NAME", help="The Hub dataset repo (default: the one --models' weights cite).")
@click.option(
    "--date",
    "date_",
    multiple=True,
    metavar=_FACT,
    help="A version's date, e.g. v1.41=2026-10-13 (repeat per version).",
)
@click.option(
    "--thinking",
    multiple=True,
    metavar=_FACT,
    help="off or full, e.g. v2.1=full (default: the wire canonical's thinking=).",
)
@click.option("--profile", multiple=True, metavar=_FACT, help="The chat format profile, e.g. v1.41=g1k.")
@click.option(
    "--teacher",
    "teacher",
    multiple=True,
    metavar=_FACT,
    help="A teacher model, e.g. 'v1.41=DeepSeek v4 Flash' (repeat for several).",
)
@click.option(
    "--trained-file",
    multiple=True,
    metavar=_FACT,
    help="The file the trainer read, inside the version folder, e.g. v1.41=dataset/train/segments-1-41.jsonl.",
)
@click.option(
    "--train-rows", multiple=True, metavar=_FACT, help="Train rows (default: the split's manifest.json rows); checked."
)
@click.option(
    "--validation-rows",
    multiple=True,
    metavar=_FACT,
    help="Validation rows (default: the split's manifest.json rows); checked.",
)
@click.option(
    "--wire-canonical",
    multiple=True,
    metavar=_FACT,
    help="The wire canonical (default: the first row's meta.wire_canonical); checked on every row.",
)
@click.option(
    "--vocab",
    "vocab",
    multiple=True,
    metavar=_FACT,
    help="The vocabulary the rows were checked against, e.g. v1.41=rwkv_vocab_v20230424.txt.",
)
@click.option(
    "--stop-text", multiple=True, metavar=_FACT, help="The text every row ends with (default: the profile's)."
)
@click.option("--context", multiple=True, metavar=_FACT, help="The most tokens a row holds, e.g. v2.1=8128.")
@click.option("--family-key", multiple=True, metavar=_FACT, help="The meta key naming a row's family.")
@click.option(
    "--split-rule",
    multiple=True,
    metavar=_FACT,
    help="How the validation split was chosen, e.g. 'v2.1=sha256(family) mod 32 == 0'.",
)
@click.option(
    "--flag-key", multiple=True, metavar=_FACT, help="A meta flag the card warns about (with --flagged-rows)."
)
@click.option(
    "--flagged-rows", multiple=True, metavar=_FACT, help="How many rows have the --flag-key flag true (counted)."
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Check everything and print the plan; write nothing. It refuses exactly what the real run refuses.",
)
@json_option
def adopt_cmd(
    directory: Path | None,
    registry: Path,
    models: Path | None,
    repo_id: str | None,
    dry_run: bool,
    **facts: tuple[str, ...],
) -> None:
    """Make the hand-made dataset repo in DIR (seed 002: v1.41/, v2.1/ version folders, README, SHA256SUMS) a dataset registry, in place.

    No data file is moved or changed; SHA256SUMS is checked first; each version is checked as
    `registry dataset add` checks it; the README is kept whole as the card's hand-written section.
    A fact the folder does not state comes from --models, else from its flag, given as
    VERSION=VALUE; every missing one is named at once.

    docs/formats.md says what is read from where.
    """
    from ..ops.dataset_adopt import FLAGS, DatasetAdoptOptions, adopt_dataset

    by_flag = {flag.removeprefix("--").replace("-", "_"): name for name, flag in FLAGS.items()}
    given = {by_flag[{"date_": "date"}.get(key, key)]: values for key, values in facts.items() if values}
    out = output()
    options = DatasetAdoptOptions(models=models, flags=given, repo_id=repo_id, dry_run=dry_run)
    with out.bar("hashing") as bar:
        report = adopt_dataset(registry_dir(directory, registry), options, progress=bar.advance)
    verb = "would adopt" if dry_run else "adopted"
    lines = [f"{verb} {report.root} as a dataset registry: {len(report.index.versions)} version(s)"]
    for version in report.index.versions:
        lines.append(
            f"  {version.version}: {version.train_rows} / {version.validation_rows} rows, trained file {version.trained_file.path} sha256 {version.trained_file.sha256[:12]}…"
        )
        lines += [f"    {key}: {source}" for key, source in sorted(report.sources[version.version].items())]
    lines += [
        f"README.md: {report.readme}",
        f"{'would write' if dry_run else 'wrote'}: {', '.join(report.writes)}",
        "still to do:",
    ]
    lines += [f"  {step}" for step in report.next_steps] + [f"  ({line})" for line in report.advice]
    out.result(report.as_dict(), "\n".join(lines))


@dataset_group.command("link")
@REGISTRY_OPT
@click.option(
    "--models", type=click.Path(file_okay=False, path_type=Path), help="A local model registry trained on this dataset."
)
@click.option("--repo-id", metavar="NS/NAME", help="A model repo on the Hub, read through the Hub client.")
@click.option(
    "--revision",
    default="main",
    show_default=True,
    help="With --repo-id: the branch or commit to read (the commit it resolves to is recorded).",
)
@click.option(
    "--unlink",
    is_flag=True,
    help="Drop the weights table of --models or --repo-id (a local registry and its published copy are one).",
)
@json_option
def link_cmd(registry: Path, models: Path | None, repo_id: str | None, revision: str, unlink: bool) -> None:
    """Derive the card's table of weights trained on each version from a model registry, matched by data sha256.

    A local registry and its published copy are one source: linking either replaces the other."""
    from ..ops.dataset_link import link_models, unlink_models

    out = output()
    if unlink:
        gone = unlink_models(registry, models, repo_id)
        out.result(
            {"ok": True, "unlinked": [s.model_dump(mode="json") for s in gone]},
            f"unlinked {sum(len(s.weights) for s in gone)} weight(s) of {models or repo_id}",
        )
        return
    source = link_models(registry, models, repo_id, revision, hub_progress=out.progress)
    text = f"linked {len(source.weights)} weight(s) from {source.repo_id or models}" + (
        f"@{source.revision[:12]}" if source.revision else ""
    )
    out.result({"ok": True, "source": source.model_dump(mode="json")}, text)


@dataset_group.command("set")
@click.argument("field", metavar="FIELD")
@click.argument("values", nargs=-1, metavar="[VALUE]...")
@REGISTRY_OPT
@click.option("--lang", metavar="zh|en", help="The language of summary and attribution.")
@json_option
def set_cmd(field: str, values: tuple[str, ...], registry: Path, lang: str | None) -> None:
    """Set a card-level FIELD: title, license, repo-id, languages (the card's), data-languages, tags, task-categories, summary, attribution (--lang)."""
    from ..ops.dataset_set import set_dataset_field

    info = set_dataset_field(registry, field, values, lang)
    output().result({"ok": True, "dataset": info.model_dump(mode="json")}, f"set {field}")
