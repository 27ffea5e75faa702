"""The ``registry`` command: a thin shell over the core.

Each command parses options, calls one core function, and prints either a human summary or,
with ``--json``, a machine-readable result for CI.  Every :class:`RegistryError` becomes one
line on stderr and a non-zero exit; nothing else is caught.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import click

from . import __version__
from .errors import RegistryError
from .progress import byte_progress, stderr

DIR_ARG = click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".", required=False)


def emit_json(data) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def refusals(func):
    """Turn a RegistryError into ``error: <file>: <message>; fix: <fix>`` and its exit code."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except RegistryError as err:
            click.echo(f"error: {err.one_line()}", err=True)
            sys.exit(err.exit_code)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="registry")
def main() -> None:
    """Validate, maintain and publish Hugging Face repos of RWKV-7 weights.

    A registry is a folder mirrored 1:1 to a model repo: <base>/<method>/<data-version>/...,
    index.json (the machine-readable index) and SHA256SUMS at its root.
    """


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--title", help="Title shown on the model card.")
@click.option("--license", "license_", help="SPDX license id for the card's front matter (omit when none is chosen).")
@refusals
def init(directory: Path, title: str | None, license_: str | None) -> None:
    """Create an empty registry in DIRECTORY."""
    from .ops.core import init_registry

    repo = init_registry(directory, title=title, license=license_)
    click.echo(f"initialised registry at {repo.root}")


@main.command()
@DIR_ARG
@click.option("--check", is_flag=True, help="Only verify SHA256SUMS against the files; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@refusals
def sums(directory: Path, check: bool, as_json: bool) -> None:
    """Recompute SHA256SUMS (or --check it) for the registry in DIRECTORY."""
    from .ops.core import write_sums
    from .validate import validate

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


def report(findings, as_json: bool, ok_message: str) -> None:
    if as_json:
        emit_json({"ok": not findings, "findings": [f.as_dict() for f in findings]})
    else:
        for finding in findings:
            click.echo(finding.one_line())
        click.echo(ok_message if not findings else f"{len(findings)} problem(s) found", err=bool(findings))
    if findings:
        sys.exit(1)


@main.command(name="validate")
@DIR_ARG
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON (for CI).")
@click.option("--index-only", type=click.Path(dir_okay=False, path_type=Path), help="Check just this index.json (e.g. the known-bases catalog).")
@refusals
def validate_cmd(directory: Path, as_json: bool, index_only: Path | None) -> None:
    """Check layout, schemas, index cross-references and SHA256SUMS; exit 0 only when clean."""
    from .validate import validate, validate_index_file

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
    from .demo import run_demo

    steps = run_demo(directory, echo=None if as_json else lambda line: stderr.print(line, highlight=False))
    if as_json:
        emit_json(steps)
