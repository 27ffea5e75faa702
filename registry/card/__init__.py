"""The model card, README.md, rendered from index.json in the registry's languages (中文, English
or both), and evaluation.json beside it.

Front matter comes from huggingface_hub's ModelCardData; the body from the Jinja2 templates in
``templates/``; one hand-written section is carried over verbatim.  ``registry card`` writes
both files, ``validate`` checks them, and every command that changes the index re-renders them
through ``stage_derived``.  ``__all__`` names the functions imported below and the modules other packages
import.
"""

from .render import render_card
from .sync import check_rendered, rendered, stage_rendered

__all__ = [
    # functions
    "check_rendered",
    "render_card",
    "rendered",
    "stage_rendered",
    # the modules other packages import
    "facts",
    "handwritten",
    "metadata",
    "render",
    "sync",
    "view",
]
