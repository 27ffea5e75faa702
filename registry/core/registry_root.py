"""Which registry a command works on: the folder it is given or, as git finds its repository, the
nearest folder above it with an index.json.  Light (no models, no schemas): the commands a stat
cache vouches for find their registry before they import anything else."""

from __future__ import annotations

from pathlib import Path

from .names import GIT_DIR, INDEX_NAME


def _holds_index(folder: Path) -> bool:
    path = folder / INDEX_NAME
    return path.is_file() or path.is_symlink()  # a link is found, then refused where it is read


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding index.json, or None.  Like git's search for
    its repository, the walk stops at the top of a git checkout (a folder holding ``.git``), so a
    clone never finds a registry of the folders around it."""
    start = Path(start).absolute()
    for folder in (start, *start.parents):
        if _holds_index(folder):
            return folder
        if (folder / GIT_DIR).exists():
            return None
    return None
