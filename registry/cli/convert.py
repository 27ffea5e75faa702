"""registry convert: safetensors twins, streaming and verified."""

from __future__ import annotations

from pathlib import Path

import click

from ..progress import byte_progress
from .app import emit_json, main, refusals
from .artifacts import REGISTRY_OPT


@main.command("convert")
@click.argument("paths", nargs=-1, required=True)
@REGISTRY_OPT
@click.option("--shard-size", default="5GB", show_default=True, help="Split checkpoints larger than this into model-0000i-of-0000N.safetensors.")
@click.option("--force", is_flag=True, help="Overwrite existing outputs whose content differs.")
@click.option("--json", "as_json", is_flag=True, help="Print the derived entries as JSON.")
@refusals
def convert_cmd(paths: tuple[str, ...], registry: Path, shard_size: str, force: bool, as_json: bool) -> None:
    """Convert registered .pth files (or standalone .pth files outside the registry) to safetensors.

    Each output is re-read and compared bit-exactly with the source before it gets its final
    name; registered sources get a derived entry in index.json (same base, data and scores).
    """
    from ..convert import parse_size
    from ..ops.convert import convert_entry, convert_standalone
    from ..repo import Repo

    size = parse_size(shard_size)
    root = Repo.open(registry, must_exist=False).root
    results = []
    for raw in paths:
        path = Path(raw)
        # A relative path names a registry entry when it exists under the registry, else a file here.
        absolute = path if path.is_absolute() else root / path if (root / path).exists() else Path.cwd() / path
        inside = absolute.absolute().is_relative_to(root)
        total = absolute.stat().st_size if absolute.is_file() else None
        with byte_progress(f"converting {path.name}", total=total, enabled=not as_json) as bar:
            if inside:
                entry = convert_entry(root, absolute.absolute().relative_to(root).as_posix(), size, force, progress=bar.advance)
                results.append(entry.model_dump(mode="json"))
                message = f"{raw} -> {entry.path} (sha256 {entry.sha256[:12]}…)"
            else:
                result = convert_standalone(absolute, size, force, progress=bar.advance)
                results.append({"source": str(absolute), "outputs": [str(f.final) for f in result.files]})
                message = f"{raw} -> {', '.join(f.final.name for f in result.files)}"
        if not as_json:
            click.echo(message)
    if as_json:
        emit_json(results)
