"""tests/test_publish.py's registry, template and cli fixtures, as a plugin for other test modules
(``pytest_plugins``): a test module cannot be one itself once pytest has collected it."""

from .test_publish import cli, registry, template

__all__ = ["cli", "registry", "template"]
