"""The Hub side of a registry: publish (planned, gated, one verified commit), pull, verify-remote.

:mod:`.plan` is the pure core (local files + remote tree -> plan); :mod:`.remote` is the only module
that calls huggingface_hub; :mod:`.publish`, :mod:`.pull` and :mod:`.verify` are thin shells
that tie them to a registry on disk.
"""

from .plan import LocalFile, Plan, PlannedFile, RemoteFile, RemoteState, make_plan, verify_tree
from .publish import Outcome, PublishOptions, publish
from .pull import Pulled, pull
from .refused import Refused
from .remote import Hub
from .verify import RemoteReport, verify_remote

__all__ = [
    "Hub",
    "LocalFile",
    "Outcome",
    "Plan",
    "PlannedFile",
    "PublishOptions",
    "Pulled",
    "Refused",
    "RemoteFile",
    "RemoteReport",
    "RemoteState",
    "make_plan",
    "publish",
    "pull",
    "verify_remote",
    "verify_tree",
]
