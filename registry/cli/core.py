"""Core commands: init, sums, validate, demo."""

from __future__ import annotations

from pathlib import Path

import click

from ..core.progress import say
from .app import DIR_ARG, REGISTRY_OPT, card_front_options, main, registry_dir
from .output import json_option, output
from .sign import EXISTING_FILE

REQUIRE_BYTES_OPT = click.option(
    "--require-bytes",
    is_flag=True,
    help="Refuse Git LFS pointers (each is a finding) instead of checking them by oid and size.",
)


@main.command()
@DIR_ARG
@REGISTRY_OPT
@card_front_options("model card")
@json_option
def init(directory: Path | None, registry: Path, title: str | None, license_: str | None) -> None:
    """Create an empty registry in DIR (default: -C, else the current directory).

    It works in an empty folder or beside README.md, LICENSE, NOTICE, CITATION.cff and git's files (the README
    becomes the card's hand-written section, whole), and writes or extends .gitignore with .registry/. A failed init
    leaves nothing behind; init refuses inside a registry.
    """
    from ..ops.init import init_registry

    repo = init_registry(registry_dir(directory, registry), title=title, license=license_)
    output().result({"ok": True, "registry": str(repo.root)}, f"initialised registry at {repo.root}")


@main.command()
@DIR_ARG
@REGISTRY_OPT
@click.option("--check", is_flag=True, help="Only verify SHA256SUMS against the files; change nothing.")
@REQUIRE_BYTES_OPT
@json_option
def sums(directory: Path | None, registry: Path, check: bool, require_bytes: bool) -> None:
    """Recompute SHA256SUMS (or --check it) for the registry in DIR.

    `sha256sum -c SHA256SUMS` agrees with what it writes; --check exits 1 when SHA256SUMS is stale.
    """
    from ..ops.sums import check_sums, write_sums

    root, out = registry_dir(directory, registry), output()
    with out.bar("hashing") as bar:
        if check:
            report = check_sums(root, progress=bar.advance, require_bytes=require_bytes)
        else:
            digests = write_sums(root, progress=bar.advance)
    if check:
        _say_notes(report.notes())
        out.check(report.problems, "SHA256SUMS matches every file", report.as_dict())
    else:
        out.result({"ok": True, "files": len(digests)}, f"SHA256SUMS written: {len(digests)} files")


@main.command(name="validate")
@DIR_ARG
@REGISTRY_OPT
@json_option
@click.option(
    "--index-only",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Check just this index.json (e.g. the known-bases catalog).",
)
@click.option(
    "--allow-rewrite",
    "rewrite_reason",
    metavar="REASON",
    help="Accept changes to already-published files and record REASON in index.json.",
)
@click.option(
    "--linked",
    type=click.Path(file_okay=False, path_type=Path),
    help="The other registry of a dataset link: for a model registry the dataset registry its entries cite; for a dataset registry the model registry its card lists.",
)
@click.option(
    "--linked-hub",
    is_flag=True,
    help="Check the links against the Hub: each entry's dataset_repo at its dataset_revision, or the model repo at the revision the dataset card was derived from.",
)
@REQUIRE_BYTES_OPT
@click.option(
    "--public-key",
    type=EXISTING_FILE,
    metavar="SIGNER.pub",
    help="Also verify model.sig with the signer's PEM public key (authorship; needs the sign extra). Without it, model.sig is checked for consistency only.",
)
def validate_cmd(
    directory: Path | None,
    registry: Path,
    index_only: Path | None,
    rewrite_reason: str | None,
    linked: Path | None,
    linked_hub: bool,
    require_bytes: bool,
    public_key: Path | None,
) -> None:
    """Check layout, schemas, index cross-references, SHA256SUMS and model.sig; exit 0 only when clean.
    Git LFS pointers are checked by oid and size (pointer mode) unless --require-bytes.

    Also checked: model.sig against SHA256SUMS and the recorded signer (consistency; authorship with --public-key,
    docs/ci.md); pointer mode is said in one line (docs/ci.md); names that are one file on macOS or Windows or read as another (case, NFC/NFD, bidi and zero-width characters);
    Transformers exports re-derived from their sources (no torch needed); .gitattributes sending every weight and
    GGUF file through LFS (a missing rule: the line to add). It names what it does not check (git's files,
    .pre-commit-config.yaml; not_covered under --json). In a dataset registry: its versions, rows and card; --linked
    DIR / --linked-hub: the data sha256s both ways between a model and a dataset registry (docs/formats.md).

    --allow-rewrite accepts changed bytes only after add's checks pass on them (refused: a file that no longer fits
    its base, two entries with one sha256, a changed safetensors twin, a changed source whose twin is still on
    disk); it drops the changed weight's old results and its deleted stale twins, and says so.
    """
    from ..ops.vouched import not_covered, validate_report

    root, out = registry_dir(directory, registry), output()
    if rewrite_reason:
        from ..ops.validate import allow_rewrite

        adopted = allow_rewrite(root, rewrite_reason)
        for rewrite in adopted.rewrites:
            say(f"recorded rewrite of {rewrite.path}: {rewrite.reason}")
        for note in adopted.notes:
            say(note)
    if index_only:
        from ..ops.validate import validate_index_file

        out.check(validate_index_file(index_only), f"{index_only} is valid")
        return
    with out.bar("hashing") as bar:
        report = validate_report(
            root,
            progress=bar.advance,
            linked=linked,
            linked_hub=linked_hub,
            hub_progress=out.progress,
            require_bytes=require_bytes,
            public_key=public_key,
        )
    beside = not_covered(root)
    _say_notes(report.notes() + ([f"not checked and never published: {', '.join(beside)}"] if beside else []))
    out.check(report.problems, "registry is valid", {"not_covered": beside, **report.as_dict()})


def _say_notes(lines: list[str]) -> None:
    """What a check did not do, or did in a lighter way, on stderr before its result."""
    say = output().say
    if say is not None:
        for line in lines:
            say(line)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), required=False)
@click.option(
    "-C",
    "--registry",
    "registry",
    type=click.Path(file_okay=False, path_type=Path),
    default="rwkv-registry-demo",
    show_default=True,
    envvar="RWKV_REGISTRY",
    help="The directory the demo fills: registry/ (seed-001-shaped), finetune-registry/ (seed-000-shaped) and their inputs (env RWKV_REGISTRY).",
)
@json_option
def demo(directory: Path | None, registry: Path) -> None:
    """Run the whole pipeline on tiny built-in RWKV-7 artifacts in DIR: three registries, built from the seed cards.

    DIR/registry is shaped like seed 001 (State + MiSS, a Chinese card), DIR/finetune-registry like seed 000 (a full
    fine-tune, an English card), DIR/dataset-registry like seed 002 (the data the first was trained on, linked to it
    both ways). --json names them (registries) with the steps.
    """
    from ..ops.demo import run_demo

    out = output()
    result = run_demo(registry_dir(directory, registry), say=out.say)
    out.result(result, (f"{name}-shaped registry: {path}" for name, path in result["registries"].items()))
