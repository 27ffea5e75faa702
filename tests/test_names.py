"""registry/core/names.py is the one home of the registry's file and folder names (issue #28, item 1):
it imports nothing of the package, no other module spells one of its names as a constant of its
own, and layout.py stands on it, the models and the errors alone."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import registry.core.names

PACKAGE = Path(registry.__file__).parent
NAMES = PACKAGE / "core" / "names.py"
# Constants whose value is spelled like a name but means something else.
OTHER_MEANING = {
    ("core/models.py", "DATASET_KIND"): "index.json's kind value, not the split folder",
    ("core/models.py", "TrainJson.SCHEMA_KIND"): "the schema's kind (schemas/train.schema.json), not the split folder",
    ("ops/diff.py", "PUBLISHED"): "diff's word for the last published release, not the record's folder",
}


def _imported_modules(path: Path) -> set[str]:
    """The modules a file imports, relative ones as ``.name`` (``.`` per level)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


def _name_values() -> set[str]:
    """Every name names.py defines: its str constants and the str members of its tuples and sets."""
    values: set[str] = set()
    for key, value in vars(registry.core.names).items():
        if key.isupper() and isinstance(value, str):
            values.add(value)
        elif key.isupper() and isinstance(value, tuple | frozenset):
            values.update(v for v in value if isinstance(v, str))
    return values


def _string_constants(body: list[ast.stmt], owner: str = "") -> Iterator[tuple[str, str, int]]:
    """(target, value, line) of every module- or class-level assignment of a str literal."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield from _string_constants(node.body, f"{owner}{node.name}.")
        elif (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                yield f"{owner}{ast.unparse(target)}", node.value.value, node.lineno


def _redefined(source: str, rel: str, names: set[str]) -> list[str]:
    return [
        f"{rel}:{line}: {target} = {value!r}"
        for target, value, line in _string_constants(ast.parse(source).body)
        if value in names and (rel, target) not in OTHER_MEANING
    ]


def test_names_imports_nothing_of_the_package() -> None:
    assert _imported_modules(NAMES) <= {"__future__", "typing"}


def test_no_module_defines_a_name_of_its_own() -> None:
    names = _name_values()
    assert {
        "index.json",
        "SHA256SUMS",
        ".registry",
        "journal.json",
        "release-manifest.json",
        "LICENSE",
    } <= names  # the set is read right
    found = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != NAMES
        for hit in _redefined(path.read_text(), path.relative_to(PACKAGE).as_posix(), names)
    ]
    assert found == []


def test_a_redefined_name_is_found() -> None:
    """The check above sees a module- or class-level twin of a name (so it can fail)."""
    names = _name_values()
    assert _redefined('INDEX = "index.json"\n', "repo.py", names) == ["repo.py:1: INDEX = 'index.json'"]
    assert _redefined('class Paths:\n    lock: str = "lock"\n', "atomic.py", names) == [
        "atomic.py:2: Paths.lock = 'lock'"
    ]
    assert _redefined('def f() -> str:\n    return "index.json"\nLABEL = "an index.json"\n', "repo.py", names) == []


def test_layout_stands_on_names_models_and_errors() -> None:
    package_imports = {
        m for m in _imported_modules(PACKAGE / "core" / "layout.py") if m.startswith(".") or m.startswith("registry")
    }
    assert package_imports <= {".names", ".models", ".errors"}
    assert ".names" in package_imports
