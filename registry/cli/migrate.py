"""registry migrate: upgrade a registry written by an older format_version."""

from __future__ import annotations

from pathlib import Path

import click

from .app import REGISTRY_OPT, main
from .output import json_option, output


@main.command("migrate")
@REGISTRY_OPT
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@json_option
def migrate_cmd(registry: Path, dry_run: bool) -> None:
    """Bring index.json, the card and SHA256SUMS from an older format_version to this tool's, in one transaction.

    Every other command refuses an older registry and says to run this.  A model.sig signed the old bytes: it is reported stale (sign again).

    docs/formats.md lists the format versions.
    """
    from ..ops.migrate import migrate

    done = migrate(registry, dry_run=dry_run)
    output().result(done.as_dict(), done.lines())
