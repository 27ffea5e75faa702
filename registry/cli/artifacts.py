"""Artifact commands: add-base, add, score, list."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..ops.list import DatasetListing, list_registry
from .app import REGISTRY_OPT, main, usage_error
from .output import Line, json_option, output

if TYPE_CHECKING:
    from ..core.models import Method
    from ..ops.list import DatasetListing, Listing


@main.command("add-base")
@click.argument("base", type=click.Path(dir_okay=False, path_type=Path))
@REGISTRY_OPT
@click.option("--source", help="Hub repo the base comes from, e.g. BlinkDL/rwkv7-g1.")
@click.option("--vocab", help="Vocabulary file name, e.g. rwkv_vocab_v20230424.txt.")
@click.option("--sha256", "sha256", help="Published sha256 (checked against the file; required with --metadata-only).")
@click.option("--metadata-only", is_flag=True, help="Declare the base by its hash without the file.")
@json_option
def add_base_cmd(
    base: Path, registry: Path, source: str | None, vocab: str | None, sha256: str | None, metadata_only: bool
) -> None:
    """Register base checkpoint BASE (.pth): hash, inspect, check against the catalog, create <base-stem>/.

    It says when the base is not in the known-bases catalog (in_catalog under --json).
    """
    from ..artifacts.accept import BaseRequest  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)
    from ..ops.add_base import add_base  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)

    request = BaseRequest(
        path=None if metadata_only else base, filename=base.name, source=source, vocab=vocab, sha256=sha256
    )
    out = output()
    total = base.stat().st_size if not metadata_only and base.is_file() else None
    with out.bar(f"hashing {base.name}", total=total) as bar:
        added = add_base(registry, request, bar.advance)
    note = (
        f"note: {added.base.filename} is not in the known-bases catalog; check its source yourself: compare its "
        "sha256 above with the one on the page it was published on (a Hub file's page shows it)"
    )
    text: list[str | Line] = [
        f"added base {added.base.name} (sha256 {added.base.sha256})",
        *([] if added.in_catalog else [Line(note, err=True)]),
    ]
    out.result({**added.base.model_dump(mode="json"), "in_catalog": added.in_catalog}, text)


@main.command("add")
@click.argument("file", type=click.Path(path_type=Path))
@REGISTRY_OPT
@click.option("--base", required=True, help="Base name (the base file name without .pth).")
@click.option("--method", required=True, type=click.Choice(["state", "miss", "full"]))
@click.option("--data-version", required=True, help="Training-data version, e.g. v1.41.")
@click.option("--run", help="Run directory (required for MiSS), e.g. r16-lr2e-5-e2.")
@click.option(
    "--train-json",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Trainer, hyperparameters, command line, data sha256.",
)
@click.option("--data-sha256", help="sha256 of the training data (must equal train.json's).")
@click.option("--dataset-repo", help="Dataset repo holding the training data, e.g. No-22/rwkv-agent-distill.")
@click.option(
    "--data-sums",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The dataset repo's SHA256SUMS; the data sha256 must be listed in it.",
)
@click.option("--recommended", is_flag=True, help="Mark as the recommended file for this base and method.")
@click.option("--notes", default="", help="Free text shown in the card.")
@click.option("--move", is_flag=True, help="Move the file instead of copying it.")
@json_option
def add_cmd(
    file: Path,
    registry: Path,
    base: str,
    method: str,
    data_version: str,
    run: str | None,
    train_json: Path,
    data_sha256: str | None,
    dataset_repo: str | None,
    data_sums: Path | None,
    recommended: bool,
    notes: str,
    move: bool,
) -> None:
    """Put weight FILE at its canonical path, refusing weights that do not fit the base.

    Refused: State shapes or MiSS fingerprints of another base, and names validate would reject (no .pth or
    .safetensors suffix, a case or Unicode twin of a file there, bidi or zero-width characters, a name over 255
    bytes).

    FILE may be a Transformers checkpoint folder (safetensors shards, model.safetensors.index.json, config.json,
    …; --method full): its files land byte for byte in <base>/full/<data-version>/, checked as Transformers loads
    them (docs/formats.md).
    """
    from ..ops.add import AddRequest, add_checkpoint, add_weight  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)

    request = AddRequest(
        file=file,
        base=base,
        method=method,
        data_version=data_version,
        train_json=train_json,
        run=run,
        data_sha256=data_sha256,
        dataset_repo=dataset_repo,
        data_sums=data_sums,
        recommended=recommended,
        notes=notes,
        move=move,
    )
    out = output()
    total = file.stat().st_size if file.is_file() else None
    with out.bar(f"adding {file.name}", total=total) as bar:
        added = (add_checkpoint if file.is_dir() else add_weight)(registry, request, bar.advance)
    out.result(added.model_dump(mode="json"), f"added {added.path} (sha256 {added.sha256})")


@main.command("score")
@click.argument("path", required=False)
@REGISTRY_OPT
@click.option(
    "--base",
    help="Record a result of this base alone (no PATH), or with --reference, of weights compared against on it.",
)
@click.option(
    "--reference",
    help="With --base: weights not in this repository, e.g. 'MiSS v2.0 r16 lr3e-5' (created on first use).",
)
@click.option(
    "--method", "ref_method", type=click.Choice(["state", "miss", "full"]), help="With --reference: its method."
)
@click.option("--location", help="With --reference: where it is published (omit when it was never uploaded).")
@click.option("--benchmark", required=True, help="Benchmark name, e.g. exam.")
@click.option(
    "--value",
    "value_text",
    required=True,
    help="The result: 52.2, 52.2% or a score out of a total, 41.0/60 (value 41.0, unit /60).",
)
@click.option("--unit", help="The unit, where --value does not carry one.  [default: %]")
@click.option("--count", type=float, help="Items scored correct, e.g. 296.5 (shown as 296.5 题 / questions).")
@click.option("--date", "date_", required=True, help="YYYY-MM-DD the evaluation ran.")
@click.option(
    "--backend", required=True, help="Inference backend and version; only same-date, same-backend scores compare."
)
@click.option("--runs", default=1, show_default=True, type=click.IntRange(min=1), help="Runs averaged.")
@click.option("--setup", help="The evaluation setup (registry eval-setup NAME).")
@click.option(
    "--baseline", help="What this result is compared with: the base's name, a reference's name or an entry's path."
)
@click.option("--notes", default="")
@click.option("--footnote", default="", help="Why the comparison with the baseline is only indicative.")
@click.option(
    "--lang", metavar="zh|en", help="The language of --notes and --footnote (default: shown in every language)."
)
@json_option
def score_cmd(
    path: str | None,
    registry: Path,
    base: str | None,
    reference: str | None,
    ref_method: Method | None,
    location: str | None,
    benchmark: str,
    value_text: str,
    unit: str | None,
    count: float | None,
    date_: str,
    backend: str,
    runs: int,
    setup: str | None,
    baseline: str | None,
    notes: str,
    footnote: str,
    lang: str | None,
) -> None:
    """Record an evaluation result for the entry at PATH, for --base alone, or for --base's --reference.

    On an entry (a safetensors twin stands for its source), on a Transformers checkpoint (PATH: its
    model.safetensors.index.json or its folder), on a base alone, or on a reference: weights compared
    against but not held here (e.g. never uploaded). The same benchmark, date, backend and setup again replaces the
    result. --setup must exist; --baseline must have a result on the same benchmark with the same setup, date and
    backend (or --footnote says why an indicative comparison is enough). Results go to index.json, never into an
    author's evaluation.json (kept byte for byte and shown beside them, docs/formats.md).
    """
    from ..core.models import Localized, Score  # noqa: PLC0415 start-up: light commands import no pydantic (test_light_commands)
    from ..core.schemas import build  # noqa: PLC0415 start-up: light commands import no jsonschema, pydantic (test_light_commands)
    from ..index.arguments import parse_date, parse_value, require_finite, require_text  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)
    from ..index.editing import check_language  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)
    from ..ops.score import Subject, add_score  # noqa: PLC0415 start-up: light commands import no jinja2, jsonschema, pydantic (test_light_commands)

    if (path is None) == (base is None) or (reference is None and (ref_method or location)):
        raise usage_error(
            "--base" if path is None and base is None else "PATH",
            "name exactly one of PATH or --base; --reference, --method and --location go with --base",
            "record a result of PATH, of --base NAME alone, or of --base NAME --reference NAME [--method M "
            "--location URL] for weights not in this repository",
        )
    if lang is not None:
        check_language(lang)
    value, unit = parse_value(value_text, unit)
    for number, option in ((value, "--value"), (count, "--count")):
        if number is not None:
            require_finite(number, option)
    texts = {"--benchmark": benchmark, "--unit": unit, "--backend": backend, "--notes": notes, "--footnote": footnote}
    for option, text in (
        *texts.items(),
        ("--reference", reference),
        ("--location", location),
        ("--setup", setup),
        ("--baseline", baseline),
    ):
        if text is not None:
            require_text(text, option)
    in_lang = {
        k: (Localized.model_validate({lang: [t]}) if lang and t else t)
        for k, t in (("notes", notes), ("footnote", footnote))
    }
    fields = {
        "benchmark": benchmark,
        "value": value,
        "unit": unit,
        "count": count,
        "date": parse_date(date_),
        "backend": backend,
        "runs": runs,
        "setup": setup,
        "baseline": baseline,
        **in_lang,
    }
    score = build(Score, fields, {k: f"--{k}" for k in fields})
    holder = add_score(registry, Subject(path, base, reference, ref_method, location), score, lang)
    output().result(
        holder.model_dump(mode="json"), f"recorded {benchmark} = {value}{unit} for {path or (reference or base)}"
    )


@main.command("list")
@REGISTRY_OPT
@json_option
def list_cmd(registry: Path) -> None:
    """Show bases, entries and Transformers checkpoints (in a dataset registry: its versions, trained files and
    linked weights).

    Whole paths when not on a terminal.
    """

    listing = list_registry(registry)
    output().result(listing.as_dict(), _tables(listing))


def _tables(listing: Listing | DatasetListing) -> Iterator[Line]:
    """The bases and the entries (a dataset registry's versions and the weights linked to them) as
    two tables: on a terminal they fit its width; in a pipe or a file every path is printed whole."""
    from rich.console import Console  # noqa: PLC0415 start-up: rich's console, table and progress bar load only when drawn (-X importtime: 30-190 ms)
    from rich.table import Table  # noqa: PLC0415 start-up: rich's console, table and progress bar load only when drawn (-X importtime: 30-190 ms)

    if isinstance(listing, DatasetListing):
        first = Table(
            "version", "date", "thinking", "rows (train / validation)", "trained file", "sha256", title="versions"
        )
        second = Table("version", "model repo", "path", "method", "rec.", title="linked weights")
        for v in listing.versions:
            d = v.version
            first.add_row(
                d.version,
                d.date.isoformat(),
                d.profile or d.thinking,
                f"{d.train_rows} / {d.validation_rows}",
                v.trained_path,
                d.trained_file.sha256[:12] + "…",
            )
            for w in v.weights:
                second.add_row(d.version, w.repo_id or "(local)", w.path, w.method, "★" if w.recommended else "")
    else:
        first = Table("base", "source", "sha256", "vocab", title="bases")
        for b in listing.bases:
            first.add_row(b["name"], b.get("source") or "—", b["sha256"][:16] + "…", b.get("vocab") or "—")
        second = Table("path", "method", "data", "sha256", "rec.", "scores", title="entries")
        for e in listing.entries:
            second.add_row(
                e["path"],
                e["method"],
                e["data"]["version"],
                e["sha256"][:12] + "…",
                "★" if e.get("recommended") else "",
                str(len(e.get("scores") or [])),
            )
    third = None
    if not isinstance(listing, DatasetListing) and listing.checkpoints:
        third = Table("path", "architecture", "shards", "gate", "scores", title="checkpoints")
        for c in listing.checkpoints:
            gate = c.get("gate")
            third.add_row(
                c["path"],
                c["architecture"],
                str(len(c["shards"])),
                ("passed" if gate["passed"] else "failed")
                if gate
                else ("not run" if c["model_type"] == "rwkv7" else "does not apply (not RWKV-7)"),
                str(len(c.get("scores") or [])),
            )
    console = Console() if sys.stdout.isatty() else Console(width=1 << 16)
    with console.capture() as tables:
        console.print(first)
        console.print(second)
        if third is not None:
            console.print(third)
    yield Line(tables.get(), nl=False)
