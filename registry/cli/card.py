"""``registry card``: render README.md from index.json, or --check that it is up to date."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .app import DIR_ARG, REGISTRY_OPT, main, registry_dir
from .output import Line, Text, json_option, output

if TYPE_CHECKING:
    from ..ops.card import CardCheck


@main.command()
@DIR_ARG
@REGISTRY_OPT
@click.option(
    "--check", is_flag=True, help="Only compare README.md with what index.json renders; print a diff, change nothing."
)
@json_option
def card(directory: Path | None, registry: Path, check: bool) -> None:
    """Render the model card (README.md) and evaluation.json of the registry in DIRECTORY and refresh SHA256SUMS.

    DIR defaults to -C / RWKV_REGISTRY, else the current directory.  The card's languages are registry.languages (`registry set languages`).  The hand-written section between the registry:handwritten markers is kept verbatim.

    Sections only for what is set and the methods present; train.json's trainer. --check prints the diff and exits 1
    when either file is stale.
    """
    from ..ops.card import check_card, write_card

    root, out = registry_dir(directory, registry), output()
    if not check:
        changed = write_card(root)
        out.result(
            {"ok": True, "changed": changed},
            "README.md and evaluation.json rendered"
            if changed
            else "README.md and evaluation.json were already up to date",
        )
        return
    found = check_card(root)
    if found.diff is None:  # not compared: the findings as a check's
        out.check(found.problems, "")
        return
    out.result(found.as_dict(), _check_text(found), found_problems=bool(found.problems))


def _check_text(found: CardCheck) -> Text:
    if not found.problems:
        yield "README.md and evaluation.json are up to date"
        return
    yield Line(found.diff or "", nl=False)
    for problem in found.problems:
        yield Line(f"{problem.file} is stale; run `registry card`", err=True)
