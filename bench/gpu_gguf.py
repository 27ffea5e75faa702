"""``registry export-gguf`` of a base of the 7.2B width to q8_0 and q4_k_m, with the gate's figures
(issue #32, "on the GPU (the device)").  The device command, one line from the repo root, with
``.whl/`` holding the wheels docs/gpu-gate.md lists and llama-cpp-python's sdist (0.3.36, trimmed of
its ``.git``, docs and test vocabularies to fit the carry limit), built on the device for CPU:

    set -o pipefail; mkdir -p $OUT; ( python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && S=$SECONDS && CMAKE_BUILD_PARALLEL_LEVEL=16 CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site .whl/llama_cpp_python-0.3.36.tar.gz && echo "llama-cpp-python build $((SECONDS-S)) s" && PYTHONPATH=/tmp/site:$PWD timeout $((575-SECONDS)) python3 bench/gpu_gguf.py --out $OUT ) 2>&1 | tee $OUT/log

The base (random bf16, real key names, n_embd 4096, vocab 65536; ``--layers`` of the 7.2B model's
32, 4 by default so that the one 10-minute device call holds the llama.cpp build and both types:
the export casts every value through float32 in numpy, single-threaded, docs/benchmarks.md) is
drawn on the GPU where there is one (bench/gpu_gate.py's builder), registered with ``add-base``,
then each ``--type`` is exported by ``python -m registry export-gguf --base NAME --base-file BASE
--type T --json`` in a fresh process: written, run by llama.cpp (CPU, as the gate always runs it)
against our fp32 reference (CPU), registered.  One JSON line per step on stdout and in
OUT/gguf.jsonl: the process's wall seconds, its peak RSS (VmHWM, sampled every 0.1 s), the GGUF's
size and the gate's NMSE and top-1 agreement (index.json's ``ggufs`` record; for a k-quant also
its lossless source's, from the receipt).  ``--tiny`` runs a small shape on CPU (a smoke try).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from gpu_gate import SHAPES, build_base

from registry.ops.add_base import BaseRequest, add_base
from registry.ops.init import init_registry
from registry.synthetic import TinySpec, checkpoint_shapes

TINY = TinySpec(n_layer=2, n_embd=256, vocab_size=65536, seed=3)


def _hwm(status: Path) -> int:
    try:
        return next(int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith("VmHWM")) * 1024
    except (OSError, StopIteration, ValueError):
        return 0  # exiting


def peak_rss_of(command: list[str]) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run ``command``; its result, wall seconds and peak RSS (the child's own VmHWM, sampled every
    0.1 s: ``ru_maxrss`` of a child starts at its parent's)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _hwm(Path(f"/proc/{proc.pid}/status")))
            time.sleep(0.1)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(command, proc.returncode, out.read(), err.read()), wall, peak


class Run:
    def __init__(self, out: Path):
        self.out = out

    def emit(self, **row) -> None:
        line = json.dumps(row)
        print(line, flush=True)
        with open(self.out / "gguf.jsonl", "a") as log:
            log.write(line + "\n")

    def export(self, root: Path, name: str, base: Path, kind: str) -> None:
        command = [sys.executable, "-m", "registry", "export-gguf", "-C", str(root), "--base", name, "--base-file", str(base), "--type", kind, "--json"]
        proc, wall, peak = peak_rss_of(command)
        (self.out / f"{kind}.stderr.txt").write_text(proc.stderr[-6000:])
        row: dict = {"step": f"export-{kind}", "rc": proc.returncode, "wall_s": round(wall, 1), "peak_rss_GiB": round(peak / 2**30, 2), "source_bytes": base.stat().st_size}
        try:
            document = json.loads(proc.stdout)
        except ValueError:
            self.emit(**row, stderr_tail=proc.stderr[-1500:])
            return
        if proc.returncode != 0:  # a refusal: a failed gate names its figures in the message
            self.emit(**row, refusal=document)
            return
        record = next(g for g in json.loads((root / "index.json").read_text())["ggufs"] if g["type"] == kind)
        receipt = json.loads((root / ".registry" / "gates" / f"{record['sha256']}.json").read_text())
        checks = {c["name"]: c for c in receipt["checks"]}
        row.update(
            gguf=record["path"], gguf_bytes=record["size"], of_source=round(record["size"] / row["source_bytes"], 3),
            nmse=record["nmse"], top1=record["top1_agreement"], bounds=checks["gguf-logits"]["thresholds"],
            per_prompt={k: v for k, v in checks["gguf-logits"]["figures"].items() if "." in k},
            llama_load_s=receipt["timings"]["load_s"], llama_prefill_tokens_per_s=receipt["timings"]["prefill_tokens_per_s"],
            llama_decode_tokens_per_s=receipt["timings"]["decode_tokens_per_s"], gate_s=receipt["timings"]["total_s"],
        )  # fmt: skip
        if "gguf-lossless-logits" in checks:
            lossless = checks["gguf-lossless-logits"]["figures"]
            row.update(lossless_nmse=lossless["nmse"], lossless_top1=lossless["top1_agreement"])
        self.emit(**row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4, help="layers of the 7.2B shape (it has 32; export-gguf needs 2 or more)")
    parser.add_argument("--types", default="q8_0,q4_k_m")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer n_embd-256 base instead (smoke try, CPU)")
    parser.add_argument("--work", type=Path, default=Path("/dev/shm/gguf"))
    parser.add_argument("--out", type=Path, default=Path("gguf-out"))
    args = parser.parse_args()
    spec = TINY if args.tiny else dataclasses.replace(SHAPES["7b"], n_layer=args.layers)
    shape = "tiny" if args.tiny else ("7.2b-shape" if args.layers == 32 else f"7.2b-width-{args.layers}l")
    name = f"rwkv7-random-{shape}-20261206"
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    args.out.mkdir(parents=True, exist_ok=True)
    run = Run(args.out)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    from importlib.metadata import version

    run.emit(
        step="env", device=torch.cuda.get_device_name(0) if device == "cuda" else "cpu", torch=torch.__version__, cpus=os.cpu_count(),
        gguf=version("gguf"), llama_cpp_python=version("llama-cpp-python"),
        spec={"n_layer": spec.n_layer, "n_embd": spec.n_embd, "vocab_size": spec.vocab_size, "params": sum(torch.Size(s).numel() for s in checkpoint_shapes(spec).values())},
    )  # fmt: skip
    start = time.perf_counter()
    base = build_base(args.work / f"{name}.pth", spec, device)
    run.emit(step="build", on=device, seconds=round(time.perf_counter() - start, 1), bytes=base.stat().st_size)
    start = time.perf_counter()
    root = init_registry(args.work / "registry").root
    add_base(root, BaseRequest(path=base, filename=base.name, source=f"random ({shape})", vocab="rwkv_vocab_v20230424.txt"))
    run.emit(step="add-base", seconds=round(time.perf_counter() - start, 1))
    for kind in args.types.split(","):
        run.export(root, name, base, kind)


if __name__ == "__main__":
    main()
