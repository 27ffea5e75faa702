"""Metadata commands: set, describe, train-stage, eval-setup (score lives with the artifact commands).

Each only parses options and prints; the logic is in ``registry/ops/<command>.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .app import REGISTRY_OPT, main, usage_error
from .output import json_option, output

LANG_OPT = click.option(
    "--lang", metavar="zh|en", help="The language the text options are in (default: the card's only language)."
)


@main.command("set")
@click.argument("field", metavar="FIELD")
@click.argument("values", nargs=-1, metavar="[VALUE]...")
@REGISTRY_OPT
@LANG_OPT
@json_option
def set_cmd(field: str, values: tuple[str, ...], registry: Path, lang: str | None) -> None:
    """Set a registry-level FIELD of index.json and re-render the card.

    \b
    FIELD is one of:
      title TEXT            the card's title
      license [SPDX]        the license (no value: unset)
      repo-id [NS/NAME]     the Hub repo publish targets (publish records it too)
      access [A]            who may see the repo: public, private, gated-auto,
                            gated-manual (publish --private/--gated records it
                            too; no value: unset)
      languages zh|en...    the card's languages, in order (default: zh en)
      tags [TAG]...         the front matter's tags
      summary, intended-use, limitations, attribution [TEXT]...
                            paragraphs or list items in one language (--lang);
                            no TEXT clears that language
    """
    from ..ops.set import set_field

    info = set_field(registry, field, values, lang)
    output().result({"ok": True, "registry": info.model_dump(mode="json")}, f"set {field}")


@main.command("describe")
@click.argument("path", required=False)
@REGISTRY_OPT
@click.option("--method", help="Describe every weight of this method (state, miss, full) instead of one PATH.")
@click.option("--base", help="Describe this base (known issues only) instead of weights.")
@LANG_OPT
@click.option("--notes", help="The weight's note in the files table (in --lang).")
@click.option(
    "--known-issue",
    "known_issues",
    multiple=True,
    help="A known issue (repeat for several; replaces the list in --lang).",
)
@click.option(
    "--prompt-format", help="The exact prompt layout, ending with an 'Assistant:' line (use $'…' for newlines)."
)
@click.option("--prompt-example", help="A complete prompt in that format for the usage snippet.")
@click.option(
    "--stop-token",
    "stop_tokens",
    type=click.IntRange(min=0),
    multiple=True,
    help="Token id that stops generation (0 = EOD; repeatable).",
)
@click.option(
    "--stop-text", "stop_texts", multiple=True, help="Text that stops generation, e.g. $'\\n\\nUser:' (repeatable)."
)
@click.option(
    "--keep-stop-text/--consume-stop-text", default=None, help="Whether the stop text is shown (default: consumed)."
)
@click.option(
    "--profile",
    help="Chat format profile for rwkv-cli, e.g. g1k or g1k-think; `registry smoke` samples the weight in it "
    "unless --prompt-format is set (default: g1k for State and full weights, g1k-think for MiSS).",
)
@click.option("--sampling", help="Sampling preset for rwkv-cli, e.g. g1k-agent.")
@click.option("--adapter-id", help="The id a MiSS adapter is registered under, e.g. v21-lr2e-5-e2.")
@click.option("--parameters", type=click.IntRange(min=1), help="Parameter count (e.g. 13300000000), for the VRAM hint.")
@click.option("--dtype", help="Inference dtype for the VRAM hint and the snippet: bf16, fp16 or fp32.")
@click.option("--dataset-repo", help="The dataset repo the training data came from.")
@click.option("--dataset-revision", help="The dataset repo's 40-hex commit the data was taken at.")
@click.option(
    "--author-evaluation/--no-author-evaluation",
    default=None,
    help="Declare the author's evaluation.json beside the weight (read for the card, never rewritten), or drop that.",
)
@json_option
def describe_cmd(
    path: str | None, registry: Path, method: str | None, base: str | None, lang: str | None, **fields: Any
) -> None:
    """Set metadata of the weight at PATH, of every weight of --method, or of --base.

    Per-weight metadata (with --method, every weight of that method, which must have weights) and per-base known
    issues. The card shows each field that is set (VRAM hint = parameters x dtype bytes x 1.2).
    --author-evaluation declares the author's evaluation.json beside the weight, shown on the card and never
    rewritten (docs/formats.md).
    """
    from ..ops.describe import Description, Target, describe

    if sum(x is not None for x in (path, method, base)) != 1:
        raise usage_error(
            "PATH",
            "name exactly one of PATH, --method or --base",
            "pass a weight's PATH, or --method METHOD, or --base NAME (one of the three)",
        )
    fields = {k: (v or None) if isinstance(v, tuple) else v for k, v in fields.items()}
    described = describe(registry, Target(path=path, method=method, base=base), Description(**fields), lang)
    output().result({"ok": True, "described": described}, f"described {', '.join(described)}")


@main.command("train-stage")
@click.argument("path")
@click.argument("name")
@REGISTRY_OPT
@LANG_OPT
@click.option("--describe", "describe", multiple=True, help="What the stage did (a paragraph; repeatable; in --lang).")
@click.option("--gpus", type=click.IntRange(min=1))
@click.option("--precision", help="e.g. BF16.")
@click.option("--deepspeed-stage", type=click.IntRange(0, 3), help="DeepSpeed ZeRO stage.")
@click.option("--global-batch", type=click.IntRange(min=1), help="Sequences per optimizer update.")
@click.option("--tokens-per-update", type=click.IntRange(min=1))
@click.option("--loss-masking", help="e.g. assistant-only.")
@click.option("--lr-schedule", help="e.g. 'constant 5e-7 after 10 warmup steps'.")
@click.option("--weight-decay", type=float)
@click.option("--grad-clip", type=float)
@click.option("--conversations", type=click.IntRange(min=0), help="Conversations in the training stream.")
@click.option("--tokens", type=click.IntRange(min=0), help="Tokens in the training stream.")
@click.option("--supervised-tokens", type=click.IntRange(min=0), help="Tokens that count for the loss.")
@click.option(
    "--caveat", "caveats", multiple=True, help="A caveat about the numbers (e.g. packing; repeatable; in --lang)."
)
@json_option
def train_stage_cmd(
    path: str,
    name: str,
    registry: Path,
    lang: str | None,
    describe: tuple[str, ...],
    caveats: tuple[str, ...],
    **facts: Any,
) -> None:
    """Record (or replace) training stage NAME of the weight at PATH."""
    from ..index.arguments import require_finite
    from ..ops.train_stage import set_stage

    for option in ("weight_decay", "grad_clip"):
        if facts[option] is not None:
            require_finite(facts[option], f"--{option.replace('_', '-')}")
    stage = set_stage(registry, path, name, facts, describe, caveats, lang)
    output().result({"ok": True, "stage": stage.model_dump(mode="json")}, f"recorded training stage {name!r} of {path}")


@main.command("eval-setup")
@click.argument("name")
@REGISTRY_OPT
@LANG_OPT
@click.option(
    "--describe", "describe", multiple=True, help="What was evaluated and how (a paragraph; repeatable; in --lang)."
)
@click.option("--items", type=click.IntRange(min=1), help="Questions or examples in the evaluation set.")
@click.option("--runtime", help="Inference runtime and version, e.g. rwkv==0.8.32.")
@click.option("--torch", help="PyTorch version, e.g. 2.7.1+cu128.")
@click.option("--precision", help="e.g. BF16.")
@click.option("--decoding", help="e.g. greedy (temperature=0, top_p=0).")
@click.option("--gpu", help="e.g. NVIDIA A800 80 GB.")
@click.option(
    "--metric", "metrics", multiple=True, metavar="NAME=DEFINITION", help="A metric's exact definition (repeatable)."
)
@json_option
def eval_setup_cmd(
    name: str, registry: Path, lang: str | None, describe: tuple[str, ...], metrics: tuple[str, ...], **facts: Any
) -> None:
    """Record (or update) evaluation setup NAME; results name it with `registry score --setup NAME`."""
    from ..ops.eval_setup import set_setup

    setup = set_setup(registry, name, facts, describe, metrics, lang)
    output().result({"ok": True, "setup": setup.model_dump(mode="json")}, f"recorded evaluation setup {name}")
