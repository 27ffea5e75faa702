"""Transformers/fla export of RWKV-7 weights: the key mapping and ``config.json`` from shapes
(:mod:`.mapping`, no torch), the world-vocabulary tokenizer files (:mod:`.tokenizer`), the other
JSON files (:mod:`.files`), the checks ``validate`` runs on an export (:mod:`.check`, no torch), the
checks the export runs with Transformers and fla before it commits (:mod:`.verify`), reading an
export back into x070 tensors (:mod:`.tensors`), MiSS adapters as PEFT adapters (:mod:`.peft`) and
State files as fla's initial recurrent state (:mod:`.state`).

``__all__`` names the modules other packages import; importing the package imports none of them.
"""

__all__ = ["build", "check", "folder", "mapping", "source", "tokenizer", "verify"]
