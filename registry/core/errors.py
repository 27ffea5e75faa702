"""The one problem type, the one refusal, the exit codes, and the warnings a command gives.

A :class:`Problem` is a stable code (for CI), the file it is about, what is wrong and the fix.
``validate`` reports problems; a command that refuses raises :class:`RegistryError` carrying one
or more of them.  The CLI prints each as ``error: <file>: <what>; fix: <how>`` (or, under
``--json``, as ``{"ok": false, "problems": [...]}``) and exits with the error's code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from pathlib import Path
from typing import Any


class Exit(IntEnum):
    """Exit codes, documented in the README; each means one thing on every command."""

    OK = 0
    PROBLEMS = 1  # checked and found problems (validate, sums --check, card --check, a failed gate, verify-remote)
    USAGE = 2  # the command line itself is wrong (click's own code)
    REFUSED = 3  # a bad input or a state the command will not build on: nothing was changed
    RETRY = 4  # the Hub or the network failed: nothing was changed, running it again may succeed
    MACHINE = 5  # the machine failed (disk full, permission denied, a file vanished): nothing was changed


EMPTY_NAME = '""'  # how a line names a file argument given as the empty string


@dataclass(frozen=True)
class Problem:
    code: str
    file: str | None
    message: str
    fix: str

    def one_line(self) -> str:
        where = "" if self.file is None else f"{self.file or EMPTY_NAME}: "  # an empty argument is named as one
        return " ".join(f"{where}{self.message}; fix: {self.fix}".split())  # one line, whatever the inputs held

    def as_dict(self) -> dict[str, str | None]:
        return {"code": self.code, "file": self.file, "message": self.message, "fix": self.fix}

    def about(self, file: str) -> Problem:
        """This problem, naming ``file`` when it names none."""
        return self if self.file else replace(self, file=file)


class RegistryError(Exception):
    """A refusal: its problems (the first is the headline), an exit code, and what the command
    had worked out before refusing (``payload``, e.g. a publish plan, for ``--json``)."""

    def __init__(self, code: str, file: str | Path | None, message: str, fix: str, exit_code: int = Exit.REFUSED):
        self.problems: tuple[Problem, ...] = (Problem(code, str(file) if file is not None else None, message, fix),)
        self.exit_code = int(exit_code)
        self.payload: dict[str, Any] = {}
        super().__init__(self.one_line())

    @classmethod
    def of(
        cls, problems: Sequence[Problem], payload: dict[str, Any] | None = None, exit_code: int = Exit.REFUSED
    ) -> RegistryError:
        """A refusal with several reasons (every ungated entry, every mismatching file): one line each,
        a problem found twice (by two checks, or two reads of one file) said once."""
        problems = list(dict.fromkeys(problems))
        first = problems[0]
        error = cls(first.code, first.file, first.message, first.fix, exit_code)
        error.problems = tuple(problems)
        error.payload = payload or {}
        return error

    def naming(self, old: str, new: str) -> RegistryError:
        """This refusal with file ``old`` called ``new`` (e.g. a staged copy by the user's name)."""
        renamed = [replace(p, file=new) if p.file == old else p for p in self.problems]
        return RegistryError.of(renamed, self.payload, self.exit_code)

    @property
    def problem(self) -> Problem:
        return self.problems[0]

    @property
    def code(self) -> str:
        return self.problem.code

    @property
    def file(self) -> str | None:
        return self.problem.file

    @property
    def message(self) -> str:
        return self.problem.message

    @property
    def fix(self) -> str:
        return self.problem.fix

    def one_line(self) -> str:
        more = f" (and {len(self.problems) - 1} more problem(s))" if len(self.problems) > 1 else ""
        return self.problem.one_line() + more


_WARNINGS: list[Problem] = []


def warn(problem: Problem) -> None:
    """A warning the running command's result carries: something its write left stale (the sink
    prints it with the result: a ``warning:`` line on stderr, ``warnings`` under --json); once."""
    if problem not in _WARNINGS:
        _WARNINGS.append(problem)


def take_warnings() -> list[Problem]:
    """The warnings given since the last call (the sink's: each is printed once)."""
    taken = list(_WARNINGS)
    _WARNINGS.clear()
    return taken
