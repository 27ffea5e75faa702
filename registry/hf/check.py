"""What ``validate`` checks of the Transformers exports in index.json (headers and JSON only: no torch).

Each export must name a source that is in the registry (a full entry, a MiSS adapter, a State, or a base)
with the sha256 it was exported from, sit at its canonical place, list exactly the files in its folder, and hold the
model of its source: config.json's shape fields equal to what the base's architecture records, the
safetensors headers holding exactly fla's tensors for that config (names, shapes; one dtype), each
recording the source's sha256; a MiSS adapter's PEFT folder holds the default MiSS config and
exactly its ``miss_block`` tensors for the base export's Linears; a State's folder holds exactly
the base export's float32 recurrent states.  Files under an export folder that no export lists are findings.
An export lists only the files export-hf writes, and its small files are the bytes export-hf writes
for its source (:mod:`registry.hf.expected`): a hand edit that index.json and SHA256SUMS were made to
agree with (remote code in ``auto_map``, a ``.py`` file, another tokenizer or ``eos_token_id``) is a finding.
JSON is read bounded (:func:`registry.core.schemas.read_json`), so a deeply nested file is one finding.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..artifacts.rwkv7 import recorded_differences
from ..artifacts.safetensors_header import SafetensorsHeader, read_safetensors_header
from ..artifacts.shapes import shape_findings
from ..core.errors import Problem, RegistryError
from ..core.layout import export_folder, export_path
from ..core.models import HfExport, Index
from ..core.names import (
    ADAPTER_CONFIG_NAME,
    ADAPTER_WEIGHTS_NAME,
    CONFIG_NAME,
    GENERATION_CONFIG_NAME,
    SHARD_INDEX,
    STATE_WEIGHTS_NAME,
    TOKENIZER_CONFIG_NAME,
    TOKENIZER_NAME,
    VOCAB_NAME,
)
from ..core.schemas import DEFAULT_MAX_JSON_BYTES, read_bounded, read_json
from . import peft
from . import state as fla_state
from .expected import expected_names, small_file_problems, vocab_problem
from .mapping import fla_shapes

FIX = "export it again with `registry export-hf --force` (or remove the folder and its entry in exports)"


def listed_files(index: Index) -> set[str]:
    return {f.path for export in index.exports for f in export.files}


def _place_problems(index: Index, export: HfExport) -> Iterator[str]:
    found = index.derived_from(export.base_sha256, export.source)
    if isinstance(found, str):
        yield found
        return
    base, entry = found
    sha, path = (
        (entry.sha256, export_path(base.name, entry.path, entry.method, entry.data.version))
        if entry
        else (base.sha256, export_path(base.name))
    )
    if entry is not None and entry.base_sha256 != base.sha256:
        yield f"its source {export.source} is not an entry on base {base.name}"
    if export.source_sha256 != sha:
        yield f"was exported from sha256 {export.source_sha256[:12]}… but {export.source} is {sha[:12]}… now"
    if export.path != path:
        yield f"{export.source}'s export belongs at {path}"


# config.json's shape fields and the base's recorded Architecture fields they must equal
RECORDED_FIELDS = {
    "num_hidden_layers": "n_layer",
    "hidden_size": "n_embd",
    "head_dim": "head_size",
    "vocab_size": "vocab_size",
    "intermediate_size": "dim_ffn",
}


def _config_problems(index: Index, export: HfExport, config: dict) -> Iterator[str]:
    base = index.base_by_sha(export.base_sha256)
    arch = base.architecture if base else None
    if arch is None:
        return
    for key, said, want in recorded_differences(arch, config, RECORDED_FIELDS):
        yield f"config.json says {key} {said} but the base records {want}"


def _tensor_problems(root: Path, export: HfExport, config: dict) -> Iterator[str]:
    want = fla_shapes(config)
    found: dict[str, tuple[int, ...]] = {}
    dtypes: set[str] = set()
    for ref in export.files:
        if not ref.path.endswith(".safetensors"):
            continue
        header = read_safetensors_header(root / ref.path)
        if (header.metadata or {}).get("source_sha256") != export.source_sha256:
            yield f"{ref.path} does not record source_sha256 {export.source_sha256[:12]}…"
        for name, tensor in header.tensors.items():
            found[name] = tensor.shape
            dtypes.add(tensor.dtype)
    yield from shape_findings(
        want, found, missing="its safetensors lack {name} ({count} of fla's tensors for config.json)",
        unexpected="its safetensors hold {name}, which fla's model for config.json has no place for", wrong="{name} is {found} but config.json makes it {want}",
    )  # fmt: skip
    if len(dtypes) > 1:
        yield f"its tensors mix dtypes {sorted(dtypes)}"


def _on_base_export_problems(root: Path, index: Index, export: HfExport, method: str) -> Iterator[str]:
    """A MiSS adapter's PEFT folder or a State's: its base has an export, its weights record the
    source's sha256 and fit that export (:func:`registry.hf.peft.misfit`: the default MiSS on its
    Linears; :func:`registry.hf.state.misfit`: its layers' recurrent states)."""
    base = index.base_by_sha(export.base_sha256)
    base_folder = export_path(base.name) if base else ""
    if not any(e.path == base_folder for e in index.exports):
        yield f"its base has no export at {base_folder}/ to be used with"
        return
    weights = STATE_WEIGHTS_NAME if method == "state" else ADAPTER_WEIGHTS_NAME
    header = read_safetensors_header(root / export.path / weights)
    if (header.metadata or {}).get("source_sha256") != export.source_sha256:
        yield f"{weights} does not record source_sha256 {export.source_sha256[:12]}…"
    base_config = read_json(root / base_folder / CONFIG_NAME, f"{base_folder}/{CONFIG_NAME}")
    found = {name: (tuple(t.shape), t.dtype) for name, t in header.tensors.items()}
    if method == "state":
        problem = fla_state.misfit(base_config, found)
    else:
        problem = peft.misfit(
            read_json(root / export.path / ADAPTER_CONFIG_NAME, f"{export.path}/{ADAPTER_CONFIG_NAME}"),
            base_config,
            found,
        )
    if problem:
        yield problem


def _weight_map_problems(path: Path, display: str, headers: dict[str, SafetensorsHeader]) -> Iterator[str]:
    """The shard index maps each tensor to the one shard whose header holds it."""
    where: dict[str, str] = {}
    for shard, header in sorted(headers.items()):
        for name in header.tensors:
            if name in where:
                yield f"{name} is in both {where[name]} and {shard}"
            where[name] = shard
    parsed = read_json(path, display)
    weight_map = parsed.get("weight_map") if isinstance(parsed, dict) else None
    if weight_map != where:
        wrong = sorted(n for n in set(where) | set(weight_map or {}) if (weight_map or {}).get(n) != where.get(n))
        yield f"{SHARD_INDEX}'s weight_map does not map each tensor to the shard holding it (e.g. {wrong[0] if wrong else 'its form'})"


def _content_problems(root: Path, index: Index, export: HfExport, digests: dict[str, str]) -> Iterator[str]:
    """The export's files hold its source's model, and its small files are the ones its source makes."""
    source = index.entry_by_path(export.source)
    extra = expected_names(export, source)
    if extra:
        yield extra
        return
    base = index.base_by_sha(export.base_sha256)
    base_folder = export_path(base.name) if base else ""
    listed = {ref.path.removeprefix(f"{export.path}/") for ref in export.files}
    if source is not None and source.method in ("miss", "state"):
        yield from _on_base_export_problems(root, index, export, source.method)
        config = (
            read_json(root / export.path / ADAPTER_CONFIG_NAME, f"{export.path}/{ADAPTER_CONFIG_NAME}")
            if source.method == "miss"
            else {}
        )
        dtypes: set[str] = set()
    else:
        config = read_json(root / export.path / CONFIG_NAME, f"{export.path}/{CONFIG_NAME}")
        headers = {
            Path(ref.path).name: read_safetensors_header(root / ref.path)
            for ref in export.files
            if ref.path.endswith(".safetensors")
        }
        dtypes = {t.dtype for header in headers.values() for t in header.tensors.values()}
        if isinstance(config, dict):
            yield from _config_problems(index, export, config)
            yield from _tensor_problems(root, export, config)
        if SHARD_INDEX in listed:
            yield from _weight_map_problems(root / export.path / SHARD_INDEX, f"{export.path}/{SHARD_INDEX}", headers)
    if not isinstance(config, dict):
        yield f"{CONFIG_NAME if source is None or source.method == 'full' else ADAPTER_CONFIG_NAME} is not a JSON object"
        return
    small = [
        n for n in (CONFIG_NAME, GENERATION_CONFIG_NAME, TOKENIZER_CONFIG_NAME, ADAPTER_CONFIG_NAME) if n in listed
    ]
    files = {n: read_bounded(root / export.path / n, DEFAULT_MAX_JSON_BYTES, f"{export.path}/{n}") for n in small}
    tokenizer_sha256 = digests.get(f"{export.path}/{TOKENIZER_NAME}") if TOKENIZER_NAME in listed else None
    yield from small_file_problems(files, tokenizer_sha256, export, source, config, dtypes, base_folder)
    vocab = vocab_problem(digests.get(f"{export.path}/{VOCAB_NAME}") if VOCAB_NAME in listed else None)
    if vocab:
        yield vocab


def export_problems(root: Path, index: Index, files: list[str], digests: dict[str, str]) -> Iterator[Problem]:
    """Findings for every export in ``index`` and every export-folder file (``files``: the tree,
    ``digests``: their sha256)."""
    on_disk = set(files)
    listed = listed_files(index)
    for rel in sorted(on_disk - listed):
        if export_folder(rel) is not None:
            yield Problem(
                "export.unlisted-file",
                rel,
                "is in a Transformers export folder but no export in index.json lists it",
                FIX,
            )
    for export in index.exports:
        problems = list(_place_problems(index, export))
        outside = [f.path for f in export.files if export_folder(f.path) != export.path]
        problems += [f"lists {path}, which is not in its folder" for path in outside[:1]]
        missing = [f.path for f in export.files if f.path not in on_disk]
        problems += [f"lists {path}, which is not on disk" for path in missing[:1]]
        changed = [f.path for f in export.files if f.path in digests and digests[f.path] != f.sha256]
        problems += [f"lists {path} with another sha256 than the file's" for path in changed[:1]]
        if not problems:
            try:
                problems += list(_content_problems(root, index, export, digests))
            except RegistryError as err:
                problems.append(f"{Path(err.file).name}: {err.message}" if err.file else err.message)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                problems.append(f"its files cannot be read ({type(exc).__name__}: {exc})")
        yield from (Problem("export.invalid", export.path, message, FIX) for message in problems)
