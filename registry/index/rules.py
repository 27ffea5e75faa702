"""What is wrong with an index.json on its own, without reading any other file.

``registry validate`` reports these with the rest; every command that writes checks them first
and refuses to build on an index that breaks them (a new entry on top of duplicates, an unknown
base, or a path out of the layout would only make the damage harder to see).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ..core.author_evaluation import declaration_problems
from ..core.errors import Problem, RegistryError
from ..core.evaluation import reference_problems
from ..core.layout import Placement, declared_root, place
from ..core.models import Index
from ..core.names import EVALUATION_NAME, INDEX_NAME, TRAIN_JSON
from ..core.repo import Repo


def weight_paths(index: Index) -> Iterator[str]:
    for entry in index.entries:
        if entry.format == "safetensors-sharded":
            yield from (s.path for s in entry.shards)
        else:
            yield entry.path


def base_problems(index: Index) -> Iterator[Problem]:
    for name, count in Counter(b.name for b in index.bases).items():
        if count > 1:
            yield Problem(
                "index.duplicate-base",
                INDEX_NAME,
                f"base {name!r} listed {count} times",
                "remove the duplicate from bases",
            )
    for sha, count in Counter(b.sha256 for b in index.bases).items():
        if count > 1:
            yield Problem(
                "index.duplicate-base",
                INDEX_NAME,
                f"base sha256 {sha[:12]}… listed {count} times",
                "remove the duplicate from bases",
            )
    for base in index.bases:
        if base.filename != f"{base.name}.pth":
            yield Problem(
                "index.base-name",
                INDEX_NAME,
                f"base {base.name!r} has filename {base.filename!r}",
                "the base directory name must be the file name without .pth",
            )


def entry_problems(index: Index) -> Iterator[Problem]:
    for path, count in sorted(Counter(weight_paths(index)).items()):
        if count > 1:
            yield Problem(
                "index.duplicate-entry",
                INDEX_NAME,
                f"weight file {path} listed {count} times",
                "list each weight file in exactly one entry",
            )
    bases = {b.sha256 for b in index.bases}
    names = {b.name for b in index.bases}
    declared = declared_root(index)
    for entry in index.entries:
        if entry.base_sha256 not in bases:
            yield Problem(
                "index.unknown-base",
                INDEX_NAME,
                f"entry {entry.path} names base sha256 {entry.base_sha256[:12]}…, which is not in bases",
                "add the base with `registry add-base` or fix base_sha256",
            )
        elif "/" not in entry.path and entry.method != "full":
            yield Problem(
                "index.bad-path",
                INDEX_NAME,
                f"entry path {entry.path} is at the root, where only a full fine-tune may stay",
                f"move it to <base>/{entry.method}/<data-version>/ and fix the entry's path",
            )
        for path in (entry.path, *(s.path for s in entry.shards)):
            problem = weight_path_problem(path, names, declared)
            if problem is not None:
                yield problem
    if len({(p.base, p.version) for p in declared.values()}) > 1:
        yield Problem(
            "index.root-entries",
            INDEX_NAME,
            f"the root weights ({', '.join(sorted(declared))}) name different bases or data versions, but share the root's one train.json",
            "keep the root weights of one base and data version; move the others into <base>/full/<data-version>/",
        )
    yield from declaration_problems(index)


def weight_path_problem(path: str, bases: set[str], declared: dict[str, Placement] | None = None) -> Problem | None:
    """Why ``path`` cannot be a registered weight's path (validate's rule, which ``add`` applies
    before it stages anything): it must place in the layout as a weight file, not as train.json
    (``declared``: the root weights index.json declares)."""
    placed = place(path, bases, declared)
    if isinstance(placed, Placement) and placed.name not in (TRAIN_JSON, EVALUATION_NAME):
        return None
    why = placed.message if isinstance(placed, Problem) else f"that is its folder's {placed.name if placed else path}"
    return Problem(
        "index.bad-path",
        INDEX_NAME,
        f"entry path {path} is not a <base>/<method>/<data-version>/ weight path ({why})",
        "fix the entry's path (or remove the entry)",
    )


def index_problems(index: Index) -> list[Problem]:
    return [*base_problems(index), *entry_problems(index), *reference_problems(index)]


def index_to_change(repo: Repo) -> Index:
    """The index a writing command builds on, read under its lock; refused while validate rejects it."""
    index = repo.load_index()
    problems = index_problems(index)
    if problems:
        raise RegistryError.of(problems)  # one line per problem, each with its fix
    return index
