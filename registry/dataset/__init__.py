"""Dataset registries: a Hub dataset repo shaped like seed 002 (No-22/rwkv-agent-distill).

One folder per data version (``<version>/dataset/train/…``, ``<version>/dataset/validation/…``,
manifests, logs), ``index.json`` (``kind: dataset``, :mod:`.models`) and ``SHA256SUMS`` at the
root, kept by the same transaction code as a model registry.  :mod:`.rows` checks that the three
forms of a version's rows agree, streamed; :mod:`.versions` checks what a version states against
its files; :mod:`.links` binds versions to the weights trained on them, both ways; :mod:`.card`
renders the dataset card.

``__all__`` names the modules other packages import; importing the package imports none of them.
"""

__all__ = ["card", "checked", "content", "layout", "links", "models", "remote", "store", "synthetic", "versions"]
