"""What an export must pass with Transformers and fla before it is committed (the ``hf`` extra).

* fla's ``RWKV7ForCausalLM``, built from the exported config.json (on the meta device: no memory,
  no kernels), has exactly the exported tensors, names and shapes, no missing and no unexpected;
* ``GenerationConfig`` accepts generation_config.json;
* ``AutoTokenizer`` loads the tokenizer files and gives the ``rwkv`` package's ids on
  :data:`SAMPLES` (the seeds' prompts), and decodes them back to the text;
* a MiSS adapter's PEFT folder: PEFT reads its config as the default MiSS, and its tensors are
  exactly the ``miss_block`` s of that config on the base export's Linears;
* a State's folder: safetensors loads it, and its tensors are the base export's recurrent states,
  each equal to the State's ``time_state`` transposed.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from ..artifacts.dtypes import bit_equal
from ..artifacts.safetensors_header import read_safetensors_header
from ..core.errors import RegistryError
from ..core.names import ADAPTER_CONFIG_NAME, ADAPTER_WEIGHTS_NAME, STATE_WEIGHTS_NAME, TOKENIZER_NAME
from ..core.schemas import read_json
from ..gate.prompts import PROMPTS
from . import peft
from . import state as fla_state
from .tokenizer import trie_tokenizer

SAMPLES: dict[str, str] = {
    **PROMPTS,  # seed 000's prompts (Chinese, System/User/Assistant)
    "seed000-user-assistant": "User: 候选角色：甲、乙\n上下文：……\n\nAssistant:",
    "english-chat": "User: Write a haiku about rain.\n\nAssistant: Soft rain on the roof,\n  a  double  space\tand a "
    "tab.\n\nUser:",
    "emoji-and-newlines": "🌧️☔ 雨停了。\n\n\n\r\n😀👍🏽 done\n",
    "code": 'def f(x):\n    return {"boundaries": [x, 2, 3]}  # 注释\n',
}
VERIFY_FIX = "report this bug with `REGISTRY_DEBUG=1`; nothing was changed"
# fla warns when imported without a GPU and when it builds an RWKV-7 layer; an export runs none of
# its kernels, so neither concerns the user of `registry export-hf`.
FLA_NOTICES = ("Triton is not supported on current platform", "According to Bo, you are using")


@contextmanager
def fla_notices_hidden() -> Iterator[None]:
    with warnings.catch_warnings():
        for notice in FLA_NOTICES:
            warnings.filterwarnings("ignore", message=re.escape(notice), category=UserWarning)
        yield


def require_hf() -> None:
    """Import what the export's checks need first, so a missing extra is said before any work."""
    with fla_notices_hidden():
        import fla  # noqa: F401, PLC0415 optional dependency: fla
    import peft  # noqa: F401, PLC0415 optional dependency: peft
    import tokenizers  # noqa: F401, PLC0415 optional dependency: tokenizers
    import transformers  # noqa: F401, PLC0415 optional dependency: transformers


def check_tokenizer(folder: Path) -> None:
    """AutoTokenizer on ``folder`` encodes :data:`SAMPLES` exactly as the rwkv TRIE tokenizer."""
    from transformers import AutoTokenizer  # noqa: PLC0415 optional dependency: transformers

    loaded = AutoTokenizer.from_pretrained(folder)
    reference = trie_tokenizer()
    for name, text in SAMPLES.items():
        got = list(loaded.encode(text, add_special_tokens=False))
        if got != reference.encode(text):
            raise RegistryError(
                "export.verify-failed",
                folder / TOKENIZER_NAME,
                f"AutoTokenizer's ids for the sample {name!r} differ from the rwkv tokenizer's",
                VERIFY_FIX,
            )
        if loaded.decode(got) != text:
            raise RegistryError(
                "export.verify-failed",
                folder / TOKENIZER_NAME,
                f"AutoTokenizer does not decode the sample {name!r} back to its text",
                VERIFY_FIX,
            )


def _layer_pattern(names: Mapping[str, tuple[int, ...]], n_layer: int) -> dict[str, tuple[int, ...]]:
    """A 2-layer model's tensors extended to ``n_layer`` layers (layer 1's repeated): building fla's
    model runs a Python loop per channel and layer, 30 s at 7.2B, against 2 s for two layers."""
    out: dict[str, tuple[int, ...]] = {}
    for name, shape in names.items():
        match = re.fullmatch(r"model\.layers\.1\.(.+)", name)
        if match:
            out.update({f"model.layers.{i}.{match.group(1)}": shape for i in range(1, n_layer)})
        elif not name.startswith("model.layers.") or name.startswith("model.layers.0."):
            out[name] = shape
    return out


def check_model(folder: Path, exported: Mapping[str, tuple[int, ...]]) -> None:
    """fla's model for ``folder``'s config.json has exactly the ``exported`` tensors and shapes."""
    with fla_notices_hidden():
        import fla  # noqa: F401, PLC0415 optional dependency: fla (registers model_type rwkv7 with the Auto classes)
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig  # noqa: PLC0415 optional dependency: transformers

    config = AutoConfig.from_pretrained(folder)
    GenerationConfig.from_pretrained(folder)
    n_layer = int(config.num_hidden_layers)
    probe = AutoConfig.from_pretrained(folder, num_hidden_layers=2)  # every export has 2 or more (hf.mapping)
    with torch.device("meta"), fla_notices_hidden():
        model = AutoModelForCausalLM.from_config(probe)
    want = _layer_pattern({name: tuple(t.shape) for name, t in model.state_dict().items()}, n_layer)
    missing, unexpected = sorted(set(want) - set(exported)), sorted(set(exported) - set(want))
    if missing or unexpected:
        what = (
            f"fla's model expects {missing[0]}, which the export lacks"
            if missing
            else f"fla's model has no {unexpected[0]}"
        )
        raise RegistryError(
            "export.verify-failed", folder, f"{what} ({len(missing)} missing, {len(unexpected)} unexpected)", VERIFY_FIX
        )
    for name, shape in want.items():
        if tuple(exported[name]) != shape:
            raise RegistryError(
                "export.verify-failed",
                folder,
                f"{name} is {tuple(exported[name])} but fla's model needs {shape}",
                VERIFY_FIX,
            )


def check_peft(folder: Path, base_config: Mapping[str, Any]) -> None:
    """PEFT reads ``folder``'s adapter_config.json as the default MiSS, and adapter_model.safetensors
    holds exactly its ``miss_block`` tensors, float32 ``[r, out]`` for the base export's Linears."""
    from peft import MissConfig, PeftConfig  # noqa: PLC0415 optional dependency: peft

    config_path, weights_path = folder / ADAPTER_CONFIG_NAME, folder / ADAPTER_WEIGHTS_NAME
    parsed = PeftConfig.from_pretrained(str(folder))
    if not isinstance(parsed, MissConfig) or parsed.init_weights is not True:
        raise RegistryError(
            "export.verify-failed",
            config_path,
            f"PEFT reads it as {type(parsed).__name__}, not the default MiSS",
            VERIFY_FIX,
        )
    header = read_safetensors_header(weights_path)
    found = {name: (tuple(t.shape), t.dtype) for name, t in header.tensors.items()}
    problem = peft.misfit(read_json(config_path), base_config, found)
    if problem:
        raise RegistryError("export.verify-failed", folder, problem, VERIFY_FIX)


def check_state(folder: Path, base_config: Mapping[str, Any], time_state: Mapping[str, torch.Tensor]) -> None:
    """safetensors loads ``initial_state.safetensors``; it holds exactly the recurrent states of the
    base export's layers, each bit-equal to the State's ``time_state`` transposed."""
    from safetensors.torch import load_file  # noqa: PLC0415 optional dependency: safetensors

    path = folder / STATE_WEIGHTS_NAME
    header = read_safetensors_header(path)
    problem = fla_state.misfit(base_config, {name: (tuple(t.shape), t.dtype) for name, t in header.tensors.items()})
    if problem:
        raise RegistryError("export.verify-failed", path, problem, VERIFY_FIX)
    loaded = load_file(path)
    for i in range(len(loaded)):
        if not bit_equal(
            loaded[fla_state.tensor_name(i)].transpose(-1, -2), time_state[fla_state.source_name(i)].float()
        ):
            raise RegistryError(
                "export.verify-failed",
                path,
                f"layer {i}'s recurrent state is not the State's time_state transposed",
                VERIFY_FIX,
            )
