"""The registry's files on disk: one walk that never follows a symlink and reports any path that
could leave the root, break the SHA256SUMS line format, or land as another file on macOS and
Windows.  What the paths mean is :mod:`registry.core.layout`'s."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .collisions import collision_problems
from .errors import Problem
from .layout import is_excluded
from .models import path_problem


@dataclass
class TreeScan:
    """Regular files under the root (relative POSIX paths) and what the walk refused."""

    files: list[str] = field(default_factory=list)
    findings: list[Problem] = field(default_factory=list)


def scan_tree(root: Path) -> TreeScan:
    """Walk the registry without following links; report links, odd names and special files."""
    scan = TreeScan()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        for name in sorted(dirnames):
            rel = (base / name).relative_to(root).as_posix()
            if is_excluded(rel):
                dirnames.remove(name)
            elif (base / name).is_symlink():
                dirnames.remove(name)
                scan.findings.append(_symlink_finding(rel, base / name))
        dirnames.sort()
        for name in sorted(filenames):
            path = base / name
            rel = path.relative_to(root).as_posix()
            if is_excluded(rel):
                continue
            problem = path_problem(rel)
            mode = path.lstat().st_mode
            if problem:
                scan.findings.append(
                    Problem(
                        "layout.bad-name",
                        rel,
                        problem,
                        "rename the file (no newline, backslash, control, bidi or zero-width characters)",
                    )
                )
            elif stat.S_ISLNK(mode):
                scan.findings.append(_symlink_finding(rel, path))
            elif not stat.S_ISREG(mode):
                scan.findings.append(Problem("layout.special-file", rel, "not a regular file", "remove it"))
            else:
                scan.files.append(rel)
    scan.findings.extend(collision_problems(scan.files))
    return scan


def _symlink_finding(rel: str, path: Path) -> Problem:
    target = os.readlink(path)
    return Problem(
        "layout.symlink",
        rel,
        f"symlink to {target!r} (links are never followed)",
        "replace the link with the real file or remove it",
    )
