"""What ``validate`` checks of the GGUF files in index.json (headers only, through the strict
plain-Python reader of :mod:`.reader`, so the light install checks them: no torch, no ``gguf``).

Each record must name a source that is still in the registry with the sha256 it was made from
(a base, a full entry, or a MiSS adapter on that base), sit at its canonical place, and be on disk
with its sha256 and size; its header must parse (magic, version, every count, length and
offset within the file), its data must reach the end of the file (a truncated download is refused), and what the
header says must be true: architecture rwkv7, the base's recorded shape (layers, width, FFN,
head size, vocabulary), exactly llama.cpp's tensors for those numbers, and the registry's lineage
keys equal to the record.  Beside each, its Ollama Modelfile (:mod:`.modelfile`), byte for byte.
Files under a gguf folder that no record lists are findings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..artifacts.rwkv7 import has_value_residual, recorded_differences
from ..artifacts.shapes import shape_findings
from ..core.errors import Problem
from ..core.hashing.digest import sha256_hex
from ..core.layout import gguf_folder, gguf_path
from ..core.models import GgufFile, Index
from . import mapping
from .modelfile import modelfiles
from .reader import GgufFormatError, read_header

UNLISTED_FIX = "move it out of the gguf folder (export-gguf writes the files there and lists each GGUF in index.json; it refuses to overwrite one no record lists), then run `registry sums`"
MODELFILE_FIX = "run `registry card` (it writes the Modelfile again)"
# the header's shape fields and the base's recorded Architecture fields they must equal
RECORDED_FIELDS = {
    "block_count": "n_layer",
    "embedding_length": "n_embd",
    "head_size": "head_size",
    "feed_forward_length": "dim_ffn",
}
FIX = "make it again with `registry export-gguf --force` (or remove the file and its record in ggufs)"


def expected_shapes(meta: dict[str, Any], n_vocab: int) -> dict[str, tuple[int, ...]]:
    """Every tensor llama.cpp's rwkv7 loader creates for this metadata, with its (numpy-order) shape."""
    c, f, n_layer = meta["embedding_length"], meta["feed_forward_length"], meta["block_count"]
    rank = {
        "w": meta["decay_lora_rank"],
        "a": meta["iclr_lora_rank"],
        "v": meta["value_residual_mix_lora_rank"],
        "g": meta["gate_lora_rank"],
    }
    shapes: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (n_vocab, c),
        "token_embd_norm.weight": (c,),
        "token_embd_norm.bias": (c,),
    }
    for i in range(n_layer):
        for leaf in ("attn_norm", "attn_norm_2", "time_mix_ln"):
            shapes[f"blk.{i}.{leaf}.weight"] = shapes[f"blk.{i}.{leaf}.bias"] = (c,)
        for x in "wavg":
            r = rank["a"] if (x == "v" and not has_value_residual(i)) else rank[x]  # layer 0's v LoRA: a's shape
            shapes[f"blk.{i}.time_mix_{x}1.weight"] = (r, c)
            shapes[f"blk.{i}.time_mix_{x}2.weight"] = (c, r)
            if x != "g":
                shapes[f"blk.{i}.time_mix_{x}0.weight"] = (c,)
        for leaf in ("k_k", "k_a", "r_k"):
            shapes[f"blk.{i}.time_mix_{leaf}.weight"] = (c,)
        for leaf in ("key", "value", "receptance", "output"):
            shapes[f"blk.{i}.time_mix_{leaf}.weight"] = (c, c)
        shapes[f"blk.{i}.time_mix_lerp_fused.weight"] = (len(mapping.LERP_ORDER), 1, 1, c)
        shapes[f"blk.{i}.channel_mix_lerp_k.weight"] = (c,)
        shapes[f"blk.{i}.channel_mix_key.weight"] = (f, c)
        shapes[f"blk.{i}.channel_mix_value.weight"] = (c, f)
    shapes.update({"output_norm.weight": (c,), "output_norm.bias": (c,), "output.weight": (n_vocab, c)})
    return shapes


def header_problems(path: Path, record: GgufFile, index: Index) -> Iterator[str]:
    """What is wrong with the file's header and size, judged against the record and its base."""
    try:
        header = read_header(path)
    except GgufFormatError as exc:
        yield (
            str(exc) if str(exc).startswith(("is ", "has ", "says ", "names ")) else f"its header cannot be read: {exc}"
        )
        return
    except OSError as exc:
        yield f"cannot be read ({exc.strerror or exc})"
        return
    fields = header.fields
    if header.size - header.data_end >= header.alignment:
        yield f"has {header.size - header.data_end} bytes after its last tensor"
    arch = fields.get("general.architecture")
    if arch != mapping.ARCH:
        yield f"says architecture {arch!r}, not {mapping.ARCH!r}"
        return
    keys = (
        "embedding_length",
        "block_count",
        "feed_forward_length",
        "wkv.head_size",
        "attention.decay_lora_rank",
        "attention.iclr_lora_rank",
        "attention.value_residual_mix_lora_rank",
        "attention.gate_lora_rank",
    )
    meta = {
        key.rsplit(".", 1)[-1] if key.startswith("attention.") else key: fields.get(f"{mapping.ARCH}.{key}")
        for key in keys
    }
    meta["head_size"] = meta.pop("wkv.head_size")
    if any(value is None for value in meta.values()):
        yield f"lacks {next(k for k, v in meta.items() if v is None)} in its metadata"
        return
    not_count = next((k for k, v in meta.items() if type(v) is not int or v <= 0), None)
    if not_count is not None:
        yield f"says {not_count} {meta[not_count]!r}, not a positive whole number"
        return
    counts: dict[str, int] = {
        key: value for key, value in meta.items() if type(value) is int
    }  # every one, checked above
    if counts["block_count"] > len(header.tensors):
        yield f"says block_count {counts['block_count']} but holds only {len(header.tensors)} tensors"
        return
    eps = fields.get(f"{mapping.ARCH}.attention.layer_norm_epsilon")
    if type(eps) is not float or abs(eps - mapping.NORM_EPS) > 1e-9:
        yield f"says layer_norm_epsilon {eps}, and RWKV-7's layer norms use {mapping.NORM_EPS}"
    tokens = fields.get("tokenizer.ggml.tokens")
    n_vocab = len(tokens) if isinstance(tokens, list) else 0
    base = index.base_by_sha(record.base_sha256)
    arch_facts = base.architecture if base else None
    if arch_facts is not None:
        for key, said, value in recorded_differences(arch_facts, counts, RECORDED_FIELDS):
            yield f"says {key} {said} but the base records {value}"
        if n_vocab != arch_facts.vocab_size:
            yield f"has {n_vocab} tokens but the base's vocabulary is {arch_facts.vocab_size}"
    want = expected_shapes(counts, n_vocab)
    found = {t.name: t.shape for t in header.tensors}
    yield from shape_findings(
        want, found, missing="lacks {name} ({count} of llama.cpp's rwkv7 tensors for its metadata)",
        unexpected="holds {name}, which llama.cpp's rwkv7 has no place for", wrong="{name} is {found} but its metadata makes it {want}",
    )  # fmt: skip
    lineage = mapping.lineage_metadata(record.source_sha256, record.base_sha256, record.type, record.merged)
    for key, text in lineage.items():
        if fields.get(key) != text:
            yield f"says {key} {fields.get(key)!r} but index.json records {text!r}"


def _lineage_problems(index: Index, record: GgufFile) -> Iterator[str]:
    found = index.derived_from(record.base_sha256, record.source)
    if isinstance(found, str):
        yield found
        return
    base, entry = found
    if entry is not None and (entry.method == "state" or entry.format != "pth" or entry.base_sha256 != base.sha256):
        yield f"its source {record.source} is not a .pth base, full entry or MiSS adapter on base {base.name}"
        return
    if record.merged != (entry is not None and entry.method == "miss"):
        yield (
            "says merged, but its source is not a MiSS adapter"
            if record.merged
            else "is not marked merged, but its source is a MiSS adapter"
        )
    sha = entry.sha256 if entry else base.sha256
    if record.source_sha256 != sha:
        yield f"was made from sha256 {record.source_sha256[:12]}… but {record.source} is {sha[:12]}… now"
    want = gguf_path(base.name, entry.path if entry else None, record.type, entry.data.version if entry else None)
    if record.path != want:
        yield f"{record.source}'s {record.type} GGUF belongs at {want}"


def gguf_problems(root: Path, index: Index, files: list[str], digests: dict[str, str]) -> Iterator[Problem]:
    """Findings for every GGUF record in ``index`` and every file in a gguf folder (``files``: the
    tree, ``digests``: their sha256)."""
    expected = modelfiles([g.path for g in index.ggufs])
    listed = {g.path for g in index.ggufs} | set(expected)
    for rel in sorted(set(files) - listed):
        if gguf_folder(rel) is not None:
            yield Problem(
                "gguf.unlisted-file", rel, "is in a gguf folder but no GGUF record in index.json lists it", UNLISTED_FIX
            )
    for record in index.ggufs:
        problems = list(_lineage_problems(index, record))
        if record.path not in digests:
            problems.append("is not on disk")
        elif digests[record.path] != record.sha256:
            problems.append(f"is sha256 {digests[record.path][:12]}…, not the recorded {record.sha256[:12]}…")
        elif (root / record.path).stat().st_size != record.size:
            problems.append(f"is {(root / record.path).stat().st_size} bytes, not the recorded {record.size}")
        if record.path in digests:
            problems += list(header_problems(root / record.path, record, index))
        yield from (Problem("gguf.invalid", record.path, message, FIX) for message in problems)
    for rel, text in expected.items():
        if rel not in digests:
            yield Problem(
                "gguf.modelfile", rel, "is missing: the Ollama Modelfile of the GGUF file beside it", MODELFILE_FIX
            )
        elif digests[rel] != sha256_hex(text.encode("utf-8")):
            yield Problem(
                "gguf.modelfile",
                rel,
                "is not the Ollama Modelfile the registry writes for the GGUF file beside it",
                MODELFILE_FIX,
            )
