"""``registry card``: render README.md from index.json, or --check that it is up to date."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import Exit, RegistryError
from .app import DIR_ARG, JSON_OPT, REGISTRY_OPT, emit_json, main, registry_dir, report


@main.command()
@DIR_ARG
@REGISTRY_OPT
@click.option("--check", is_flag=True, help="Only compare README.md with what index.json renders; print a diff, change nothing.")
@JSON_OPT
def card(directory: Path | None, registry: Path, check: bool, as_json: bool) -> None:
    """Render the model card (README.md) and evaluation.json of the registry in DIRECTORY and refresh SHA256SUMS.

    DIR defaults to -C / RWKV_REGISTRY, else the current directory.  The card's languages are registry.languages (`registry set languages`).  The hand-written section between the registry:handwritten markers is kept verbatim.
    """
    from ..ops.card import compare_card, write_card

    root = registry_dir(directory, registry)
    if check:
        try:
            states = compare_card(root)
        except RegistryError as err:
            if not err.code.startswith("card."):
                raise
            report(err.problems, as_json, "")  # a card that cannot be compared is a finding of the check
            return
        diff = "".join(state.diff() for state in states)
        problems = [p for state in states for p in state.problems()]
        if as_json:
            emit_json({"ok": not problems, "problems": [p.as_dict() for p in problems], "diff": diff})
        elif not problems:
            click.echo("README.md and evaluation.json are up to date")
        else:
            click.echo(diff, nl=False)
            for problem in problems:
                click.echo(f"{problem.file} is stale; run `registry card`", err=True)
        if problems:
            sys.exit(Exit.PROBLEMS)
        return
    changed = write_card(root)
    if as_json:
        emit_json({"ok": True, "changed": changed})
    else:
        click.echo("README.md and evaluation.json rendered" if changed else "README.md and evaluation.json were already up to date")
