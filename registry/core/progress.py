"""Progress bars for long work (hashing, conversion, uploads), on stderr so --json stays clean.

rich is imported only when a bar is really drawn or a step line printed: light commands in a
pre-commit hook or CI log (no terminal) never pay for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

# The one type of a step-line callback, ``say``: a line of progress or a notice to the user.  A core function
# reports its steps through one it is given (``say`` below on a terminal, None or a no-op under --json), never
# by printing.
Say = Callable[[str], None]


def silent(_line: str) -> None:
    """The :data:`Say` of a caller that wants no step lines."""


def progress_enabled(wanted: bool = True) -> bool:
    """The one rule for our bars and the Hub's: only on a terminal, and never under --json."""
    return wanted and sys.stderr.isatty()


@cache
def stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def say(line: str) -> None:
    """A step line on stderr."""
    stderr().print(line, highlight=False, soft_wrap=True)


@dataclass
class ByteProgress:
    """Callbacks a core function can take without knowing about rich (no-ops without a bar)."""

    _progress: Any = None
    _task: int = 0

    def advance(self, n: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)

    def add_total(self, n: int) -> None:
        if self._progress is not None:
            task = self._progress.tasks[self._task]
            self._progress.update(self._task, total=(task.total or 0) + n)


@contextmanager
def byte_progress(description: str, total: int | None = None, enabled: bool = True) -> Iterator[ByteProgress]:
    # A bar only on a terminal: in CI logs and pipes it would be noise between the real lines.
    if not progress_enabled(enabled):
        yield ByteProgress()
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=stderr(), transient=True) as progress:
        task = progress.add_task(description, total=total or 0)
        yield ByteProgress(progress, task)
