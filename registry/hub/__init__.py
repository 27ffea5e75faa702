"""The Hub side of a registry, as a library for ``ops/publish``, ``ops/pull`` and ``ops/verify_remote``.

:mod:`.plan` is the pure core (local files + remote tree -> plan); :mod:`.remote` is the only
module that calls huggingface_hub; :mod:`.local`, :mod:`.gates`, :mod:`.record` and
:mod:`.verify` tie them to a registry on disk.
"""
