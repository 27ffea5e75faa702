"""``registry adopt``: bring a hand-made repo (a clone or a download) in as a registry."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .app import DIR_ARG, REGISTRY_OPT, main, registry_dir
from .output import Text, json_option, output

if TYPE_CHECKING:
    from ..ops.adopt import AdoptReport


@main.command()
@DIR_ARG
@REGISTRY_OPT
@click.option(
    "--base-file",
    "base_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A base checkpoint the weights of its folder (<name>/ for <name>.pth) are checked against; read, not copied. Repeat per base.",
)
@click.option("--sha256", help="With --metadata-only: the sha256 of the one base folder no other source names.")
@click.option(
    "--metadata-only",
    is_flag=True,
    help="Declare that base by --sha256 alone (as add-base); weights on it cannot be checked, so adopt refuses them.",
)
@click.option(
    "--source", help="Hub repo the base files come from (e.g. BlinkDL/rwkv7-g1), where the catalog does not say."
)
@click.option("--vocab", help="The bases' vocabulary file, where the catalog does not say.")
@click.option(
    "--trust-files",
    is_flag=True,
    help="Where the hand-written index.json and the files disagree, record what the files say (listed in the report).",
)
@click.option(
    "--recommended",
    "recommended",
    multiple=True,
    metavar="PATH",
    help="Where index.json marks two files of one base and method recommended: this one wins. Repeat per base and method.",
)
@click.option(
    "--not-a-twin",
    "not_twins",
    multiple=True,
    metavar="PATH",
    help="A .safetensors beside a .pth of the same name that holds other tensors: register it as a weight of its own.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Check everything and print the plan; write nothing. It refuses exactly what the real run refuses.",
)
@json_option
def adopt(
    directory: Path | None,
    registry: Path,
    base_files: tuple[Path, ...],
    sha256: str | None,
    metadata_only: bool,
    source: str | None,
    vocab: str | None,
    trust_files: bool,
    recommended: tuple[str, ...],
    not_twins: tuple[str, ...],
    dry_run: bool,
) -> None:
    """Make the hand-made repo in DIR (a clone or download) a registry, in place, in one transaction.

    SHA256SUMS is checked first; each weight is inspected as `registry add` inspects it; a
    hand-written index.json is mapped where it maps (the rest is listed); the README is kept whole
    as the card's hand-written section.

    Weights: a full fine-tune at the root (seed 000's rwkv-final.pth) stays there under its name, declared in
    index.json; train.json is read as people write it and kept byte for byte. What a hand-written index.json says
    that maps nowhere is kept in index.json's kept_facts; where it contradicts the files, the files win only with
    --trust-files; two recommended files, or a twin with other tensors, need --recommended / --not-a-twin. The
    README's front matter goes into the live metadata. --dry-run refuses exactly what the real run refuses. It
    prints the commands still to run, runnable as printed (docs/formats.md).
    """
    from ..ops.adopt import AdoptOptions
    from ..ops.adopt import adopt as adopt_folder

    out = output()
    options = AdoptOptions(
        base_files=base_files,
        sha256=sha256,
        metadata_only=metadata_only,
        source=source,
        vocab=vocab,
        trust_files=trust_files,
        dry_run=dry_run,
        recommended=recommended,
        not_twins=not_twins,
    )
    with out.bar("hashing") as bar:
        report = adopt_folder(registry_dir(directory, registry), options, progress=bar.advance)
    out.result(report.as_dict(), _report_text(report, dry_run))


def _report_text(report: AdoptReport, dry_run: bool) -> Text:
    index = report.index
    yield f"{'would adopt' if dry_run else 'adopted'} {report.root}: {len(index.bases)} base(s), {len(index.entries)} entr{'y' if len(index.entries) == 1 else 'ies'}"
    for entry in index.entries:
        yield f"  {entry.method:<5} {entry.path}{'  (recommended)' if entry.recommended else ''}"
    yield f"README.md: {report.readme}"
    yield f"{'would write' if dry_run else 'wrote'}: {', '.join(report.writes)}"
    sections = (("mapped from the hand-written index.json", report.mapped), ("NOT mapped to a field (kept as written in index.json's kept_facts and shown on the card)", report.unmapped),
                ("the files won over index.json (--trust-files)", report.overridden))  # fmt: skip
    for title, lines in sections:
        if lines:
            yield f"{title}:"
            yield from (f"  {line}" for line in lines)
    yield "still to do:"
    yield from (f"  {step}" for step in report.next_steps)
    yield from (f"  ({line})" for line in report.advice)
