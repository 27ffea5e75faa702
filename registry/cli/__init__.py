"""The ``registry`` command line: one module per group of commands, all on one click group."""

from . import adopt, artifacts, card, convert, core, dataset, export, gate, hub, metadata, migrate, sign  # noqa: F401  (register their commands)
from .app import main, run

__all__ = ["main", "run"]
