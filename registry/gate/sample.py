"""Each entry in its own format: a short greedy continuation of the entry's own prompt.

The gate's parity checks run fixed prompts, the same for every entry.  The sample runs the prompt
format the weight was trained for (:func:`registry.gate.prompts.sample_format`: the card's stated
prompt, else its profile's, g1k or g1k-think) on the runtime the checks ran (our kernel on CUDA,
the torch recurrence on CPU), with the State applied or the adapter merged, and stops by the
entry's stop rules.  The receipt records the first tokens, their text, whether a stop text
appeared and how many tokens came before the stop.

It is reported, never enforced: whether a continuation ends its turn within a short budget only
means something for trained weights, and the gate cannot tell trained weights from the random
ones tests and benchmarks gate (nor should a thinking profile's long answer fail a short budget).
So the sample is a smoke sample shown on the card, not a check of the verdict and not a benchmark.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..core.hashing.digest import sha256_hex
from ..core.models import FormatSample
from .prompts import SampleFormat, Tokenizer
from .runtime import Rwkv7

SAMPLE_TOKENS = 32  # the budget: a one-sentence answer and its stop fit; a few tenths of a second at 7.2B
SAMPLE_SHOWN = 16  # the first tokens the receipt and the card keep


def run_sample(
    model: Rwkv7, fmt: SampleFormat, tokenizer: Tokenizer, state: Sequence[torch.Tensor] | None
) -> FormatSample:
    """Greedy continuation of ``fmt``'s prompt on ``model`` from ``state``, stopped by its rules."""
    ids = tokenizer.encode(fmt.prompt)
    made = model.generate(
        ids, SAMPLE_TOKENS, decode=tokenizer.decode, stop_tokens=fmt.stop_tokens, stop_texts=fmt.stop_texts, state=state
    )
    first = made.tokens[:SAMPLE_SHOWN]
    text = tokenizer.shown(first)
    cuts = [text.index(stop) for stop in fmt.stop_texts if stop in text]
    return FormatSample(
        format=fmt.name,
        format_from=fmt.source,
        prompt_sha256=sha256_hex(fmt.prompt.encode("utf-8")),
        prompt_tokens=len(ids),
        stop_tokens=list(fmt.stop_tokens),
        stop_texts=list(fmt.stop_texts),
        max_new_tokens=SAMPLE_TOKENS,
        first_tokens=first,
        text=text[: min(cuts)] if cuts else text,
        tokens=len(made.tokens),
        stop_reason=made.stop_reason,
        stop_text_seen=made.stop_reason == "stop_text",
    )
