"""The GPU gate, run for real: tiny artifacts and a 7.2B-shaped model, timed end to end.

On a CUDA machine (the project's H200 runs: docs/gpu-gate.md), from the repo root:
    PYTHONPATH=$PWD python bench/gpu_gate.py --work /dev/shm/gate --out $OUT
It builds the demo registry and gates its base-A entries on cuda, then builds a random
RWKV-7 checkpoint of the 7.2B shape (32 layers, n_embd 4096, vocab 65536, bf16) with a State
file and a MiSS r16 adapter, registers them, and gates each with ``registry smoke --device cuda``
in a fresh process: the first run may build the kernel, later runs find it cached (warm).
Prints one JSON line per step; receipts are copied to --out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from registry.hashing import hash_file
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.convert import convert_entry
from registry.ops.demo import BASE_A, build_inputs
from registry.ops.init import init_registry
from registry.synthetic import (
    TinySpec,
    make_adapter_file,
    make_base_state_dict,
    make_state_file,
    save_checkpoint,
)

BIG = TinySpec(n_layer=32, n_embd=4096, vocab_size=65536, seed=72)
BIG_NAME = "rwkv7-random-7.2b-shape-20261203"


def emit(**row) -> None:
    print(json.dumps(row), flush=True)


def smoke(root: Path, base: Path, paths: list[str], out: Path, tag: str) -> dict:
    """One ``registry smoke --device cuda`` process; its wall time is the end-to-end gate time."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "registry", "smoke", *paths, "-C", str(root), "--base-file", str(base), "--device", "cuda", "--json"],
        capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    (out / f"{tag}.stderr.txt").write_text(proc.stderr[-20000:])
    if proc.returncode not in (0, 1):
        return {"tag": tag, "rc": proc.returncode, "wall_s": round(wall, 1), "stderr_tail": proc.stderr[-1500:]}
    receipts = json.loads(proc.stdout)
    (out / f"{tag}.receipts.json").write_text(json.dumps(receipts, indent=1))
    return {
        "tag": tag, "rc": proc.returncode, "wall_s": round(wall, 1),
        "entries": {r["entry"]: {"passed": r["passed"], "timings": r["timings"], "failed": [c["name"] for c in r["checks"] if not c["passed"]]} for r in receipts},
    }  # fmt: skip


def tiny_registry(work: Path) -> tuple[Path, Path]:
    """The demo's tiny artifacts for base A: a State, three MiSS runs, a full checkpoint and a
    sharded safetensors twin (the card, scores and publish steps of the demo are not needed)."""
    files = build_inputs(work / "inputs")
    root = init_registry(work / "registry").root
    add_base(root, BaseRequest(path=files["base_a"], filename=files["base_a"].name))
    add_weight(root, AddRequest(files["state"], BASE_A, "state", "v1.41", files["train_state"]))
    for run in ("r16-lr2e-5-e2", "r16-lr1e-5-e2", "r16-lr3e-5-e2"):
        add_weight(root, AddRequest(files[run], BASE_A, "miss", "v2.1", files["train_miss"], run=run))
    full = add_weight(root, AddRequest(files["full"], BASE_A, "full", "v1.0", files["train_full"]))
    convert_entry(root, full.path, 8 << 20)
    return root, files["base_a"]


def big_registry(work: Path) -> tuple[Path, Path, list[str]]:
    start = time.perf_counter()
    base = save_checkpoint(work / f"{BIG_NAME}.pth", make_base_state_dict(BIG, device="cuda"))
    emit(step="make-7.2b-base", seconds=round(time.perf_counter() - start, 1), bytes=base.stat().st_size)
    root = init_registry(work / "registry-7b").root
    start = time.perf_counter()
    add_base(root, BaseRequest(path=base, filename=base.name, source="random (7.2B shape)", vocab="rwkv_vocab_v20230424.txt"))
    emit(step="add-base-7.2b", seconds=round(time.perf_counter() - start, 1))
    train = work / "train.json"
    train.write_text(json.dumps({"trainer": {"name": "synthetic", "version": "0"}, "hyperparameters": {}, "command": "bench/gpu_gate.py", "data_sha256": "0" * 64}))
    state = make_state_file(work / "state-7b.pth", BIG, seed=5)
    adapter = make_adapter_file(work / "adapter-final.pth", BIG, hash_file(base), rank=16, seed=6)
    entries = [
        add_weight(root, AddRequest(state, BIG_NAME, "state", "v1.41", train)).path,
        add_weight(root, AddRequest(adapter, BIG_NAME, "miss", "v2.1", train, run="r16")).path,
    ]
    emit(step="registry-7.2b", state_bytes=state.stat().st_size, adapter_bytes=adapter.stat().st_size)
    return root, base, entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, default=Path("/dev/shm/gate"))
    parser.add_argument("--out", type=Path, default=Path("gate-out"))
    parser.add_argument("--skip-tiny", action="store_true")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    args.out.mkdir(parents=True, exist_ok=True)
    emit(step="env", gpu=torch.cuda.get_device_name(0), torch=torch.__version__, cuda=torch.version.cuda)
    if not args.skip_tiny:
        tiny_root, tiny_base = tiny_registry(args.work / "tiny")
        emit(**smoke(tiny_root, tiny_base, [], args.out, "tiny-all"))
    root, base, entries = big_registry(args.work)
    for i, path in enumerate(entries):
        emit(**smoke(root, base, [path], args.out, f"7b-{i}-{path.split('/')[1]}"))
    emit(**smoke(root, base, [entries[0]], args.out, "7b-state-warm-again"))


if __name__ == "__main__":
    main()
