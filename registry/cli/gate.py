"""registry smoke: the GPU smoke-inference gate."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import Exit
from .app import JSON_OPT, REGISTRY_OPT, emit_json, main, progress_echo


@main.command("smoke")
@click.argument("paths", nargs=-1)
@REGISTRY_OPT
@click.option("--base-file", type=click.Path(dir_okay=False, path_type=Path), help="The base .pth that State and MiSS entries run on (hashed while it loads; full entries need none).")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True, help="cpu runs everything but the kernel; publish then needs --allow-cpu-gate.")
@JSON_OPT
def smoke_cmd(paths: tuple[str, ...], registry: Path, base_file: Path | None, device: str, as_json: bool) -> None:
    """Run entries PATH… (default: all) through the RWKV-7 kernel and the official runtime.

    All entries of a base run in this one process on the base loaded once.  Writes one receipt per entry to .registry/gates/<sha256>.json and a summary into index.json;
    exits 1 when any entry failed a check.
    """
    from ..ops.smoke import smoke

    receipts = smoke(registry, list(paths), base_file, device, echo=progress_echo(as_json))
    if as_json:
        emit_json([r.model_dump(mode="json") for r in receipts])
    else:
        for r in receipts:
            click.echo(f"{'passed' if r.passed else 'FAILED'} {r.entry} ({r.environment.device}, {r.timings.total_s:.1f} s)")
    if not all(r.passed for r in receipts):
        raise SystemExit(Exit.PROBLEMS)
