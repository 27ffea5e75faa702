"""What Ollama does with a Modelfile, for the tests (no Ollama here): its parser's reading of the
file (ollama's parser/parser.go: commands, values unquoted from ``"…"`` or ``\"\"\"…\"\"\"`` with no
escape sequences, a quoted value may run over lines), and a renderer for the subset of Go's
text/template that chat templates use and the registry emits: text, ``{{ .Field }}``,
``range .Messages``, ``if`` / ``else if`` / ``else`` with ``eq .Field "literal"`` or a field,
``end``, and the ``{{-`` / ``-}}`` trim markers.  Anything else is refused, so a template that
leaves the subset fails the test instead of rendering wrong."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

COMMANDS = {
    "from",
    "license",
    "template",
    "system",
    "adapter",
    "draft",
    "renderer",
    "parser",
    "parameter",
    "message",
    "requires",
}


def _unquote(value: str) -> str | None:
    if value.startswith('"""'):
        return value[3:-3] if len(value) >= 6 and value.endswith('"""') else None
    if value.startswith('"'):
        return value[1:-1] if len(value) >= 2 and value.endswith('"') else None
    return value


def parse_modelfile(text: str) -> list[tuple[str, str]]:
    """(command, value) pairs, PARAMETER as ("parameter NAME", value); comments skipped."""
    commands: list[tuple[str, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, rest = line.partition(" ")
        if name.lower() not in COMMANDS:
            raise ValueError(f"line {i}: {name!r} is not a Modelfile command")
        if name.lower() == "parameter":
            key, _, rest = rest.partition(" ")
            name = f"parameter {key}"
        value = rest.strip()
        while _unquote(value) is None:  # a quoted value goes on over the next line, newline kept
            if i >= len(lines):
                raise ValueError(f"unterminated quoted value for {name}")
            value += "\n" + lines[i]
            i += 1
        unquoted = _unquote(value)
        assert unquoted is not None
        commands.append((name.lower(), unquoted))
    return commands


# -- the template subset -------------------------------------------------------------------------------------

_ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)


@dataclass
class _Node:
    kind: str  # "text", "field", "range", "if"
    value: str = ""
    branches: list[tuple[str | None, list[_Node]]] = field(
        default_factory=list
    )  # if: (condition or None for else, body)
    body: list[_Node] = field(default_factory=list)  # range


def _tokens(template: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    at = 0
    for match in _ACTION.finditer(template):
        text = template[at : match.start()]
        if match.group(1):
            text = text.rstrip(" \t\r\n")
        if out and out[-1][0] == "trim-next":
            out.pop()
            text = text.lstrip(" \t\r\n")
        out.append(("text", text))
        out.append(("action", match.group(2)))
        if match.group(3):
            out.append(("trim-next", ""))
        at = match.end()
    tail = template[at:]
    if out and out[-1][0] == "trim-next":
        out.pop()
        tail = tail.lstrip(" \t\r\n")
    out.append(("text", tail))
    if "{{" in tail or any("{{" in t for k, t in out if k == "text"):
        raise ValueError("an unclosed action")
    return out


def _parse(tokens: list[tuple[str, str]], at: int, stop: tuple[str, ...]) -> tuple[list[_Node], int, str]:
    nodes: list[_Node] = []
    while at < len(tokens):
        kind, value = tokens[at]
        at += 1
        if kind == "text":
            if value:
                nodes.append(_Node("text", value))
            continue
        word = value.split(" ", 1)[0]
        if word in stop:
            return nodes, at, value
        if re.fullmatch(r"\.[A-Za-z]+", value):
            nodes.append(_Node("field", value[1:]))
        elif word == "range":
            if value != "range .Messages":
                raise ValueError(f"unsupported range: {value!r}")
            body, at, closing = _parse(tokens, at, ("end",))
            if closing != "end":
                raise ValueError("range without end")
            nodes.append(_Node("range", body=body))
        elif word == "if":
            node = _Node("if")
            condition: str | None = value[3:]
            while True:
                body, at, closing = _parse(tokens, at, ("else", "end"))
                node.branches.append((condition, body))
                if closing == "end":
                    break
                if closing == "else":
                    condition = None
                elif closing.startswith("else if "):
                    condition = closing[len("else if ") :]
                else:
                    raise ValueError(f"unsupported else: {closing!r}")
            nodes.append(node)
        else:
            raise ValueError(f"unsupported action: {value!r}")
    if stop:
        raise ValueError(f"missing {' or '.join(stop)}")
    return nodes, at, ""


def _true(condition: str, scope: dict[str, Any]) -> bool:
    if m := re.fullmatch(r'eq \.([A-Za-z]+) "([^"\\]*)"', condition):
        return scope.get(m.group(1)) == m.group(2)
    if m := re.fullmatch(r"\.([A-Za-z]+)", condition):
        return bool(scope.get(m.group(1)))
    raise ValueError(f"unsupported condition: {condition!r}")


def _render(nodes: list[_Node], scope: dict[str, Any]) -> str:
    out = []
    for node in nodes:
        if node.kind == "text":
            out.append(node.value)
        elif node.kind == "field":
            if node.value not in scope:
                raise ValueError(f"no field .{node.value} here")
            out.append(str(scope[node.value]))
        elif node.kind == "range":
            out.extend(_render(node.body, {"Role": m["role"], "Content": m["content"]}) for m in scope["Messages"])
        else:
            out.append(
                next(
                    (
                        _render(body, scope)
                        for condition, body in node.branches
                        if condition is None or _true(condition, scope)
                    ),
                    "",
                )
            )
    return "".join(out)


def render_template(template: str, messages: list[dict[str, str]]) -> str:
    """``template`` rendered as Ollama renders a chat request's ``messages``."""
    nodes, _, _ = _parse(_tokens(template), 0, ())
    return _render(nodes, {"Messages": messages})
