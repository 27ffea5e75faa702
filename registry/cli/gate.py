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
    help="Download the entries' base from its known-bases catalog source on the Hub into DIR (sha256 checked) "
    "instead of --base-file.",
)
@click.option(
    "--sign-key",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="KEY.pem",
    help="Also sign each receipt with this EC private key, so a publish elsewhere trusts it (publish "
    "--trust-gate-key KEY.pub; docs/ci.md).",
)
@click.option(
    "--device",
    type=click.Choice(["cuda", "cpu"]),
    default="cuda",
    show_default=True,
    help="cpu runs everything but the kernel; publish then needs --allow-cpu-gate.",
)
@click.option(
    "--max-gpu-memory",
    metavar="SIZE",
    help="GPU memory the gate may use, e.g. 24GiB (default: what the card has free); a model that cannot fit "
    "is refused before loading. docs/gpu-gate.md.",
)
@json_option
def smoke_cmd(
    paths: tuple[str, ...],
    registry: Path,
    base_file: Path | None,
    fetch_into: Path | None,
    sign_key: Path | None,
    device: str,
    max_gpu_memory: str | None,
) -> None:
    """Run entries PATH… (default: all) through the RWKV-7 kernel and the official runtime.

    All entries of a base run in this one process on the base loaded once.  Writes one receipt per entry to
    .registry/gates/<sha256>.json and a summary into index.json;
    exits 1 when any entry failed a check.

    Our CUDA kernel against the official rwkv runtime against an fp32 reference. State and MiSS entries need
    --base-file, or --fetch-base DIR to download the base from its catalog source (sha256 checked); full entries run
    on their own bytes. --sign-key signs the receipts, for a publish elsewhere (docs/ci.md). One copy of a model's
    weights is on the GPU, shared by both runtimes (about 1.1x the bf16 file); each group is planned against
    --max-gpu-memory (default: what the card has free) and refused in one line before loading when it cannot fit.
    Figures: docs/gpu-gate.md.
    """
    from ..convert.shards import parse_size  # noqa: PLC0415 start-up: only smoke parses a size
    from ..ops.smoke import smoke  # noqa: PLC0415 optional dependency: torch (through ops.smoke)

    out = output()
    budget = parse_size(max_gpu_memory, "--max-gpu-memory") if max_gpu_memory is not None else None
    receipts = smoke(
        registry,
        list(paths),
        base_file,
        device,
        say=out.say,
        fetch_into=fetch_into,
        sign_key=sign_key,
        max_gpu_memory=budget,
    )
    text = (
        f"{'passed' if r.passed else 'FAILED'} {r.entry} ({r.environment.device}, {r.timings.total_s:.1f} s)"
        for r in receipts
    )
    out.result([r.model_dump(mode="json") for r in receipts], text, found_problems=not all(r.passed for r in receipts))
