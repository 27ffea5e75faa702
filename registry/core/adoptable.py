"""A hand-made folder about to become a registry (``registry adopt``, ``registry dataset adopt``):
it is no registry yet and sits inside none, an existing SHA256SUMS agrees with its files, and under
the lock it holds exactly the files that were read, unchanged since (:func:`file_identity`)."""

from __future__ import annotations

import os
from pathlib import Path

from .atomic import finish_interrupted
from .errors import Problem, RegistryError
from .hashing import hash_files
from .layout import is_excluded
from .models import Index, path_problem
from .names import INDEX_NAME, SUMS_NAME
from .registry_root import find_root
from .schemas import load_model, read_json
from .sums import parse_sums
from .tree import scan_tree


def file_identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def require_unchanged(root: Path, identities: dict[str, tuple[int, ...]]) -> None:
    """Under the lock: the folder holds exactly the files adopt read, unchanged since."""
    files = set(scan_tree(root).files)
    changed = sorted(files ^ set(identities)) + [
        rel
        for rel in sorted(files & set(identities))
        if file_identity(os.stat(root / rel, follow_symlinks=False)) != identities[rel]
    ]
    if changed:
        raise RegistryError(
            "fs.changed",
            changed[0],
            "changed while adopt was reading the folder",
            "run `registry adopt` again once nothing else writes to it",
        )


def check_folder(root: Path) -> None:
    if not root.is_dir():
        raise RegistryError(
            "args.not-a-directory", root, "no such directory", "pass the folder of the cloned or downloaded repo"
        )
    finish_interrupted(root)  # an interrupted adopt: finish it first
    enclosing = find_root(root.parent) if root.parent != root else None
    if enclosing is not None:
        raise RegistryError(
            "adopt.inside-registry",
            root,
            f"this folder is inside the registry at {enclosing}",
            "adopt a folder outside any registry",
        )
    index = root / INDEX_NAME
    if index.is_file() and not index.is_symlink():
        try:  # the tool always writes format_version; a hand-written index need not name it
            if "format_version" not in read_json(index, INDEX_NAME):
                return
            load_model(index, Index, INDEX_NAME)
        except (RegistryError, TypeError):
            return  # hand-written (or not JSON, refused with its line when it is read)
        raise RegistryError(
            "adopt.already-a-registry",
            root,
            "index.json was written by registry: this folder is a registry already",
            f"run `registry validate {root}`",
        )


def check_existing_sums(root: Path, data: bytes | None, digests: dict[str, str]) -> None:
    """An existing SHA256SUMS must agree with every file it lists (files it does not list are fine)."""
    if data is None:
        return
    listed = {
        rel.removeprefix("./"): sha for rel, sha in parse_sums(data, SUMS_NAME).items()
    }  # `sha256sum ./x` writes ./x
    problems = []
    for rel, sha in sorted(listed.items()):
        actual = digests.get(rel)
        if (
            actual is None
            and "/" not in rel
            and path_problem(rel) is None
            and is_excluded(rel)
            and (root / rel).is_file()
            and not (root / rel).is_symlink()
        ):
            actual = next(iter(hash_files([root / rel]).values()))  # e.g. a .gitattributes someone listed
        if actual is None:
            problems.append(
                Problem(
                    "adopt.sums-missing",
                    rel,
                    "listed in SHA256SUMS but not in the folder",
                    "restore the file (download it again), or remove its line from SHA256SUMS",
                )
            )
        elif actual != sha:
            problems.append(
                Problem(
                    "adopt.sums-mismatch",
                    rel,
                    f"sha256 is {actual[:12]}… but SHA256SUMS says {sha[:12]}…",
                    "restore the file (download it again); if the file is right, correct its line in SHA256SUMS",
                )
            )
    if problems:
        raise RegistryError.of(problems)
