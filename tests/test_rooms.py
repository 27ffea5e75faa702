"""One home for each concept (issue #28): what the source tree itself must keep true."""

from __future__ import annotations

import ast
import subprocess
import sys
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
