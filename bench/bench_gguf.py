"""``registry export-gguf``: writing throughput vs ``cp`` of the source, peak RSS as a fraction of
the source (and, above what importing the libraries costs, in units of the largest tensor); and the gate's NMSE / top-1
per type on random real-shaped checkpoints (the bounds of
:data:`registry.gguf.gate.BOUNDS` are set from these).

Writing: a synthetic bf16 base (n_embd 1024, vocab 65536, every tensor a view of one storage,
like the official files) is registered, then each type is exported in a fresh process with the
gate off (``GgufRequest.gate=False``: the gate loads the reference model, which is not the
writer's memory), timed from start to exit, with the child's own peak RSS (VmHWM); ``cp`` of the
source (page cache warm, as for the export) is the peer.  The gate figures: ``--gate-seeds``
random checkpoints per shape, each type written and run through llama.cpp against our fp32 runtime.

Run: ``python bench/bench_gguf.py [--gib 0.5] [--types f16,q8_0,q4_k_m] [--gate-seeds 2] [--dir DIR]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from pathlib import Path

import torch
from common import GIB, child_peak_rss, report, run_timed

from registry.artifacts.synthetic import TinySpec, checkpoint_shapes, make_base_checkpoint

SETUP = """
from pathlib import Path
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.init import init_registry
source, root = Path(sys.argv[1]), Path(sys.argv[2])
init_registry(root)
add_base(root, BaseRequest(path=source, filename=source.name, vocab="rwkv_vocab_v20230424.txt"))
"""

EXPORT = """
from pathlib import Path
from registry.ops.export_gguf import GgufRequest, export_gguf
source, root, kind = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
export_gguf(root, GgufRequest(base=source.name[:-4], base_file=source, types=(kind,), force=True, gate=False))
"""

IMPORTS = """
import registry.ops.export_gguf, gguf, llama_cpp
"""

GATE = """
from pathlib import Path
from registry.artifacts.inspect import load_tensor_map
from registry.convert.source import locate_tensors
from registry.gate.prompts import PROMPTS, tokenizer
from registry.gguf import gate, llama, mapping, writer
from registry.hf.tokenizer import world_vocab
from registry.artifacts.synthetic import TinySpec, make_base_checkpoint
import json
out = Path(sys.argv[1]); spec = TinySpec(**json.loads(sys.argv[2])); kinds = sys.argv[3].split(",")
path = make_base_checkpoint(out / "gate.pth", spec, shared=True)
tensors = load_tensor_map(path)
plan = mapping.gguf_plan({n: tuple(t.shape) for n, t in tensors.items()}, path)
source = writer.Source(tensors, locate_tensors(path, tensors).mapped)
tokens = mapping.world_tokens(world_vocab(), plan.config["vocab_size"])
ids = tokenizer().prompt_ids
reference = gate.reference_logits(tensors, ids)
for kind in kinds:
    file = out / f"gate-{kind}.gguf"
    if kind in mapping.DIRECT_TYPES:
        kv = mapping.metadata(plan.config, mapping.DIRECT_TYPES[kind])
        writer.write_gguf(file, plan, source, lambda n, s: mapping.storage_type(n, s, kind), kv, tokens, "bench")
    else:
        lossless = out / "gate-lossless.gguf"
        kv = mapping.metadata(plan.config, mapping.LOSSLESS_FTYPE["BF16"])
        writer.write_gguf(lossless, plan, source, lambda n, s: mapping.storage_type(n, s, "bf16"), kv, tokens, "bench")
        writer.quantize(lossless, file, mapping.QUANTIZER_TYPES[kind])
    figures = gate.checks(kind, llama.logits(file, ids, PROMPTS), reference, ids, spec.n_layer)[0].figures
    print("GATE", json.dumps({"type": kind, "nmse": figures["nmse"], "top1": figures["top1_agreement"]}), flush=True)
"""


def spec_for(gib: float) -> TinySpec:
    """The n_embd-1024 RWKV-7 shape whose bf16 checkpoint is closest to ``gib``."""
    best = None
    for n_layer in range(2, 200):
        spec = TinySpec(n_layer=n_layer, n_embd=1024, vocab_size=65536)
        size = sum(torch.Size(s).numel() for s in checkpoint_shapes(spec).values()) * 2
        if best is None or abs(size - gib * GIB) < abs(best[1] - gib * GIB):
            best = (spec, size)
    return best[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=0.5)
    parser.add_argument("--types", default="f16,q8_0,q4_k_m")
    parser.add_argument("--gate-seeds", type=int, default=2)
    parser.add_argument("--gate-shapes", default='[{"n_layer": 2, "n_embd": 128}, {"n_layer": 4, "n_embd": 256}]')
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-gguf-", dir=args.dir))
    try:
        spec = spec_for(args.gib)
        source = make_base_checkpoint(work / "rwkv7-bench-20260101.pth", spec, shared=True)
        size = source.stat().st_size
        root = work / "reg"
        child_peak_rss(SETUP, str(source), str(root))
        largest = max(torch.Size(s).numel() for s in checkpoint_shapes(spec).values()) * 2
        rows: dict = {
            "source_bytes": size,
            "largest_tensor_bytes": largest,
            "spec": {"n_layer": spec.n_layer, "n_embd": spec.n_embd},
        }
        rows["imports_peak_rss_MiB"] = round(child_peak_rss(IMPORTS)[1] / 2**20)
        cp_times = []
        for _ in range(args.rounds):
            source.read_bytes()  # warm, as for the exports
            cp_times.append(run_timed(["cp", str(source), str(work / "copy.pth")]))
            (work / "copy.pth").unlink()
        rows["cp_s"] = statistics.median(cp_times)
        for kind in args.types.split(","):
            times, peaks = [], []
            for _ in range(args.rounds):
                source.read_bytes()
                seconds, peak, _ = child_peak_rss(EXPORT, str(source), str(root), kind)
                times.append(seconds)
                peaks.append(peak)
            out = next((root / "rwkv7-bench-20260101" / "gguf").glob(f"*-{kind.upper()}.gguf"))
            median = statistics.median(times)
            rows[kind] = {
                "seconds": [round(t, 2) for t in times],
                "gguf_bytes": out.stat().st_size,
                "throughput_vs_cp": round(rows["cp_s"] / median, 3),
                "source_MB_per_s": round(size / median / 1e6, 1),
                "peak_rss_MiB": round(max(peaks) / 2**20),
                "peak_rss_of_source": round(max(peaks) / size, 3),
                "peak_above_imports_of_largest_tensor": round(
                    (max(peaks) - rows["imports_peak_rss_MiB"] * 2**20) / largest, 2
                ),
            }
        report(f"export-gguf of a {size / GIB:.2f} GiB bf16 base (n_layer {spec.n_layer}, n_embd 1024), vs cp", rows)
        gate_rows = []
        for shape in json.loads(args.gate_shapes):
            for seed in range(args.gate_seeds):
                _, _, stdout = child_peak_rss(
                    GATE, str(work), json.dumps({**shape, "seed": seed}), "f16,bf16,q8_0,q6_k,q5_k_m,q4_k_m"
                )
                gate_rows += [
                    {**shape, "seed": seed, **json.loads(line[5:])}
                    for line in stdout.splitlines()
                    if line.startswith("GATE ")
                ]
        report("gate figures per type (llama.cpp on CPU vs our fp32 reference)", {"rows": gate_rows})
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
