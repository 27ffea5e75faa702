"""The Transformers/PEFT export on the GPU: a 7.2B-shaped base and a MiSS adapter exported, loaded
with fla (and PEFT), compared with the official runtime and ours at the gate's thresholds.

On a CUDA machine (docs/gpu-gate.md: the carried wheels, fla included), from the repo root:
    PYTHONPATH=/tmp/site:$PWD python bench/gpu_export_hf.py --work /dev/shm/export-hf
(``--tiny``: the same on a 2-layer world-vocabulary checkpoint, a quick check of the script.)
It draws a random RWKV-7 checkpoint of the 7.2B shape (32 layers, n_embd 4096, vocab 65536, bf16)
on the GPU, registers it as a base and a random MiSS adapter on it (rank 24, which does not divide
4096, so PEFT's partial last block is used; scale 0.37), exports both with ``export_hf`` (the
convert pipeline, the checks with fla, PEFT and AutoTokenizer), then computes the logits of the
seed prompts (and one prompt of more than 64 tokens, fla's chunked path) after the prompt and
after one more greedy token (state carried), for the base and for the base with the adapter merged:

* ``reference``: our runtime's fp32 torch recurrence (the gate's reference), from the ``.pth``;
* ``official``: the ``rwkv`` package, cuda bf16 (merged: its Linears overwritten with our merge);
* ``ours``: our runtime, bf16, CUDA kernel, from the ``.pth`` (merged the same way);
* ``ours_export``: our runtime from the exported folder read back (must equal ``ours`` bit for bit);
* ``fla``: ``AutoModelForCausalLM.from_pretrained(base export)``, bf16 on cuda, ``past_key_values``
  carried; merged: ``PeftModel.from_pretrained(fla, adapter export).merge_and_unload()``, whose
  merged weights must equal our merge bit for bit.

fla passes, for the base and merged alike, with the gate's bf16 thresholds (registry/gate/checks.py):
max scaled error against the reference at most BF16_RATIO x the official runtime's plus BF16_FLOOR,
top-5 overlap at least TOPK_MIN_OVERLAP.  The adapter must move the reference's logits by more
than that bound, so a PEFT load that dropped the adapter could not pass.  Prints one JSON line per
step and a last line ``{"step": "result", ...}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import time
import warnings
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path

import torch

from registry.artifacts.miss import default_targets, write_adapter
from registry.artifacts.synthetic import (
    TinySpec,
    checkpoint_shapes,
    make_adapter_tensors,
    make_base_state_dict,
    save_checkpoint,
)
from registry.gate.checks import BF16_FLOOR, BF16_RATIO, TOPK_MIN_OVERLAP, Logits, compare_logits, official_logits
from registry.gate.official import load_official
from registry.gate.prompts import PROMPTS
from registry.gate.runtime import Rwkv7, load_tensors, merged_weights, patched
from registry.hf.mapping import rules
from registry.hf.tensors import read_export
from registry.hf.tokenizer import trie_tokenizer
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.export_hf import ExportRequest, export_hf
from registry.ops.init import init_registry

SPECS = {
    "7.2b": TinySpec(n_layer=32, n_embd=4096, vocab_size=65536, seed=73),
    "tiny": TinySpec(n_layer=2, n_embd=128, vocab_size=65536, seed=73),
}
RANK, SCALE = 24, 0.37
DEVICE = "cuda"
VARIANTS = ("base", "miss")


def emit(**row) -> None:
    print(json.dumps(row), flush=True)


class Timer:
    """Emits one line with the seconds a step took (progress on a run of minutes)."""

    def __init__(self, step: str):
        self.step = step

    def __enter__(self) -> dict:
        self.start, self.extra = time.perf_counter(), {}
        return self.extra

    def __exit__(self, error_type, *_exc) -> None:
        if error_type is None:
            emit(step=self.step, seconds=round(time.perf_counter() - self.start, 1), **self.extra)


def prompts() -> dict[str, list[int]]:
    ids = {name: trie_tokenizer().encode(text) for name, text in PROMPTS.items()}
    ids["long-chunked"] = trie_tokenizer().encode("\n\n".join(PROMPTS.values()) * 2)  # > 64 tokens: fla's chunk kernel
    return ids


def free() -> None:
    gc.collect()
    torch.cuda.empty_cache()


def runtime_logits(model: Rwkv7, ids: Mapping[str, list[int]], nxt: Mapping[str, int]) -> Logits:
    prefill, step = {}, {}
    for name, tokens in ids.items():
        logits, state = model.forward(tokens)
        prefill[name] = logits.float().cpu()
        step[name] = model.forward([nxt[name]], state)[0].float().cpu()
    return Logits(prefill, step)


@torch.inference_mode()
def hf_logits(model, ids: Mapping[str, list[int]], nxt: Mapping[str, int]) -> Logits:
    prefill, step = {}, {}
    for name, tokens in ids.items():
        out = model(torch.tensor([tokens], device=DEVICE), use_cache=True)
        prefill[name] = out.logits[0, -1].float().cpu()
        after = model(torch.tensor([[nxt[name]]], device=DEVICE), past_key_values=out.past_key_values, use_cache=True)
        step[name] = after.logits[0, -1].float().cpu()
    return Logits(prefill, step)


def fla_runs(
    base_folder: Path,
    adapter_folder: Path,
    ids,
    first: Mapping[str, Mapping[str, int]],
    merged: Mapping[str, torch.Tensor],
    n_layer: int,
) -> dict:
    """fla's logits for the base, then PEFT's merge of the adapter onto it and its logits."""
    import fla  # noqa: F401, PLC0415 optional dependency: fla
    from peft import PeftModel  # noqa: PLC0415 optional dependency: peft
    from transformers import AutoModelForCausalLM  # noqa: PLC0415 optional dependency: transformers

    found: dict = {}
    with Timer("fla-load") as extra, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_pretrained(base_folder, dtype=torch.bfloat16, device_map=DEVICE).eval()
        extra["dtype"] = str(next(model.parameters()).dtype)
    with Timer("fla-base-logits"):
        found["base"] = hf_logits(model, ids, first["base"])
    with Timer("peft-merge") as extra, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = PeftModel.from_pretrained(model, adapter_folder).merge_and_unload()
        state = model.state_dict()
        target = {rule.source: rule.target for rule in rules(n_layer)}
        equal = [
            name
            for name, want in merged.items()
            if torch.equal(state[target[name]], want.to(state[target[name]].device))
        ]
        found["merged_equal"], found["merged_targets"] = len(equal), len(merged)
        extra.update(equal_to_ours=len(equal), targets=len(merged))
    with Timer("fla-miss-logits"):
        found["miss"] = hf_logits(model, ids, first["miss"])
    del model, state
    free()
    return found


def fla_verdict(fla: Logits, official: Logits, reference: Logits) -> dict:
    fla_vs_ref, official_vs_ref = compare_logits(fla, reference), compare_logits(official, reference)
    bound = BF16_RATIO * official_vs_ref["max_scaled_err"] + BF16_FLOOR
    passed = fla_vs_ref["max_scaled_err"] <= bound and fla_vs_ref["top5_overlap_min"] >= TOPK_MIN_OVERLAP
    return {
        "passed": passed,
        "fla_vs_reference": fla_vs_ref,
        "official_vs_reference": official_vs_ref,
        "fla_vs_official": compare_logits(fla, official),
        "bound": bound,
    }


def train_json(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "trainer": {"name": "rwkv_miss_tune", "version": "bench"},
                "hyperparameters": {"r": RANK},
                "command": "bench/gpu_export_hf.py",
                "data_sha256": "ab" * 32,
            }
        )
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/dev/shm/export-hf"))
    parser.add_argument("--tiny", action="store_true", help="a 2-layer checkpoint instead of the 7.2B shape")
    args = parser.parse_args()
    spec = SPECS["tiny" if args.tiny else "7.2b"]
    name = f"rwkv7-random-{'tiny' if args.tiny else '7.2b-shape'}-20261215"
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    emit(
        step="env",
        gpu=torch.cuda.get_device_name(0),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        shape={"n_layer": spec.n_layer, "n_embd": spec.n_embd, "vocab_size": spec.vocab_size},
    )

    with Timer("make-and-add-base") as extra:
        base = save_checkpoint(args.work / f"{name}.pth", make_base_state_dict(spec, device=DEVICE))
        root = init_registry(args.work / "registry").root
        base_sha = add_base(
            root, BaseRequest(path=base, filename=base.name, source="random (bench)", vocab="rwkv_vocab_v20230424.txt")
        ).base.sha256
        extra["bytes"] = base.stat().st_size
    with Timer("export-hf-base") as extra:
        base_export = export_hf(root, ExportRequest(base=name, base_file=base))
        extra.update(files=len(base_export.files), bytes=sum(f.size for f in base_export.files))
    with Timer("make-add-export-miss") as extra:
        blocks = make_adapter_tensors(spec, RANK, seed=11)
        adapter = args.work / "adapter-final.pth"
        write_adapter(adapter, blocks, RANK, SCALE, default_targets(checkpoint_shapes(spec)), base_sha)
        entry = add_weight(
            root, AddRequest(adapter, name, "miss", "v1", train_json(args.work / "train.json"), run=f"r{RANK}")
        )
        adapter_export = export_hf(root, ExportRequest(entry=entry.path))
        extra.update(targets=len(blocks), files=[f.path for f in adapter_export.files])

    ids = prompts()
    tensors = {k: t.to(DEVICE) for k, t in load_tensors(base).items()}  # the pristine weights
    merged = dict(merged_weights(tensors, blocks, SCALE))
    ours_model = Rwkv7(tensors, dtype=torch.bfloat16, device=DEVICE)
    reference, ours, first = {}, {}, {}
    for variant in VARIANTS:
        with (
            Timer(f"reference-and-ours-{variant}"),
            patched(ours_model.replace_weight, tensors, merged.items()) if variant == "miss" else nullcontext(),
        ):
            fp32 = ours_model.computing_in(torch.float32, "reference")
            first[variant] = {n: int(torch.argmax(fp32.forward(tokens)[0])) for n, tokens in ids.items()}
            reference[variant] = runtime_logits(fp32, ids, first[variant])
            ours[variant] = runtime_logits(ours_model, ids, first[variant])
    del ours_model
    free()
    with Timer("ours-from-export"):
        ours_export = runtime_logits(
            Rwkv7(read_export(root / base_export.path), dtype=torch.bfloat16, device=DEVICE), ids, first["base"]
        )
    free()
    official = {}
    with Timer("official") as extra:
        official_model = load_official(base, DEVICE, tensors)
        extra["load_s"] = round(official_model.load_s, 1)
        official["base"] = official_logits(official_model, ids, None, reference["base"])
        for target, weight in merged.items():
            official_model.replace_weight(target, weight)
        official["miss"] = official_logits(official_model, ids, None, reference["miss"])
    del official_model, tensors
    free()
    fla = fla_runs(root / base_export.path, root / adapter_export.path, ids, first, merged, spec.n_layer)

    same = all(
        torch.equal(ours_export.prefill[n], ours["base"].prefill[n])
        and torch.equal(ours_export.step[n], ours["base"].step[n])
        for n in ids
    )
    verdicts = {variant: fla_verdict(fla[variant], official[variant], reference[variant]) for variant in VARIANTS}
    adapter_effect = compare_logits(reference["miss"], reference["base"])
    passed = (
        same
        and fla["merged_equal"] == fla["merged_targets"]
        and all(v["passed"] for v in verdicts.values())
        and adapter_effect["max_scaled_err"] > verdicts["miss"]["bound"]
    )
    emit(
        step="result",
        passed=passed,
        prompts={n: len(t) for n, t in ids.items()},
        ours_export_equals_ours_pth=same,
        ours_export_vs_ours_pth=compare_logits(ours_export, ours["base"]),
        peft_merge_equals_ours=f"{fla['merged_equal']}/{fla['merged_targets']}",
        adapter_effect_on_reference=adapter_effect,
        **{f"fla_{variant}": verdicts[variant] for variant in VARIANTS},
        **{f"ours_{variant}_vs_reference": compare_logits(ours[variant], reference[variant]) for variant in VARIANTS},
        thresholds={"bf16_ratio": BF16_RATIO, "bf16_floor": BF16_FLOOR, "top5_overlap_min": TOPK_MIN_OVERLAP},
    )


if __name__ == "__main__":
    main()
