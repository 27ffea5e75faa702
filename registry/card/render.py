"""Render README.md from index.json: Hub front matter, a bilingual body, the hand-written part.

The body comes from Jinja2 templates under ``templates/`` (injectable, so tests and forks can
point elsewhere).  Every failure a maintainer can cause (a template that does not parse, a name
the template misspells, bytes that are not UTF-8, broken hand-written markers) becomes a
RegistryError naming the file and, for templates, the line; the caller has written nothing yet.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jinja2
from jinja2.loaders import split_template_path
from pydantic import BaseModel

from ..core.errors import RegistryError
from ..core.models import Index
from ..core.names import CARD_NAME, INDEX_NAME
from ..core.resources import REINSTALL, user_cache
from ..core.resources import template_dir as bundled_templates
from . import handwritten
from .facts import TreeFacts
from .markdown import FILTERS
from .metadata import front_matter
from .view import build_view

MAIN_TEMPLATE = "card.md.j2"
_SURROGATE = re.compile("[\ud800-\udfff]")


# ----------------------------------------------------------------------------------------------
# Loading templates


class _Utf8Loader(jinja2.BaseLoader):
    """Loads templates from one directory; bytes that are not UTF-8 are refused by file and line."""

    def __init__(self, directory: Path):
        self.directory = directory

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str | None, Callable[[], bool] | None]:
        path = self.directory.joinpath(*split_template_path(template))
        if not path.is_file():
            raise jinja2.TemplateNotFound(template)
        text = _decode(
            path.read_bytes(), path, "card.template-not-utf8", _fixer(self.directory)("save the template as UTF-8")
        )
        return text, str(path), None  # each render builds a fresh Environment: no cache to invalidate


def _fixer(template_dir: Path) -> Callable[[str], str]:
    """How to mend a template problem: reinstall when the template is the installed package's own."""
    shipped = template_dir == bundled_templates()
    return lambda own: REINSTALL if shipped else own


def _decode(data: bytes, file: Path | str, code: str, fix: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RegistryError(code, f"{file}:{line}", f"not valid UTF-8 (byte {exc.start})", fix) from exc


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates in the user cache (compiling them is most of a pre-commit hook's card
    check); entries are keyed by template source, so an edited template is compiled again."""
    directory = user_cache("templates")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # a read-only home: compile every time
    return jinja2.FileSystemBytecodeCache(str(directory))


def environment(template_dir: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=_Utf8Loader(template_dir),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # Markdown, not HTML: escaping is done per context by the md_* filters
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=_bytecode_cache(),
    )
    env.filters.update(FILTERS)
    env.globals.update(HANDWRITTEN_START=handwritten.START, HANDWRITTEN_END=handwritten.END)
    return env


def _template_line(exc: BaseException, template_dir: Path) -> str | None:
    """``file:line`` of the innermost template frame (Jinja rewrites tracebacks to point there)."""
    root = str(template_dir)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(root)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def render_body(template: str, context: dict[str, Any], template_dir: Path | None = None) -> str:
    """``template`` (the model card's, or the dataset card's) rendered with ``context``; ``template_dir``
    defaults to the installed package's templates."""
    template_dir = Path(template_dir or bundled_templates()).absolute()
    fix = _fixer(template_dir)
    try:
        return environment(template_dir).get_template(template).render(context)
    except jinja2.TemplateSyntaxError as exc:
        where = f"{exc.filename or exc.name}:{exc.lineno}"
        raise RegistryError(
            "card.template-syntax",
            where,
            f"template syntax error: {exc.message}",
            fix("correct the Jinja syntax at that line"),
        ) from exc
    except jinja2.TemplateNotFound as exc:  # no name for `{% include [] %}`
        missing = template_dir / exc.name if isinstance(exc.name, str) else template_dir
        raise RegistryError(
            "card.template-missing", missing, "template not found", fix("restore the template")
        ) from exc
    except jinja2.TemplateError as exc:  # undefined names (StrictUndefined), bad filters, ...
        where = _template_line(exc, template_dir) or str(template_dir / template)
        raise RegistryError(
            "card.template-error",
            where,
            f"template error: {exc}",
            fix("correct the expression at that line (templates see only `view` and `index`)"),
        ) from exc


# ----------------------------------------------------------------------------------------------
# Guard for the index's text


def _strings(value: Any, where: str = "$") -> Iterator[tuple[str, str]]:
    """Every string in a JSON-like value, with its JSON path."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _strings(child, f"{where}.{key}")
    elif isinstance(value, list):
        for number, child in enumerate(value):
            yield from _strings(child, f"{where}[{number}]")


def require_renderable(index: BaseModel) -> None:
    """Refuse index text the card cannot carry: text that cannot be written as UTF-8 (json.loads
    turns an escaped lone surrogate, ``"\\ud800"`` in index.json, into a str that has no UTF-8
    encoding), and a hand-written-section marker, which would leave the card with a second one."""
    for where, text in _strings(index.model_dump(mode="json")):
        if _SURROGATE.search(text):
            raise RegistryError(
                "card.not-utf8",
                INDEX_NAME,
                f"{where} holds an escaped lone surrogate, which is not valid UTF-8",
                f"correct the text at {where}",
            )
        marker = handwritten.marker_in(text)
        if marker:
            raise RegistryError(
                "card.marker-in-index",
                INDEX_NAME,
                f"{where} holds the card's hand-written-section marker {marker}",
                f"remove the marker from the text at {where}",
            )


# ----------------------------------------------------------------------------------------------


def decode_card(data: bytes) -> str:
    """README.md's text; its hand-written part is kept verbatim, so it must be valid UTF-8."""
    return _decode(data, CARD_NAME, "card.not-utf8", f"save {CARD_NAME} as UTF-8")


def render_card(
    index: Index, existing: str | None, template_dir: Path | None = None, facts: TreeFacts | None = None
) -> str:
    """README.md for ``index``, keeping the hand-written section of ``existing`` (the current text).

    ``template_dir`` defaults to the installed package's templates; ``facts`` are what the card
    shows from the tree (train.json, miss.json locations).  The result is a pure function of its
    inputs: no dates, no environment, stable ordering.
    """
    require_renderable(index)
    view = build_view(index, handwritten.extract(existing, index.registry.languages), facts)
    body = render_body(MAIN_TEMPLATE, {"view": view, "index": index}, template_dir)
    return f"---\n{front_matter(view)}\n---\n\n{body}"
