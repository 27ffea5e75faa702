"""The package's floors (docs/architecture.md): a module imports only from its own floor or
below, and no import circle exists, typing-only and function-level imports included (a module's
own packages, which Python imports before it, are not counted as its imports).

    floor 0  registry/core/     names, models, errors, the registry folder on disk, hashing
    floor 1  the libraries      artifacts, convert, gate, hf, gguf, dataset, card, hub
    floor 2  registry/index/    what the commands share about index.json (rules, editing, derived files)
    floor 3  registry/ops/      one module per command; it imports the floors below, not another command
                                (the few that compose commands are named in COMMANDS_COMPOSED)
    floor 4  registry/cli/      the click shell (and ``python -m registry``)
"""

from __future__ import annotations

import ast
from pathlib import Path

import registry

PACKAGE = Path(registry.__file__).parent
FLOORS: dict[str, int] = {
    "core": 0,
    **dict.fromkeys(("artifacts", "convert", "gate", "hf", "gguf", "dataset", "card", "hub"), 1),
    "index": 2,
    "ops": 3,
    "cli": 4,
    "__main__": 4,
}


def _module(path: Path) -> str:
    parts = ["registry", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(dotted: str) -> bool:
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def import_graph() -> dict[str, set[str]]:
    """Every registry module → the registry modules it imports, wherever the import statement is."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module(path)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if base == "registry" or base.startswith("registry."):
                    targets.add(base)
                    targets.update(f"{base}.{a.name}" for a in node.names if _exists(f"{base}.{a.name}"))
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.startswith("registry."))
        # a module's own packages are imported before it by Python itself: not an edge to count
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        graph[name] = {t for t in targets if t != name and t not in ancestors and _exists(t)}
    return graph


def floor(module: str) -> int:
    parts = module.split(".")
    return 0 if len(parts) == 1 else FLOORS[parts[1]]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_module_sits_on_a_named_floor():
    assert {m.split(".")[1] for m in import_graph() if "." in m} <= set(FLOORS)


def test_no_module_imports_from_a_floor_above_its_own():
    upward = sorted(f"{a} -> {b}" for a, targets in import_graph().items() for b in targets if floor(b) > floor(a))
    assert upward == []


def test_no_import_circle_typing_only_included():
    assert circles(import_graph()) == []


def room(module: str) -> str:
    """A room: a top-level package (``registry.hub``, ``registry.core``)."""
    return ".".join(module.split(".")[:2])


def test_no_circle_between_rooms():
    """Modules may not circle, and neither may the packages they sit in: two packages importing
    each other, by any of their modules, are one concept in two places."""
    rooms: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        rooms.setdefault(room(module), set()).update(room(t) for t in targets if room(t) != room(module))
    assert circles(rooms) == []


def test_the_names_module_is_the_ground_floor():
    assert import_graph()["registry.core.names"] == set()


def test_the_checks_see_an_upward_import_and_a_circle():
    graph = import_graph()
    planted = {**graph, "registry.core.names": {"registry.ops.validate"}}
    assert any(floor(b) > floor(a) for a, targets in planted.items() for b in targets)
    assert circles(planted)
    assert circles({"registry.hub": {"registry.dataset"}, "registry.dataset": {"registry.hub"}})


# A command module imports libraries, not other commands (issue #41 item 2): what several commands
# share lives on the floors below.  These modules compose commands, and only these, each for the
# reason given; ``None`` means any command.
COMMANDS_COMPOSED: dict[str, tuple[frozenset[str] | None, str]] = {
    "registry.ops.demo": (None, "runs the whole pipeline, command by command, as a user would"),
    "registry.ops.demo_dataset": (
        frozenset({"dataset_init", "dataset_add", "dataset_set"}),
        "builds demo's dataset registry with the dataset commands",
    ),
    "registry.ops.pull": (frozenset({"adopt", "validate"}), "pull is a download adopted, then validated"),
    "registry.ops.publish": (frozenset({"validate"}), "publishes only a registry validate passes"),
    "registry.ops.validate": (frozenset({"validate_dataset"}), "validate on a dataset registry is validate_dataset"),
    "registry.ops.vouched": (frozenset({"validate"}), "validate's report, remembered while the tree is unchanged"),
    "registry.ops.sums": (frozenset({"validate"}), "sums --check is validate's report on SHA256SUMS"),
}


def commands_importing_commands(graph: dict[str, set[str]]) -> list[str]:
    """``a -> b`` for every ops module importing another ops module outside COMMANDS_COMPOSED."""
    found = []
    for module, targets in sorted(graph.items()):
        if not module.startswith("registry.ops."):
            continue
        allowed, _ = COMMANDS_COMPOSED.get(module, (frozenset(), ""))
        for target in sorted(t for t in targets if t.startswith("registry.ops.")):
            if allowed is not None and target.removeprefix("registry.ops.") not in allowed:
                found.append(f"{module} -> {target}")
    return found


def test_a_command_imports_libraries_not_other_commands():
    assert commands_importing_commands(import_graph()) == []


def test_each_named_composition_still_composes():
    """An exception no longer needed is removed from the list, so the list stays the truth."""
    graph = import_graph()
    unused = [m for m in COMMANDS_COMPOSED if not any(t.startswith("registry.ops.") for t in graph.get(m, ()))]
    assert unused == []


def test_the_check_sees_a_command_importing_a_command():
    graph = import_graph()
    planted = {**graph, "registry.ops.dataset_adopt": graph["registry.ops.dataset_adopt"] | {"registry.ops.adopt"}}
    assert commands_importing_commands(planted) == ["registry.ops.dataset_adopt -> registry.ops.adopt"]
    planted = {**graph, "registry.ops.pull": graph["registry.ops.pull"] | {"registry.ops.add"}}
    assert commands_importing_commands(planted) == ["registry.ops.pull -> registry.ops.add"]
