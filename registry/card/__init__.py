"""The bilingual (中文 / English) model card, README.md, rendered from index.json.

Front matter comes from huggingface_hub's ModelCardData; the body from the Jinja2 templates in
``templates/``; one hand-written section (known problems, intended use, limitations) is carried
over verbatim.  ``registry card`` writes it, ``validate`` checks it, and every command that
changes the index re-renders it through ``stage_derived``.
"""

from .render import render_card
from .sync import card_state, check_card, stage_card

__all__ = ["card_state", "check_card", "render_card", "stage_card"]
