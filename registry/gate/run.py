"""One gate run across its groups: what it reads, whom it tells, and what it has found so far."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.inspect import Inspection
from ..core.errors import Problem
from ..core.hashing import StatCache
from ..core.models import Base, Index
from ..core.pinned import Pinned
from ..core.progress import Say
from .builds import built_kernel, environment
from .checks import check_kernel
from .receipt import CheckResult, Environment, Receipt

# The acceptance rule of a weight file (``registry add``'s): path, method, base, name shown.
Accept = Callable[[Path, str, Base, str], Inspection]


@dataclass
class Run:
    """State of one gate run (``registry smoke``) across its groups."""

    index: Index
    device: str
    files: Path  # the registered files, read through their pinned open files
    opened: dict[str, Pinned]  # those open files by registry path (their bytes checked per group)
    cache: StatCache
    say: Say
    accept: Accept  # run on the very bytes the gate loads, before an entry runs
    record: Callable[[Receipt], None]  # writes an entry's receipt, once it has run
    gpu: tuple[str, int] | None = None  # on CUDA: the card as refusals name it, and the bytes the gate may use
    kernel: tuple[CheckResult, dict[str, Any]] | None = None
    environment: Environment | None = None
    problems: list[Problem] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)


def kernel_once(run: Run, builds: list[Future[Any]]) -> None:
    """The kernel check does not depend on the weights: once per run, after the builds finish."""
    if run.kernel is not None:
        return
    kernel = built_kernel(builds)
    run.environment = environment(run.device)
    run.kernel = check_kernel(run.device, kernel)
    run.say(f"kernel parity: {'ok' if run.kernel[0].passed else 'FAILED'}")
