"""The Ollama Modelfile written beside each GGUF file (``<stem>-<TYPE>.Modelfile``): what
``ollama create NAME -f <it>`` needs to run the file as the weights were trained to be prompted.

* ``FROM ./<stem>-<TYPE>.gguf``: Ollama resolves a relative path against the Modelfile's folder;
* ``TEMPLATE``: the RWKV chat format every profile the registry serves shares (seed 000's
  prompt format, seed 001's g1k and g1k-think, the rows of seed 002): ``System: …``,
  ``User: …`` and ``Assistant: …`` turns separated by a blank line, the prompt ending with
  ``Assistant:`` (g1k-think's answer starts with its ``<think>…</think>`` block, which the
  model writes itself).  Written in the subset of Go's text/template Ollama documents for
  chat templates: ``range .Messages``, ``if eq .Role "…"`` / ``else if``, ``.Content``, and
  ``{{-`` to trim the whitespace before an action;
* ``PARAMETER stop`` with the stop text ``\\n\\nUser:`` (the end of a turn; token 0 ends the
  text on its own): quoted as Ollama quotes a value holding a newline (``ollama show
  --modelfile``), a double-quoted string over three lines, since its parser reads no escapes;
* ``PARAMETER temperature 0`` and ``top_p 0``: the greedy decoding the cards recommend.

It depends only on the GGUF's path, so it is derived like the card: every writing command
stages it where it is missing, and validate compares it byte for byte.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from ..core.layout import modelfile_path
from ..core.models import ASSISTANT_TURN

STOP_TEXT = "\n\nUser:"  # the end of the model's turn: the next turn's label
TURN_SEPARATOR = "\n\n"
ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}  # Ollama's message roles -> RWKV's labels
GREEDY = {"temperature": "0", "top_p": "0"}  # the decoding the cards recommend (temperature=0, top_p=0)


def template() -> str:
    """The TEMPLATE: every message as its RWKV turn, then the open ``Assistant:`` turn."""
    parts = ["{{- range .Messages }}\n{{- "]
    for n, (role, label) in enumerate(ROLES.items()):
        parts.append(
            f'{"if" if n == 0 else "else if"} eq .Role "{role}" }}}}{label}: {{{{ .Content }}}}{TURN_SEPARATOR}{{{{ '
        )
    parts.append("end }}\n{{- end }}" + ASSISTANT_TURN)
    return "".join(parts)


def _quoted(value: str) -> str:
    """A value as Ollama's Modelfile writer quotes it: a newline or an edge space needs quotes,
    a double quote in it then needs triple quotes."""
    if "\n" in value or value != value.strip(" "):
        return f'"""{value}"""' if '"' in value else f'"{value}"'
    return value


def modelfile(gguf_rel: str) -> str:
    """The Modelfile for the GGUF file at ``gguf_rel`` (registry-relative)."""
    name = PurePosixPath(gguf_rel).name
    lines = [
        f"# Ollama Modelfile for {name}, written by rwkv-registry: ollama create {ollama_name(gguf_rel)} "
        f"-f {PurePosixPath(modelfile_path(gguf_rel)).name}",
        "# RWKV chat format: System: / User: / Assistant: turns separated by a blank line; the prompt ends "
        "with Assistant:",
        f"FROM ./{name}",
        f'TEMPLATE """{template()}"""',
        f"PARAMETER stop {_quoted(STOP_TEXT)}",
        *(f"PARAMETER {key} {value}" for key, value in GREEDY.items()),
    ]
    return "\n".join(lines) + "\n"


def ollama_name(gguf_rel: str) -> str:
    """The model name the card's ``ollama create`` gives the file: its stem in lower case (Ollama's names are)."""
    return PurePosixPath(gguf_rel).stem.lower()


def modelfiles(gguf_paths: list[str]) -> dict[str, str]:
    """Every GGUF file's Modelfile, by its registry-relative path."""
    return {modelfile_path(rel): modelfile(rel) for rel in gguf_paths}
