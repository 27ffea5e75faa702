"""The Transformers export on the GPU: a 7.2B-shaped checkpoint exported, loaded with fla, compared.

On a CUDA machine (docs/gpu-gate.md: the carried wheels, fla included), from the repo root:
    PYTHONPATH=/tmp/site:$PWD python bench/gpu_export_hf.py --work /dev/shm/export-hf
It draws a random RWKV-7 checkpoint of the 7.2B shape (32 layers, n_embd 4096, vocab 65536, bf16)
on the GPU, registers it as a base, exports it with ``export_hf`` (the convert pipeline, the
checks with fla and AutoTokenizer), then computes the logits of the seed prompts (and one prompt of
more than 64 tokens, fla's chunked path) after the prompt and after one more greedy token (state
carried), with:

* ``reference``: our runtime, fp32, torch recurrence, from the ``.pth``;
* ``official``: the ``rwkv`` package, cuda bf16, from the ``.pth``;
* ``ours_export``: our runtime, bf16, CUDA kernel, from the exported folder read back;
* ``ours_pth``: the same from the ``.pth`` (must equal ``ours_export`` bit for bit);
* ``fla``: ``AutoModelForCausalLM.from_pretrained(folder)``, bf16 on cuda, ``past_key_values`` carried.

fla passes with the gate's bf16 thresholds (registry/gate/checks.py): its max scaled error against
the reference at most BF16_RATIO x the official runtime's plus BF16_FLOOR, and top-5 overlap at
least TOPK_MIN_OVERLAP.  Prints one JSON line per step and a last line ``{"step": "result", ...}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import time
import warnings
from pathlib import Path

import torch

from registry.gate.checks import BF16_FLOOR, BF16_RATIO, TOPK_MIN_OVERLAP, Logits, compare_logits, official_logits
from registry.gate.official import load_official
from registry.gate.prompts import PROMPTS
from registry.gate.runtime import Rwkv7, load_tensors
from registry.hf.tensors import read_export
from registry.hf.tokenizer import trie_tokenizer
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.export_hf import ExportRequest, export_hf
from registry.ops.init import init_registry
from registry.synthetic import TinySpec, make_base_state_dict, save_checkpoint

BIG = TinySpec(n_layer=32, n_embd=4096, vocab_size=65536, seed=73)
NAME = "rwkv7-random-7.2b-shape-20261215"


def emit(**row) -> None:
    print(json.dumps(row), flush=True)


def prompts() -> dict[str, list[int]]:
    ids = {name: trie_tokenizer().encode(text) for name, text in PROMPTS.items()}
    ids["long-chunked"] = trie_tokenizer().encode("\n\n".join(PROMPTS.values()) * 2)  # > 64 tokens: fla's chunk kernel
    return ids


def free() -> None:
    gc.collect()
    torch.cuda.empty_cache()


def runtime_logits(model: Rwkv7, ids: dict[str, list[int]], nxt: dict[str, int]) -> Logits:
    prefill, step = {}, {}
    for name, tokens in ids.items():
        logits, state = model.forward(tokens)
        prefill[name] = logits.float().cpu()
        step[name] = model.forward([nxt[name]], state)[0].float().cpu()
    return Logits(prefill, step)


@torch.inference_mode()
def fla_logits(folder: Path, ids: dict[str, list[int]], nxt: dict[str, int]) -> tuple[Logits, float]:
    import fla  # noqa: F401
    from transformers import AutoModelForCausalLM

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16, device_map="cuda").eval()
    load_s = time.perf_counter() - start
    prefill, step = {}, {}
    for name, tokens in ids.items():
        out = model(torch.tensor([tokens], device="cuda"), use_cache=True)
        prefill[name] = out.logits[0, -1].float().cpu()
        after = model(torch.tensor([[nxt[name]]], device="cuda"), past_key_values=out.past_key_values, use_cache=True)
        step[name] = after.logits[0, -1].float().cpu()
    del model
    return Logits(prefill, step), load_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, default=Path("/dev/shm/export-hf"))
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    emit(step="env", gpu=torch.cuda.get_device_name(0), torch=torch.__version__, cuda=torch.version.cuda)

    start = time.perf_counter()
    base = save_checkpoint(args.work / f"{NAME}.pth", make_base_state_dict(BIG, device="cuda"))
    root = init_registry(args.work / "registry").root
    add_base(root, BaseRequest(path=base, filename=base.name, source="random (7.2B shape)", vocab="rwkv_vocab_v20230424.txt"))
    emit(step="make-and-add-base", seconds=round(time.perf_counter() - start, 1), bytes=base.stat().st_size)

    start = time.perf_counter()
    export = export_hf(root, ExportRequest(base=NAME, base_file=base))
    folder = root / export.path
    emit(step="export-hf", seconds=round(time.perf_counter() - start, 1), files=len(export.files), bytes=sum(f.size for f in export.files))

    ids = prompts()
    tensors = load_tensors(base)
    reference_model = Rwkv7(tensors, dtype=torch.float32, device="cuda", wkv="reference")
    first = {name: int(torch.argmax(reference_model.forward(tokens)[0])) for name, tokens in ids.items()}
    reference = runtime_logits(reference_model, ids, first)
    del reference_model
    free()
    ours_pth = runtime_logits(Rwkv7(tensors, dtype=torch.bfloat16, device="cuda"), ids, first)
    del tensors
    free()
    ours_export = runtime_logits(Rwkv7(read_export(folder), dtype=torch.bfloat16, device="cuda"), ids, first)
    free()
    official_model = load_official(base, "cuda")
    official = official_logits(official_model, ids, None, reference)
    del official_model
    free()
    fla, fla_load_s = fla_logits(folder, ids, first)
    free()

    official_vs_ref = compare_logits(official, reference)
    fla_vs_ref = compare_logits(fla, reference)
    bound = BF16_RATIO * official_vs_ref["max_scaled_err"] + BF16_FLOOR
    same = all(torch.equal(ours_export.prefill[n], ours_pth.prefill[n]) and torch.equal(ours_export.step[n], ours_pth.step[n]) for n in ids)
    passed = same and fla_vs_ref["max_scaled_err"] <= bound and fla_vs_ref["top5_overlap_min"] >= TOPK_MIN_OVERLAP
    emit(
        step="result", passed=passed, prompts={n: len(t) for n, t in ids.items()}, fla_load_s=round(fla_load_s, 1),
        ours_export_equals_ours_pth=same,
        fla_vs_reference=fla_vs_ref, official_vs_reference=official_vs_ref,
        ours_export_vs_reference=compare_logits(ours_export, reference), fla_vs_official=compare_logits(fla, official), fla_vs_ours_export=compare_logits(fla, ours_export),
        thresholds={"fla_vs_reference_max_scaled_err": bound, "fla_vs_reference_top5_overlap_min": TOPK_MIN_OVERLAP},
    )  # fmt: skip


if __name__ == "__main__":
    main()
