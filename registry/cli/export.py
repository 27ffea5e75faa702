"""registry export-hf: a folder Transformers loads, from a base or a full entry; a MiSS adapter's PEFT folder; a State's initial state."""

from __future__ import annotations

from pathlib import Path

import click

from .app import REGISTRY_OPT, main, usage_error
from .output import json_option, output


@main.command("export-hf")
@click.argument("entry", required=False)
@REGISTRY_OPT
@click.option("--base", "base_name", help="Export this base (by name) instead of an entry; needs --base-file.")
@click.option(
    "--base-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The base's .pth (checked against its recorded sha256).",
)
@click.option(
    "--shard-size",
    default="5GB",
    show_default=True,
    help="Split the weights into model-0000i-of-0000N.safetensors shards of at most this size.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing export folder whose content differs; files of the earlier export that the new one does not write are removed.",
)
@json_option
def export_hf_cmd(
    entry: str | None, registry: Path, base_name: str | None, base_file: Path | None, shard_size: str, force: bool
) -> None:
    """Export a full entry (ENTRY, its .pth) or a base (--base NAME --base-file BASE.pth) as a folder
    that `AutoModelForCausalLM.from_pretrained` loads with flash-linear-attention's RWKV-7; a
    MiSS adapter (ENTRY, its .pth) as a PEFT adapter that loads onto its base's export; or a State
    (ENTRY, its .pth) as the initial recurrent state that the base's export generates from.

    The folder (`<base>/hf/`, or `hf/` beside the full entry) gets fla-named safetensors shards
    (written by the convert pipeline, compared with the source as they land), config.json from
    the checkpoint's shapes, generation_config.json from the weight's stop rules (greedy), and
    tokenizer files for rwkv_vocab_v20230424.  It is listed in index.json and SHA256SUMS, checked
    by validate and uploaded by publish.  A MiSS adapter's folder (`hf/` beside it) gets
    adapter_config.json and adapter_model.safetensors (PEFT's MiSS, `PeftModel.from_pretrained`);
    a State's folder (`hf/<state-stem>/` beside it) gets initial_state.safetensors (fla's Cache,
    `generate(past_key_values=…)`; the card shows how).  Export the base before an adapter or a
    State.  Needs the hf extra: pip install 'rwkv-registry[hf]'.

    fla's Triton kernels need a CUDA GPU to run the folder; on a CPU, use the GGUF files or the rwkv package (the
    card and the command's output say so). The stop text goes to generate(stop_strings=..., tokenizer=...), so a
    plain generate() runs. The folder is checked with fla and AutoTokenizer before it is committed, and listed in
    index.json (exports); a MiSS adapter merges bit-exactly as the rwkv runtime merges it (docs/formats.md).
    """
    if (entry is None) == (base_name is None):
        raise usage_error(
            "--base" if base_name is not None else "ENTRY",
            "give either ENTRY or --base, not both and not neither",
            "pass ENTRY (a full entry's, a MiSS adapter's or a State's .pth), or --base NAME with --base-file BASE.pth",
        )
    if base_file is not None and base_name is None:
        raise usage_error(
            "--base-file",
            "--base-file goes with --base NAME",
            "add --base NAME, or drop --base-file when exporting ENTRY",
        )
    from ..convert.shards import parse_size
    from ..ops.export_hf import ExportRequest, export_hf

    request = ExportRequest(
        entry=entry, base=base_name, base_file=base_file, shard_size=parse_size(shard_size), force=force
    )
    out = output()
    total = base_file.stat().st_size if base_file is not None and base_file.is_file() else None
    with out.bar(f"exporting {entry or base_name}", total=total) as bar:
        export = export_hf(registry, request, progress=bar.advance)
    runs = "Transformers with flash-linear-attention (`import fla`) on a CUDA GPU; on a CPU, the GGUF files (`registry export-gguf`) or the rwkv package"
    out.result(
        {**export.model_dump(mode="json"), "runs": runs},
        [f"{export.source} -> {export.path}/ ({len(export.files)} files)", f"runs with {runs}"],
    )


@main.command("export-gguf")
@click.argument("entry", required=False)
@REGISTRY_OPT
@click.option("--base", "base_name", help="Export this base (by name) instead of an entry; needs --base-file.")
@click.option(
    "--base-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The base's .pth (checked against its recorded sha256); a MiSS adapter is merged into it.",
)
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice(["f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m"]),
    help="A GGUF type to make (repeatable; q8_0 when none is given).",
)
@click.option("--force", is_flag=True, help="Replace an existing GGUF file of the same name whose content differs.")
@click.option(
    "--sign-key",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="KEY.pem",
    help="Also sign each file's gate receipt with this EC private key, so a publish elsewhere trusts it (publish --trust-gate-key KEY.pub; docs/ci.md).",
)
@json_option
def export_gguf_cmd(
    entry: str | None,
    registry: Path,
    base_name: str | None,
    base_file: Path | None,
    types: tuple[str, ...],
    force: bool,
    sign_key: Path | None,
) -> None:
    """GGUF files for llama.cpp and Ollama of a base (--base NAME --base-file BASE.pth), a full
    entry (ENTRY, its .pth), or a MiSS adapter (ENTRY) merged into its base (--base-file BASE.pth).

    Written tensor by tensor as llama.cpp's converter maps RWKV-7 (f16, bf16, q8_0 with the gguf
    package; q6_k, q5_k_m, q4_k_m by llama.cpp's quantizer), each file is run by llama.cpp on the
    gate's prompts and compared with our fp32 reference (NMSE, top-1 agreement) before it is
    registered: `gguf/` beside `hf/`, listed in index.json (`ggufs`, with its lineage) and
    SHA256SUMS, its receipt in .registry/gates/.  A State is refused (it is not a model).  Needs
    the gguf extra: pip install 'rwkv-registry[gguf]'.

    Beside each GGUF file an Ollama <stem>-<TYPE>.Modelfile (FROM, the RWKV chat TEMPLATE, stop at the next User:
    turn, greedy decoding) for `ollama create NAME -f ...`. --sign-key signs the receipts as smoke's
    (docs/formats.md).
    """
    if (entry is None) == (base_name is None):
        raise click.UsageError(
            "give either ENTRY (a full entry's or a MiSS adapter's .pth) or --base NAME with --base-file"
        )
    if base_file is not None and base_name is None and entry is None:
        raise click.UsageError("--base-file goes with --base NAME or a MiSS ENTRY")
    from ..ops.export_gguf import DEFAULT_TYPES, GgufRequest, export_gguf

    request = GgufRequest(
        entry=entry, base=base_name, base_file=base_file, types=types or DEFAULT_TYPES, force=force, sign_key=sign_key
    )
    out = output()
    total = base_file.stat().st_size * len(request.types) if base_file is not None and base_file.is_file() else None
    with out.bar(f"exporting {entry or base_name} to GGUF", total=total) as bar:
        made = export_gguf(registry, request, progress=bar.advance)
    text = (
        f"{g.source} -> {g.path} ({g.type}, {g.size} bytes, gate {'passed' if g.gate and g.gate.passed else 'not run'})"
        for g in made
    )
    out.result({"ggufs": [g.model_dump(mode="json") for g in made]}, text)
