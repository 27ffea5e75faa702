"""Core commands: init, sums, validate, demo."""

from __future__ import annotations

from pathlib import Path

import click

from ..progress import byte_progress, stderr
from .app import DIR_ARG, emit_json, main, progress_echo, refusals, report


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--title", help="Title shown on the model card.")
@click.option("--license", "license_", help="SPDX license id for the card's front matter (omit when none is chosen).")
@refusals
def init(directory: Path, title: str | None, license_: str | None) -> None:
    """Create an empty registry in DIRECTORY."""
    from ..ops.init import init_registry

    repo = init_registry(directory, title=title, license=license_)
    click.echo(f"initialised registry at {repo.root}")


@main.command()
@DIR_ARG
@click.option("--check", is_flag=True, help="Only verify SHA256SUMS against the files; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@refusals
def sums(directory: Path, check: bool, as_json: bool) -> None:
    """Recompute SHA256SUMS (or --check it) for the registry in DIRECTORY."""
    from ..ops.sums import write_sums
    from ..ops.validate import validate

    with byte_progress("hashing", enabled=not as_json) as bar:
        if check:
            findings = [f for f in validate(directory, progress=bar.advance) if f.code.startswith("sums.")]
            report(findings, as_json, "SHA256SUMS matches every file")
            return
        digests = write_sums(directory, progress=bar.advance)
    if as_json:
        emit_json({"files": len(digests)})
    else:
        click.echo(f"SHA256SUMS written: {len(digests)} files")


@main.command(name="validate")
@DIR_ARG
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON (for CI).")
@click.option("--index-only", type=click.Path(dir_okay=False, path_type=Path), help="Check just this index.json (e.g. the known-bases catalog).")
@click.option("--allow-rewrite", "rewrite_reason", metavar="REASON", help="Accept changes to already-published files and record REASON in index.json.")
@refusals
def validate_cmd(directory: Path, as_json: bool, index_only: Path | None, rewrite_reason: str | None) -> None:
    """Check layout, schemas, index cross-references and SHA256SUMS; exit 0 only when clean."""
    from ..ops.validate import allow_rewrite, validate, validate_index_file

    if rewrite_reason:
        for rewrite in allow_rewrite(directory, rewrite_reason):
            stderr.print(f"recorded rewrite of {rewrite.path}: {rewrite.reason}")
    if index_only:
        report(validate_index_file(index_only), as_json, f"{index_only} is valid")
        return
    with byte_progress("hashing", enabled=not as_json) as bar:
        findings = validate(directory, progress=bar.advance)
    report(findings, as_json, "registry is valid")


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default="rwkv-registry-demo", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print each step's result as JSON.")
@refusals
def demo(directory: Path, as_json: bool) -> None:
    """Run the whole pipeline on tiny built-in RWKV-7 artifacts in DIRECTORY."""
    from ..ops.demo import run_demo

    steps = run_demo(directory, echo=progress_echo(as_json))
    if as_json:
        emit_json(steps)
