"""Progress bars for long work (hashing, conversion, uploads), on stderr so --json stays clean."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

stderr = Console(stderr=True)


@dataclass
class ByteProgress:
    """Callbacks a core function can take without knowing about rich."""

    _progress: Progress
    _task: int

    def advance(self, n: int) -> None:
        self._progress.advance(self._task, n)

    def add_total(self, n: int) -> None:
        task = self._progress.tasks[self._task]
        self._progress.update(self._task, total=(task.total or 0) + n)


@contextmanager
def byte_progress(description: str, total: int | None = None, enabled: bool = True) -> Iterator[ByteProgress]:
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    # A bar only on a terminal: in CI logs and pipes it would be noise between the real lines.
    with Progress(*columns, console=stderr, transient=True, disable=not (enabled and stderr.is_terminal)) as progress:
        task = progress.add_task(description, total=total or 0)
        yield ByteProgress(progress, task)
