"""One home for each concept (issue #28): what the source tree itself must keep true."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import registry

PACKAGE = Path(registry.__file__).parent


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, wherever it stands (in a function
    or under TYPE_CHECKING too)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(filter(None, [base, node.module or ""]))
            found += [(node.lineno, module)] + [
                (node.lineno, f"{module}.{alias.name}") for alias in node.names if node.level and not node.module
            ]
    return found


def modules_importing(name: str) -> list[str]:
    """``file:line`` of every import of ``name`` (or of a module inside it) in the registry package."""
    return [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, module in imports(path)
        if module == name or module.startswith(name + ".")
    ]


def test_every_sha256_goes_through_the_hashing_package():
    users = modules_importing("hashlib")
    assert any(u.startswith("registry/core/hashing/") for u in users), "the scan finds no hashlib import at all"
    assert [u for u in users if not u.startswith("registry/core/hashing/")] == []


def test_the_progress_callback_module_is_the_ground_floor():
    assert [module for _, module in imports(PACKAGE / "core" / "progress.py") if module.startswith("registry")] == []


def test_the_card_never_imports_a_command():
    assert [u for u in modules_importing("registry.ops") if u.startswith("registry/card/")] == []


@pytest.mark.parametrize(
    "module",
    [
        "registry.core.atomic",
        "registry.core.hashing",
        "registry.core.hashing.cache",
        "registry.core.published",
        "registry.card.sync",
    ],
)
def test_a_module_imports_first_in_a_fresh_interpreter(module):
    """The hashing package sits below atomic (atomic takes its digests from it), so importing
    either first must work: a circle between them fails only in one order."""
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True)


# The library packages (the floors below ops/), each saying what it exports (issue #41 item 2).
LIBRARIES = (
    "core", "core.hashing", "artifacts", "card", "convert", "dataset", "gate", "gguf", "hf", "hub", "index",
)  # fmt: skip


def _package_dir(package: str) -> Path:
    return PACKAGE.joinpath(*package.split("."))


def exported(package: str) -> list[str]:
    """The package's ``__all__``, read from its ``__init__.py`` without importing it."""
    tree = ast.parse((_package_dir(package) / "__init__.py").read_text("utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def _bound_in_init(package: str) -> set[str]:
    tree = ast.parse((_package_dir(package) / "__init__.py").read_text("utf-8"))
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom | ast.Import):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Assign):
            bound.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return bound


def _is_submodule(package: str, name: str) -> bool:
    path = _package_dir(package) / name
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@pytest.mark.parametrize("package", LIBRARIES)
def test_each_library_package_says_what_it_exports(package):
    init = (_package_dir(package) / "__init__.py").read_text("utf-8")
    assert ast.get_docstring(ast.parse(init)), f"registry/{package}/__init__.py has no docstring"
    names = exported(package)
    assert names, f"registry/{package}/__init__.py has no __all__"
    assert [n for n in names if not (_is_submodule(package, n) or n in _bound_in_init(package))] == []


def _owner(module: str) -> str | None:
    """The innermost library package holding ``module`` (``registry.core.hashing.engine`` -> ``core.hashing``)."""
    owners = [p for p in LIBRARIES if module == f"registry.{p}" or module.startswith(f"registry.{p}.")]
    return max(owners, key=len) if owners else None


def unexported_imports(exports: Callable[[str], list[str]] = exported) -> list[str]:
    """``file:line -> what`` for every import, from outside a library package, of a module or name
    that package does not list in ``__all__``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                module = ".".join(filter(None, [base, node.module or ""]))
                # `from ..dataset import store`: what is imported from a package itself must be in its __all__
                is_package = module.startswith("registry.") and _owner(module) == module.removeprefix("registry.")
                wanted = [f"{module}.{a.name}" for a in node.names] if is_package else [module]
            elif isinstance(node, ast.Import):
                wanted = [a.name for a in node.names]
            else:
                continue
            for target in wanted:
                owner = _owner(target)
                if owner is None or f"registry.{owner}" == target or package.startswith(f"registry.{owner}"):
                    continue
                name = target.removeprefix(f"registry.{owner}.").split(".")[0]
                if name not in exports(owner):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} -> {target}")
    return found


def test_other_packages_import_only_what_a_library_exports():
    assert unexported_imports() == []


def test_the_check_sees_an_import_of_what_is_not_exported():
    def leaving_out(*names: str) -> Callable[[str], list[str]]:
        return lambda package: [n for n in exported(package) if n not in names]

    assert "registry/ops/add.py" in " ".join(
        unexported_imports(leaving_out("accept"))
    )  # from ..artifacts.accept import
    assert "registry.dataset.store" in " ".join(unexported_imports(leaving_out("store")))  # from ..dataset import store


def test_importing_a_library_package_imports_none_of_its_modules():
    """Saying what a package exports costs no start-up: the packages that export modules import none."""
    modules = [f"registry.{p}" for p in LIBRARIES if p not in ("card", "core.hashing")]
    code = f"import sys\nfor m in {modules!r}: __import__(m)\nprint(*sorted(n for n in sys.modules if n.startswith('registry.')))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == sorted(modules)  # the packages themselves, nothing inside them
