"""What an export's small files must be: re-derived from its source, for ``validate`` to compare bytes.

``export-hf`` writes config.json, generation_config.json, tokenizer.json and tokenizer_config.json
(a PEFT folder: adapter_config.json) as functions of the source: its shapes and dtype, the weight's
stop rules, the world vocabulary.  A hand edit that index.json and SHA256SUMS were made to agree
with (an ``auto_map`` that makes Transformers run remote code, a swapped tokenizer, another
``eos_token_id`` or ``norm_eps``) is a difference from those bytes.  An export folder holds only
the files export-hf writes, so a ``.py`` file listed there is refused too.

No torch: the shapes come from config.json's shape fields, which :mod:`registry.hf.check` holds
against the base's recorded architecture and the safetensors headers; the dtype from the headers.
tokenizer.json is compared with the digest of the file this version writes for the world
vocabulary, or, where the ``tokenizers`` library and the vocabulary are installed, re-derived.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from ..core.hashing.digest import sha256_hex
from ..core.models import Entry, HfExport
from ..core.names import (
    ADAPTER_CONFIG_NAME,
    ADAPTER_WEIGHTS_NAME,
    CONFIG_NAME,
    GENERATION_CONFIG_NAME,
    SHARD_INDEX,
    SINGLE_SAFETENSORS,
    STATE_WEIGHTS_NAME,
    TOKENIZER_CONFIG_NAME,
    TOKENIZER_NAME,
    VOCAB_NAME,
)
from . import peft
from .files import config_json, generation_config_json, render
from .mapping import SHAPE_KEYS
from .tokenizer import tokenizer_config_json, world_tokenizer_json

# sha256 of tokenizer.json as export-hf writes it for rwkv_vocab_v20230424 (tokenizers 0.23;
# tests/test_export_hf.py re-derives it, so a library that writes other bytes is noticed).
TOKENIZER_JSON_SHA256 = "f41c9eb77eba241a8ad042218baf6060273d6900c169131267d6f56f319a5862"
# sha256 of rwkv_vocab_v20230424.txt as the rwkv package ships it (export-hf copies it byte for byte)
VOCAB_TXT_SHA256 = "8324476023347dec2964625ccb2075c864d250a9c6d9a74f36daba628de8c008"
SHARDED = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")


def _first_difference(expected: bytes, actual: bytes) -> str:
    """The first top-level key where ``actual`` differs from ``expected``, in words."""
    try:
        want, got = json.loads(expected), json.loads(actual)
    except (ValueError, RecursionError):
        return "is not the JSON export-hf writes"
    if not isinstance(got, dict):
        return "is not a JSON object"
    for key in got:
        if key not in want:
            return f"has {key!r}, which export-hf never writes" + (
                " (auto_map makes Transformers run code from the repo)" if key == "auto_map" else ""
            )
    for key, value in want.items():
        if key not in got:
            return f"lacks {key!r}"
        if got[key] != value:
            return f"says {key} {json.dumps(got[key])[:60]} where export-hf writes {json.dumps(value)[:60]}"
    return "differs from the bytes export-hf writes (layout or order)"


@cache
def _derived_tokenizer_sha256() -> str | None:
    """tokenizer.json's sha256 re-derived here, or None where the libraries it needs are missing."""
    if importlib.util.find_spec("tokenizers") is None or importlib.util.find_spec("rwkv") is None:
        return None

    return sha256_hex(world_tokenizer_json())


def expected_names(export: HfExport, source: Entry | None) -> str | None:
    """Why the export lists a file export-hf does not write for this kind of source, or None."""
    names = [ref.path.removeprefix(f"{export.path}/") for ref in export.files]
    if source is not None and source.method == "miss":
        allowed = {ADAPTER_CONFIG_NAME, ADAPTER_WEIGHTS_NAME}
    elif source is not None and source.method == "state":
        allowed = {STATE_WEIGHTS_NAME}
    else:
        sharded = any(SHARDED.fullmatch(n) for n in names)
        weights = {n for n in names if SHARDED.fullmatch(n)} | {SHARD_INDEX} if sharded else {SINGLE_SAFETENSORS}
        allowed = {CONFIG_NAME, GENERATION_CONFIG_NAME, TOKENIZER_NAME, TOKENIZER_CONFIG_NAME, VOCAB_NAME, *weights}
    extra = sorted(set(names) - allowed)
    if extra:
        code = " (code that trust_remote_code would run)" if extra[0].endswith(".py") else ""
        return f"lists {extra[0]}{code}, which export-hf never writes into this folder"
    return None


def vocab_problem(sha256: str | None) -> str | None:
    """Why the export's copy of the world vocabulary (``sha256``; None: not listed) is not the one
    export-hf ships, or None."""
    if sha256 is None or sha256 == VOCAB_TXT_SHA256:
        return None
    return f"{VOCAB_NAME} is not the rwkv package's world vocabulary export-hf copies (sha256 {sha256[:12]}…)"


def small_file_problems(
    files: Mapping[str, bytes],
    tokenizer_sha256: str | None,
    export: HfExport,
    source: Entry | None,
    config: Mapping[str, Any],
    dtypes: set[str],
    base_folder: str,
) -> Iterator[str]:
    """How an export's small files (``files``: name → bytes on disk; tokenizer.json by its sha256)
    differ from the ones its source makes (``config``: its config.json or adapter_config.json as
    read; ``dtypes``: its tensors' dtypes; ``base_folder``: the base export a PEFT adapter loads onto)."""
    if source is not None and source.method == "state":
        return
    expected: dict[str, bytes] = {}
    if source is not None and source.method == "miss":
        modules = config.get("target_modules")
        expected[ADAPTER_CONFIG_NAME] = render(
            peft.adapter_config(
                config.get("r"),  # type: ignore[arg-type]
                modules if isinstance(modules, list) else [],
                base_folder,
            )
        )
    else:
        shape = {key: config.get(key) for key in SHAPE_KEYS}
        expected[CONFIG_NAME] = render(config_json(shape, next(iter(dtypes)) if len(dtypes) == 1 else "F32"))
        expected[GENERATION_CONFIG_NAME] = render(generation_config_json(source.stop if source else None))
        expected[TOKENIZER_CONFIG_NAME] = tokenizer_config_json()
    for name, want in expected.items():
        got = files.get(name)
        if got is not None and got != want:
            yield f"{name} {_first_difference(want, got)}; the export's small files are a function of its source"
    if tokenizer_sha256 is not None and tokenizer_sha256 not in (TOKENIZER_JSON_SHA256, _derived_tokenizer_sha256()):
        yield (
            f"{TOKENIZER_NAME} is not the tokenizer export-hf writes for {export.vocab} "
            f"(sha256 {tokenizer_sha256[:12]}…)"
        )
