"""Files the package ships beside its code: card templates, WKV kernel sources, JSON Schemas and
the known-bases catalog.

They live at the repository's top level (``templates/``, ``kernels/``, ``schemas/``,
``index.json``) and reach the package as ``registry/_bundled/``: symlinks in the source tree,
copies in the wheel.  So an editable install and a wheel find them the same way, through
:mod:`importlib.resources`, and a file missing from a broken install is a one-line refusal.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

from .errors import RegistryError

REINSTALL = "reinstall the tool: pip install --force-reinstall rwkv-registry"


def bundled(*parts: str) -> Path:
    """The path of a shipped file or directory; refuses when the installation lacks it."""
    path = Path(str(files("registry").joinpath("_bundled", *parts)))
    if not path.exists():
        raise RegistryError("install.missing-file", path, "missing from the installed package", REINSTALL)
    return path


def user_cache(name: str) -> Path:
    """``$XDG_CACHE_HOME/rwkv-registry/<name>`` (``~/.cache`` by default): build products and
    compiled templates, keyed by their sources, never registry data."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rwkv-registry" / name


def template_dir() -> Path:
    return bundled("templates")


def kernel_dir() -> Path:
    return bundled("kernels")


def schema_dir() -> Path:
    return bundled("schemas")


def catalog_path() -> Path:
    return bundled("catalog.json")
