"""Core commands: init, sums, validate, demo."""

from __future__ import annotations

from pathlib import Path

import click

from ..progress import byte_progress, say
from .app import DIR_ARG, JSON_OPT, REGISTRY_OPT, emit_json, main, progress_echo, registry_dir, report


@main.command()
@DIR_ARG
@REGISTRY_OPT
@click.option("--title", help="Title shown on the model card.")
@click.option("--license", "license_", help="SPDX license id for the card's front matter (omit when none is chosen).")
@JSON_OPT
def init(directory: Path | None, registry: Path, title: str | None, license_: str | None, as_json: bool) -> None:
    """Create an empty registry in DIR (default: -C, else the current directory)."""
    from ..ops.init import init_registry

    repo = init_registry(registry_dir(directory, registry), title=title, license=license_)
    if as_json:
        emit_json({"ok": True, "registry": str(repo.root)})
    else:
        click.echo(f"initialised registry at {repo.root}")


@main.command()
@DIR_ARG
@REGISTRY_OPT
@click.option("--check", is_flag=True, help="Only verify SHA256SUMS against the files; change nothing.")
@JSON_OPT
def sums(directory: Path | None, registry: Path, check: bool, as_json: bool) -> None:
    """Recompute SHA256SUMS (or --check it) for the registry in DIR."""
    from ..ops.sums import check_sums, write_sums

    root = registry_dir(directory, registry)
    with byte_progress("hashing", enabled=not as_json) as bar:
        if check:
            problems = check_sums(root, progress=bar.advance)
            report(problems, as_json, "SHA256SUMS matches every file")
            return
        digests = write_sums(root, progress=bar.advance)
    if as_json:
        emit_json({"ok": True, "files": len(digests)})
    else:
        click.echo(f"SHA256SUMS written: {len(digests)} files")


@main.command(name="validate")
@DIR_ARG
@REGISTRY_OPT
@JSON_OPT
@click.option("--index-only", type=click.Path(dir_okay=False, path_type=Path), help="Check just this index.json (e.g. the known-bases catalog).")
@click.option("--allow-rewrite", "rewrite_reason", metavar="REASON", help="Accept changes to already-published files and record REASON in index.json.")
@click.option("--linked", type=click.Path(file_okay=False, path_type=Path), help="The other registry of a dataset link: for a model registry the dataset registry its entries cite; for a dataset registry the model registry its card lists.")
@click.option("--linked-hub", is_flag=True, help="Check the links against the Hub: each entry's dataset_repo at its dataset_revision, or the model repo at the revision the dataset card was derived from.")
def validate_cmd(directory: Path | None, registry: Path, as_json: bool, index_only: Path | None, rewrite_reason: str | None, linked: Path | None, linked_hub: bool) -> None:
    """Check layout, schemas, index cross-references and SHA256SUMS; exit 0 only when clean."""
    from ..ops.validate import allow_rewrite, not_covered, validate, validate_index_file

    root = registry_dir(directory, registry)
    if rewrite_reason:
        adopted = allow_rewrite(root, rewrite_reason)
        for rewrite in adopted.rewrites:
            say(f"recorded rewrite of {rewrite.path}: {rewrite.reason}")
        for note in adopted.notes:
            say(note)
    if index_only:
        report(validate_index_file(index_only), as_json, f"{index_only} is valid")
        return
    with byte_progress("hashing", enabled=not as_json) as bar:
        problems = validate(root, progress=bar.advance, **({"linked": linked} if linked else {}), **({"linked_hub": True} if linked_hub else {}))
    beside = not_covered(root)
    if beside and not as_json:
        say(f"not checked and never published: {', '.join(beside)}")
    report(problems, as_json, "registry is valid", {"not_covered": beside})


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), required=False)
@click.option("-C", "--registry", "registry", type=click.Path(file_okay=False, path_type=Path), default="rwkv-registry-demo", show_default=True, envvar="RWKV_REGISTRY", help="The directory the demo fills: registry/ (seed-001-shaped), finetune-registry/ (seed-000-shaped) and their inputs (env RWKV_REGISTRY).")
@JSON_OPT
def demo(directory: Path | None, registry: Path, as_json: bool) -> None:
    """Run the whole pipeline on tiny built-in RWKV-7 artifacts in DIR: two registries, shaped like seed 001 (State + MiSS, zh card) and seed 000 (a full fine-tune, en card)."""
    from ..ops.demo import run_demo

    result = run_demo(registry_dir(directory, registry), echo=progress_echo(as_json))
    if as_json:
        emit_json(result)
    else:
        for name, path in result["registries"].items():
            click.echo(f"{name}-shaped registry: {path}")
