"""One home for each concept (issue #28): what the source tree itself must keep true."""

from __future__ import annotations

import ast
import re
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


# A function-local import (ruff's import-outside-top-level, on in pyproject.toml) stays only for an optional
# dependency or a measured start-up win, and its noqa says which (issue #41): "optional dependency: torch" or
# "start-up: ...".  The code is spelled in two halves so that this file's own patterns are not findings.
CODE = "PLC" + "0415"
LOCAL_IMPORT_NOQA = re.compile(rf"noqa:[^#]*\b{CODE}\b")
LOCAL_IMPORT_REASON = re.compile(rf"noqa: (?:[A-Z]+[0-9]+, )*{CODE} (?:optional dependency: \w+|start-up: \S+ \S+)")


def local_imports_without_a_reason(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for folder in ("registry", "tests", "bench")
        for path in sorted((root / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if LOCAL_IMPORT_NOQA.search(line) and not LOCAL_IMPORT_REASON.search(line)
    ]


def test_every_function_local_import_says_why():
    assert local_imports_without_a_reason(PACKAGE.parent) == []


def test_a_function_local_import_without_a_reason_is_seen(tmp_path):
    for folder in ("registry", "tests", "bench"):
        (tmp_path / folder).mkdir()
    (tmp_path / "registry" / "ok.py").write_text(
        f"def f():\n    import torch  # noqa: {CODE} optional dependency: torch\n"
        f"    from . import validate  # noqa: F401, {CODE} start-up: light commands import no pydantic\n"
    )
    (tmp_path / "tests" / "vague.py").write_text(f"def f():\n    import json  # noqa: {CODE} because\n")
    (tmp_path / "bench" / "bare.py").write_text(f"def f():\n    import torch  # noqa: {CODE}\n")
    assert local_imports_without_a_reason(tmp_path) == [
        f"tests/vague.py:2: import json  # noqa: {CODE} because",
        f"bench/bare.py:2: import torch  # noqa: {CODE}",
    ]
