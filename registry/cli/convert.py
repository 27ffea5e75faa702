"""registry convert: safetensors twins, streaming and verified."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from ..core.hashing.engine import hash_in_background
from .app import REGISTRY_OPT, main
from .output import json_option, output


@main.command("convert")
@click.argument("paths", nargs=-1, required=True)
@REGISTRY_OPT
@click.option(
    "--shard-size",
    default="5GB",
    show_default=True,
    help="Split checkpoints larger than this into model-0000i-of-0000N.safetensors.",
)
@click.option("--force", is_flag=True, help="Overwrite existing outputs whose content differs.")
@json_option
def convert_cmd(paths: tuple[str, ...], registry: Path, shard_size: str, force: bool) -> None:
    """Convert registered .pth files (or standalone .pth files outside the registry) to safetensors.

    Each output is re-read and compared bit-exactly with the source before it gets its final
    name; registered sources get a derived entry in index.json (same base, data and scores).
    Run outside any registry (no -C, no index.json here), every file converts standalone.
    """
    from ..core.repo import Repo  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)

    repo = Repo.open(registry, must_exist=False)
    in_a_registry = (
        repo.index_path.is_file()
        or click.get_current_context().get_parameter_source("registry") != ParameterSource.DEFAULT
    )
    root = repo.root
    targets = [_target(raw, root, in_a_registry) for raw in paths]
    # A standalone source's sha256 needs no torch, which takes a second or two to import: start it now.
    first, first_inside = targets[0]
    early = hash_in_background(first) if not first_inside and first.is_file() else None

    from ..convert.shards import parse_size  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)
    from ..ops.convert import convert_entry, convert_standalone  # noqa: PLC0415 optional dependency: safetensors, torch (through ops.convert)

    out, size = output(), parse_size(shard_size)
    results: list[dict[str, Any]] = []
    for raw, (absolute, inside) in zip(paths, targets, strict=True):
        total = absolute.stat().st_size if absolute.is_file() else None
        with out.bar(f"converting {absolute.name}", total=total) as bar:
            if inside:
                entry = convert_entry(root, absolute.relative_to(root).as_posix(), size, force, progress=bar.advance)
                results.append(entry.model_dump(mode="json"))
                message = f"{raw} -> {entry.path} (sha256 {entry.sha256[:12]}…)"
            else:
                digest = early if absolute == first else None
                result = convert_standalone(absolute, size, force, progress=bar.advance, source_sha256=digest)
                results.append({"source": str(absolute), "outputs": [str(f.final) for f in result.files]})
                message = f"{raw} -> {', '.join(f.final.name for f in result.files)}"
        out.text_now(message)  # as each file is done: a long conversion shows what it has finished
    out.result(results, ())


def _target(raw: str, root: Path, in_a_registry: bool) -> tuple[Path, bool]:
    """The absolute path ``raw`` names, and whether it is a registry entry.

    A relative path names a registry entry when it exists under the registry, else a file here.
    """
    path = Path(raw)
    absolute = path if path.is_absolute() else root / path if (root / path).exists() else Path.cwd() / path
    absolute = absolute.absolute()
    return absolute, in_a_registry and absolute.is_relative_to(root)
