"""The command reference, docs/commands.md, generated from the commands' ``--help`` texts.

The page is every command's ``--help`` as ``registry <command> --help`` prints it (at a fixed width), so
what it says cannot drift from what the commands do: tests/test_reference.py regenerates it and
compares.  Regenerate it after changing a command's help text or options::

    python -m registry.cli.reference > docs/commands.md
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from . import main

REGENERATE = "python -m registry.cli.reference > docs/commands.md"
WIDTH = 100  # the help texts' width on the page, whatever the terminal that generates it

HEADER = f"""\
# Command reference

Every `registry` command's `--help`, generated from the commands themselves
(`{REGENERATE}`; a test fails when this page and the help texts
differ).
The [README](../README.md) has the short tour.

## The contract

The same on every command:

- **Exit codes**: `0` ok; `1` checked and found problems (`validate`, `sums --check`, `card --check`,
  a failed gate, `verify-remote`, `publish --dry-run` with blockers); `2` usage error; `3` refused: a
  bad input or a state the command will not build on, nothing was changed; `4` the Hub or the
  network failed, nothing was changed, run it again; `5` the machine failed (disk full, no
  permission, a directory where a file belongs), nothing was changed.
- **Errors** are one line each on stderr: `error: <file>: <what>; fix: <how>`. A usage error names
  the option instead of a file (`error: --gpus: 0 is not in the range x>=1; fix: pass --gpus a whole
  number at least 1`); a full disk names the file that could not be written; a missing extra names
  the `pip install` that adds it. `REGISTRY_DEBUG=1` adds the full traceback, causes included (Hub
  tokens scrubbed).
- **`--json`** prints exactly one JSON document on stdout. Checks print `{{"ok": bool, "problems":
  [{{"code", "file", "message", "fix"}}, …]}}` (validate adds `not_covered`: what it does not check,
  e.g. `.github/`); every refusal and usage error prints `{{"ok": false, "problems": […]}}` (plus what
  the command had worked out, e.g. publish's `plan`); a success prints the command's result
  (`add-base` includes `in_catalog`).
- **Progress** (ours and the Hub client's bars, step lines) only on a terminal, on stderr, never
  under `--json`.
- A dataset registry's own commands are a `registry dataset` group, since adding a data version is
  nothing like adding a weight; the commands that read or check any registry (`validate`, `sums`,
  `card`, `publish`) read index.json's `kind`, so the pre-commit hooks and the Action run unchanged
  in a dataset repo.
"""


def _commands(
    command: click.Command, parent: click.Context | None, name: str
) -> Iterator[tuple[click.Context, click.Command]]:
    """(context, command) for ``command`` and, in a group, each of its commands, in help order."""
    settings = {**command.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    ctx = click.Context(command, parent=parent, info_name=name, **settings)  # as make_context builds it
    yield ctx, command
    if isinstance(command, click.Group):
        for sub in command.list_commands(ctx):
            child = command.get_command(ctx, sub)
            if child is not None and not child.hidden:
                yield from _commands(child, ctx, sub)


def _anchor(path: str) -> str:
    return path.replace(" ", "-")


def _wrapped(words: list[str]) -> list[str]:
    """``words`` in lines of at most WIDTH characters, never breaking one."""
    lines = [""]
    for word in words:
        if lines[-1] and len(lines[-1]) + 1 + len(word) > WIDTH:
            lines.append("")
        lines[-1] = f"{lines[-1]} {word}".lstrip()
    return lines


def reference() -> str:
    """docs/commands.md's text."""
    found = list(_commands(main, None, "registry"))
    paths = [ctx.command_path for ctx, _ in found[1:]]
    links = [f"[`{p.removeprefix('registry ')}`](#{_anchor(p)})" for p in paths]
    lines = [HEADER, *_wrapped(["Commands:", *[f"{link}," for link in links[:-1]], f"{links[-1]}."])]
    lines += ["", "## registry", "", "```text", main.get_help(found[0][0]).rstrip(), "```"]
    for ctx, command in found[1:]:
        lines += ["", f"## {ctx.command_path}", "", "```text", command.get_help(ctx).rstrip(), "```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    click.echo(reference(), nl=False)
