"""What a command prints: one sink for its result, its human text, its progress and its failure.

A command's function in ``registry/ops`` returns its result; the command hands the sink the
result's JSON document and its human text once (:meth:`Output.result`, :meth:`Output.check` for a
check's findings).  The sink prints one of them: with ``--json`` exactly one JSON document on
stdout (also when the command fails: :meth:`Output.fail`), else the text.  Progress goes to stderr
and never under ``--json``: bars only on a terminal, step lines (:attr:`Output.say`) also in a log.

The sink owns ``--json`` (``json_option``, on every command): the flag sets the mode of the
:class:`Output` on the click context, eagerly, so that a refusal of any other option is already
printed as a document.  Where click refuses the command line before it reads any value (an
unknown option, an option missing its value, ``--json`` given to the group), the command or the
group (:class:`ReadsFlagOnRefusal`) reads the flag once more, as it parses, ignoring the rest.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from ..core.errors import Exit, Problem, take_warnings
from ..core.progress import ByteProgress, Say, byte_progress, progress_enabled, say

FLAG = "as_json"


@dataclass(frozen=True)
class Line:
    """A line of a command's human text: on stdout unless ``err``; ``nl=False`` for text that
    carries its own line ends (a diff, a rendered table)."""

    text: str
    err: bool = False
    nl: bool = True


Text = Iterable[str | Line]
"""A command's human text: stdout lines (``str``) and :class:`Line`, printed in order; a
generator is only run when the text is printed."""


@dataclass
class Output:
    """Where one run of the CLI prints; ``json`` is set by ``--json``."""

    json: bool = False

    def __post_init__(self) -> None:
        take_warnings()  # a new run's sink: nothing of an earlier run in this process

    @property
    def progress(self) -> bool:
        """Whether bars (ours and the Hub client's) may be drawn: on a terminal, never under --json."""
        return progress_enabled(not self.json)

    @property
    def say(self) -> Say | None:
        """Step-by-step lines on stderr for humans; none under --json."""
        return None if self.json else say

    def bar(self, description: str, total: int | None = None) -> AbstractContextManager[ByteProgress]:
        """A byte progress bar on stderr (a no-op where :attr:`progress` is off)."""
        return byte_progress(description, total=total, enabled=not self.json)

    def result(self, document: Any, text: str | Text, *, found_problems: bool = False) -> None:
        """Print the result, as ``document`` or as ``text``, with the warnings the command gave
        (:func:`registry.core.errors.warn`); exit 1 when the command found problems."""
        warnings = take_warnings()
        if self.json:
            _emit_json(
                {**document, "warnings": [w.as_dict() for w in warnings]}
                if warnings and isinstance(document, dict)
                else document
            )
        else:
            self.text_now(text)
            self.text_now(Line(f"warning: {w.one_line()}", err=True) for w in warnings)
        if found_problems:
            sys.exit(Exit.PROBLEMS)

    def text_now(self, text: str | Text) -> None:
        """Print part of the human text as soon as it is known (a line per finished file of a long
        run); nothing under --json, where the document comes whole from :meth:`result`."""
        if self.json:
            return
        for line in (text,) if isinstance(text, str) else text:
            line = line if isinstance(line, Line) else Line(line)
            click.echo(line.text, err=line.err, nl=line.nl)

    def check(self, problems: Sequence[Problem], ok_message: str, extra: Mapping[str, Any] | None = None) -> None:
        """The result of a check: exit 0 when clean, 1 with one line per problem otherwise
        (``extra``: more keys of the JSON document)."""
        document = {"ok": not problems, "problems": [p.as_dict() for p in problems], **(extra or {})}
        self.result(document, check_text(problems, ok_message), found_problems=bool(problems))

    def fail(self, problems: Sequence[Problem], exit_code: int, payload: Mapping[str, Any] | None = None) -> NoReturn:
        """A refusal: one ``error:`` line per problem on stderr, under --json also the one document
        ``{"ok": false, ...payload, "problems": [...]}``; then exit ``exit_code``."""
        if self.json:
            _emit_json({"ok": False, **(payload or {}), "problems": [p.as_dict() for p in problems]})
        for problem in problems:
            click.echo(f"error: {problem.one_line()}", err=True)
        sys.exit(exit_code)


def check_text(problems: Sequence[Problem], ok_message: str, more: Text = ()) -> Text:
    """A check's human text: a line per problem, ``more``, then ``ok_message`` or (on stderr) the count."""
    yield from (f"{p.code} {p.one_line()}" for p in problems)
    yield from more
    yield Line(f"{len(problems)} problem(s) found", err=True) if problems else ok_message


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def output() -> Output:
    """The sink of the command running now."""
    return click.get_current_context().ensure_object(Output)


def _set_mode(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(Output).json = True


_FLAG_DECLS = ("--json", FLAG)
_FLAG_ATTRS: dict[str, Any] = {
    "is_flag": True, "is_eager": True, "expose_value": False, "callback": _set_mode,
    "help": "Print one JSON document on stdout (also when the command refuses).",
}  # fmt: skip

json_option = click.option(*_FLAG_DECLS, **_FLAG_ATTRS)
"""``--json`` on a command: the mode of its :class:`Output` (read it with :func:`output`)."""


def flag_given(command: click.Command, ctx: click.Context, args: Sequence[str]) -> bool:
    """Whether ``args`` give ``--json`` as ``command`` parses them, unknown options skipped (for a
    command line click refused before reading the flag)."""
    parser = command.make_parser(ctx)
    if not any(param.name == FLAG for param in command.get_params(ctx)):
        click.Option(_FLAG_DECLS, **_FLAG_ATTRS).add_to_parser(parser, ctx)
    parser.ignore_unknown_options = True
    parser.allow_interspersed_args = True
    try:
        values, _, _ = parser.parse_args(args=list(args))
    except click.UsageError:  # the line fails even so (an option without its value): read it as
        # a parser that knows --json alone does, every other option unknown
        alone = click.Command(command.name, params=[click.Option(_FLAG_DECLS, **_FLAG_ATTRS)]).make_parser(ctx)
        alone.ignore_unknown_options = True
        alone.allow_interspersed_args = True
        try:
            values, _, _ = alone.parse_args(args=list(args))
        except click.UsageError:
            return False
    return bool(values.get(FLAG))


class ReadsFlagOnRefusal(click.Command):
    """A command (or group) whose refused command line still reaches the sink's mode (see the
    module docstring): ``registry validate --bogus --json``, ``registry --json validate``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # click's parser consumes the list
        try:
            return super().parse_args(ctx, args)
        except click.UsageError:
            if flag_given(self, ctx, given):
                ctx.ensure_object(Output).json = True
            raise
