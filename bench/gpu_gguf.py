"""``registry export-gguf`` of a base of the 7.2B width to q8_0 and q4_k_m, with the gate's figures
(issue #32, "on the GPU (the device)").  The device command, one line from the repo root, with
``.whl-deps/`` holding the wheels docs/gpu-gate.md lists and ``.whl-llama/`` the llama-cpp-python
0.3.36 wheel built on the development machine (``pip wheel llama-cpp-python==0.3.36``: llama.cpp
built from the sdist by the device's own toolchain crashes on every model load, docs/gpu-gate.md
run 11; the ``--probe`` step shows it):

    set -o pipefail; mkdir -p $OUT; ( python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site
    .whl-deps/*.whl .whl-llama/*.whl && cd bench && PYTHONPATH=/tmp/site:$OLDPWD timeout 500 python3 gpu_gguf.py
    --layers 32 --out $OUT ) 2>&1 | tee $OUT/log

The base (random bf16, real key names, n_embd 4096, vocab 65536; ``--layers`` of the 7.2B model's
32, 4 by default: the 32-layer run takes about 280 s of one 10-minute device call) is
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
from importlib.metadata import version
from pathlib import Path

import torch
from gpu_gate import SHAPES, build_base

from registry.artifacts.synthetic import TinySpec, checkpoint_shapes
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.export_gguf import GgufRequest, export_gguf
from registry.ops.init import init_registry

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

    def export(self, root: Path, name: str, base: Path, kind: str) -> int:
        command = [
            sys.executable,
            "-m",
            "registry",
            "export-gguf",
            "-C",
            str(root),
            "--base",
            name,
            "--base-file",
            str(base),
            "--type",
            kind,
            "--json",
        ]
        proc, wall, peak = peak_rss_of(command)
        (self.out / f"{kind}.stderr.txt").write_text(proc.stderr[-6000:])
        row: dict = {
            "step": f"export-{kind}",
            "rc": proc.returncode,
            "wall_s": round(wall, 1),
            "peak_rss_GiB": round(peak / 2**30, 2),
            "source_bytes": base.stat().st_size,
        }
        try:
            document = json.loads(proc.stdout)
        except ValueError:
            self.emit(**row, stderr_tail=proc.stderr[-1500:])
            return proc.returncode or 1
        if proc.returncode != 0:  # a refusal: a failed gate names its figures in the message
            self.emit(**row, refusal=document)
            return proc.returncode
        record = next(g for g in json.loads((root / "index.json").read_text())["ggufs"] if g["type"] == kind)
        receipt = json.loads((root / ".registry" / "gates" / f"{record['sha256']}.json").read_text())
        checks = {c["name"]: c for c in receipt["checks"]}
        row.update(
            gguf=record["path"],
            gguf_bytes=record["size"],
            of_source=round(record["size"] / row["source_bytes"], 3),
            nmse=record["nmse"],
            top1=record["top1_agreement"],
            bounds=checks["gguf-logits"]["thresholds"],
            per_prompt={k: v for k, v in checks["gguf-logits"]["figures"].items() if "." in k},
            llama_load_s=receipt["timings"]["load_s"],
            llama_prefill_tokens_per_s=receipt["timings"]["prefill_tokens_per_s"],
            llama_decode_tokens_per_s=receipt["timings"]["decode_tokens_per_s"],
            gate_s=receipt["timings"]["total_s"],
        )
        if "gguf-lossless-logits" in checks:
            lossless = checks["gguf-lossless-logits"]["figures"]
            row.update(lossless_nmse=lossless["nmse"], lossless_top1=lossless["top1_agreement"])
        self.emit(**row)
        return 0


# llama.cpp loading and running an ungated f16 GGUF outside the registry's code, in three ways,
# with its own log and Python's faulthandler on: where a crash is, and what it needs to happen.
PROBE = """
import sys
from llama_cpp import Llama
import llama_cpp, llama_cpp.llama as module
if "no-extra-bufts" in sys.argv:
    default = llama_cpp.llama_model_default_params
    def plain():
        params = default(); params.use_extra_bufts = False; return params
    module.llama_cpp.llama_model_default_params = plain
llm = Llama(model_path=sys.argv[1], n_ctx=64, n_batch=32, logits_all=True, n_threads=8, n_gpu_layers=0, verbose=True)
print("PROBE loaded", flush=True)
llm.eval([33, 44, 55, 66])
print("PROBE eval", llm.scores[3][:4], flush=True)
llm.close()
print("PROBE closed", flush=True)
"""


def probe(run: Run, root: Path, name: str, base: Path) -> None:
    (record,) = export_gguf(root, GgufRequest(base=name, base_file=base, types=("f16",), gate=False))
    file = root / record.path
    variants = {"plain": [], "torch-first": [], "no-extra-bufts": ["no-extra-bufts"]}
    # PROBE_PRELOAD: a library the probes load first (libasan.so, for a llama.cpp built with
    # -DLLAMA_SANITIZE_ADDRESS=ON: its report names the crashing frames)
    preload = os.environ.get("PROBE_PRELOAD")
    env = {**os.environ, "LD_PRELOAD": preload, "ASAN_OPTIONS": "detect_leaks=0"} if preload else None
    for variant, extra in variants.items():
        source = ("import torch\n" if variant == "torch-first" else "") + PROBE
        command = [sys.executable, "-X", "faulthandler", "-c", source, str(file), *extra]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, env=env)
        run.emit(
            step=f"probe-{variant}", rc=proc.returncode, stdout=proc.stdout[-800:], stderr_tail=proc.stderr[-6000:]
        )
    if shutil.which("gdb"):
        command = ["gdb", "-batch", "-ex", "run", "-ex", "bt 25", "--args", sys.executable, "-c", PROBE, str(file)]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        run.emit(step="probe-gdb", rc=proc.returncode, stdout_tail=proc.stdout[-4000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--layers", type=int, default=4, help="layers of the 7.2B shape (it has 32; export-gguf needs 2 or more)"
    )
    parser.add_argument("--types", default="q8_0,q4_k_m")
    parser.add_argument("--probe", action="store_true", help="run the llama.cpp probes even when every export passed")
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

    run.emit(
        step="env",
        device=torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        torch=torch.__version__,
        cpus=os.cpu_count(),
        gguf=version("gguf"),
        llama_cpp_python=version("llama-cpp-python"),
        spec={
            "n_layer": spec.n_layer,
            "n_embd": spec.n_embd,
            "vocab_size": spec.vocab_size,
            "params": sum(torch.Size(s).numel() for s in checkpoint_shapes(spec).values()),
        },
    )
    start = time.perf_counter()
    base = build_base(args.work / f"{name}.pth", spec, device)
    run.emit(step="build", on=device, seconds=round(time.perf_counter() - start, 1), bytes=base.stat().st_size)
    start = time.perf_counter()
    root = init_registry(args.work / "registry").root
    add_base(
        root, BaseRequest(path=base, filename=base.name, source=f"random ({shape})", vocab="rwkv_vocab_v20230424.txt")
    )
    run.emit(step="add-base", seconds=round(time.perf_counter() - start, 1))
    failed = False
    for kind in args.types.split(","):
        failed |= run.export(root, name, base, kind) != 0
    if failed or args.probe:
        probe(run, root, name, base)


if __name__ == "__main__":
    main()
