"""The ``registry`` command: a thin shell over the core.

Each command parses options, calls one core function, and prints either a human summary or,
with ``--json``, a machine-readable result for CI.  Every :class:`RegistryError` becomes one
line on stderr and a non-zero exit; nothing else is caught.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import click

from .. import __version__
from ..errors import RegistryError
from ..progress import stderr

DIR_ARG = click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".", required=False)


def progress_echo(as_json: bool):
    """Step-by-step lines on stderr for humans; nothing with --json (stdout carries the JSON)."""
    return None if as_json else lambda line: stderr.print(line, highlight=False, soft_wrap=True)


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


def run() -> None:
    """The console entry point: run the command, then leave without the interpreter's teardown.

    Tearing torch down takes about 0.5 s here (``python -c "import torch"``: 1.5-1.9 s, against
    1.05-1.2 s ending in ``os._exit``), a tenth of a 3 GiB conversion.  When a command returns,
    everything it wrote is already fsynced and closed, so only the two streams need flushing.
    A crash (any other exception) still leaves through the normal path, traceback and all.
    """
    try:
        main()
    except SystemExit as exit_request:
        code = exit_request.code
    else:
        code = 0
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


def report(findings, as_json: bool, ok_message: str) -> None:
    if as_json:
        emit_json({"ok": not findings, "findings": [f.as_dict() for f in findings]})
    else:
        for finding in findings:
            click.echo(finding.one_line())
        click.echo(ok_message if not findings else f"{len(findings)} problem(s) found", err=bool(findings))
    if findings:
        sys.exit(1)


