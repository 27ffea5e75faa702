"""The Hub side of a registry, as a library for ``ops/publish``, ``ops/pull`` and ``ops/verify_remote``.

:mod:`.plan` is the pure core (local files + remote tree -> plan), :mod:`.listing` the pure
comparisons of a remote tree's listing with its SHA256SUMS; :mod:`.remote` is the only module that calls
huggingface_hub; :mod:`.local` and :mod:`.gates` tie them to a registry on disk.  What the registry
remembers of the Hub is :mod:`registry.core.published`.

``__all__`` names the modules other packages import; importing the package imports none of them.
"""

__all__ = ["content", "gates", "listing", "local", "plan", "remote", "upload"]
