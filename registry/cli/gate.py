"""registry smoke: the GPU smoke-inference gate."""

from __future__ import annotations

from pathlib import Path

import click

from .app import REGISTRY_OPT, main
from .output import json_option, output


@main.command("smoke")
@click.argument("paths", nargs=-1)
@REGISTRY_OPT
@click.option(
    "--base-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The base .pth that State and MiSS entries run on (hashed while it loads; full entries need none).",
)
@click.option(
    "--fetch-base",
    "fetch_into",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Download the entries' base from its known-bases catalog source on the Hub into DIR (sha256 checked) instead of --base-file.",
)
@click.option(
    "--sign-key",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="KEY.pem",
    help="Also sign each receipt with this EC private key, so a publish elsewhere trusts it (publish --trust-gate-key KEY.pub; docs/ci.md).",
)
@click.option(
    "--device",
    type=click.Choice(["cuda", "cpu"]),
    default="cuda",
    show_default=True,
    help="cpu runs everything but the kernel; publish then needs --allow-cpu-gate.",
)
@json_option
def smoke_cmd(
    paths: tuple[str, ...],
    registry: Path,
    base_file: Path | None,
    fetch_into: Path | None,
    sign_key: Path | None,
    device: str,
) -> None:
    """Run entries PATH… (default: all) through the RWKV-7 kernel and the official runtime.

    All entries of a base run in this one process on the base loaded once.  Writes one receipt per entry to .registry/gates/<sha256>.json and a summary into index.json;
    exits 1 when any entry failed a check.

    Our CUDA kernel against the official rwkv runtime against an fp32 reference. State and MiSS entries need
    --base-file, or --fetch-base DIR to download the base from its catalog source (sha256 checked); full entries run
    on their own bytes. --sign-key signs the receipts, for a publish elsewhere (docs/ci.md). H200 figures:
    docs/gpu-gate.md.
    """
    from ..ops.smoke import smoke

    out = output()
    receipts = smoke(registry, list(paths), base_file, device, say=out.say, fetch_into=fetch_into, sign_key=sign_key)
    text = (
        f"{'passed' if r.passed else 'FAILED'} {r.entry} ({r.environment.device}, {r.timings.total_s:.1f} s)"
        for r in receipts
    )
    out.result([r.model_dump(mode="json") for r in receipts], text, found_problems=not all(r.passed for r in receipts))
