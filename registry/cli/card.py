"""``registry card``: render README.md from index.json, or --check that it is up to date."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .app import DIR_ARG, emit_json, main, refusals


@main.command()
@DIR_ARG
@click.option("--check", is_flag=True, help="Only compare README.md with what index.json renders; print a diff, change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@refusals
def card(directory: Path, check: bool, as_json: bool) -> None:
    """Render the bilingual model card (README.md) of the registry in DIRECTORY and refresh SHA256SUMS.

    The hand-written section between the registry:handwritten markers is kept verbatim.
    """
    from ..ops.card import compare_card, write_card

    if check:
        state = compare_card(directory)
        diff = state.diff()
        if as_json:
            emit_json({"ok": state.fresh, "diff": diff})
        elif state.fresh:
            click.echo("README.md is up to date")
        else:
            click.echo(diff, nl=False)
            click.echo("README.md is stale; run `registry card`", err=True)
        if not state.fresh:
            sys.exit(1)
        return
    changed = write_card(directory)
    if as_json:
        emit_json({"changed": changed})
    else:
        click.echo("README.md rendered" if changed else "README.md was already up to date")
