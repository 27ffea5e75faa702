"""The GPU gate at production scale, timed from process start to exit (docs/gpu-gate.md).

On a CUDA machine, from the repo root (the project's H200 runs carry rwkv/pydantic/jsonschema as
wheels, see docs/gpu-gate.md):
    PYTHONPATH=$PWD python bench/gpu_gate.py --part 7b  --work /dev/shm/gate --out $OUT
    PYTHONPATH=$PWD python bench/gpu_gate.py --part 13b --work /dev/shm/gate --out $OUT

``--part 7b`` builds, on the GPU, a random RWKV-7 checkpoint of the 7.2B shape (32 layers, n_embd
4096, vocab 65536, bf16) and a seed-001-shaped registry on it: one State and three MiSS r16 runs.
``--part 13b`` builds a 13.3B-shaped full fine-tune (61 layers, n_embd 4096).  Each ``registry smoke … --device cuda``
runs in a fresh process; its wall time is the
figure.  "cold" runs start with empty kernel caches (ours and the rwkv package's JIT), an empty
per-user hash cache and no registry stat cache: a fresh machine, except that the checkpoint is
in the page cache.  Prints one JSON line per step (also appended to OUT/gate.jsonl); receipts and
the last lines of stderr go to OUT.

Memory (issue #45): each entry's row gives the receipt's ``gpu_peak_bytes``
(``torch.cuda.max_memory_allocated``) as ``peak_ratio``, a ratio to the bf16 file's size, the
card named in the ``env`` row.  Beside the default runs (the card's free memory is the budget):
7.2B State and MiSS with ``--max-gpu-memory 16GiB``; 13.3B on a simulated 32 GiB card (the
process's ``torch.cuda.set_per_process_memory_fraction`` set to 32 GiB before the gate starts),
and with ``--max-gpu-memory 24GiB``, which must be refused in one line before loading (exit 5).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from registry.artifacts.synthetic import (
    TinySpec,
    make_adapter_file,
    make_base_state_dict,
    make_state_file,
    save_checkpoint,
)
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.init import init_registry

SHAPES = {
    "7b": TinySpec(n_layer=32, n_embd=4096, vocab_size=65536, seed=72),
    "13b": TinySpec(n_layer=61, n_embd=4096, vocab_size=65536, seed=133),
}
NAMES = {"7b": "rwkv7-random-7.2b-shape-20261203", "13b": "rwkv7-random-13.3b-shape-20261203"}
MISS_RUNS = ("r16-lr2e-5-e2", "r16-lr1e-5-e2", "r16-lr3e-5-e2")


def build_base(path: Path, spec: TinySpec, device: str = "cuda") -> Path:
    """A random bf16 base of ``spec``'s shape at ``path``, its values drawn on ``device`` (seconds at 7.2B on a GPU)."""
    path = save_checkpoint(path, make_base_state_dict(spec, device=device))
    if device == "cuda":
        torch.cuda.empty_cache()
    return path


# Runs the CLI as on a card of argv[1] GiB: this process may allocate no more than that.
AS_ON_A_CARD = """
import sys, torch
torch.cuda.set_per_process_memory_fraction(float(sys.argv[1]) * 2**30 / torch.cuda.mem_get_info()[1])
sys.argv = ["registry", *sys.argv[2:]]
from registry.cli import run
run()
"""


# Runs the CLI under cProfile, its statistics written to argv[1]: in-process, since the registry's
# entry point ends with os._exit (which `python -m cProfile` would not survive to write its file).
PROFILED = """
import cProfile, sys
from registry.cli import main
profile = cProfile.Profile()
profile.enable()
try:
    main(sys.argv[2:], standalone_mode=False)
finally:
    profile.disable()
    profile.dump_stats(sys.argv[1])
"""


class Bench:
    def __init__(self, work: Path, out: Path, cold: bool = True, repeat: int = 1, profile: bool = False):
        self.work, self.out, self.cold, self.repeat, self.profile = work, out, cold, repeat, profile
        self.weights_bytes = 0  # the bf16 checkpoint's size: the peaks' yardstick

    def emit(self, **row) -> None:
        line = json.dumps(row)
        print(line, flush=True)
        with open(self.out / "gate.jsonl", "a") as log:
            log.write(line + "\n")

    def cold_caches(self, tag: str, root: Path) -> dict[str, str]:
        """Fresh kernel caches and hash caches: what a first run on a fresh machine finds."""
        caches = self.work / f"caches-{tag}"
        shutil.rmtree(caches, ignore_errors=True)
        (root / ".registry" / "statcache.json").unlink(missing_ok=True)
        return self.caches(caches)

    def caches(self, caches: Path) -> dict[str, str]:
        return {
            "RWKV_REGISTRY_KERNEL_CACHE": str(caches / "kernels"),
            "TORCH_EXTENSIONS_DIR": str(caches / "torch-extensions"),
            "XDG_CACHE_HOME": str(caches / "xdg"),
        }

    def smoke(
        self,
        tag: str,
        root: Path,
        paths: list[str],
        base: Path | None,
        env: dict[str, str],
        *extra: str,
        card_gib: float | None = None,
        profile: bool = False,
    ) -> float:
        """``registry smoke`` in a fresh process, its wall time returned; ``card_gib``: as on a card of
        that size (this process's memory fraction set before the gate starts); ``profile``: under
        cProfile (main thread), the top of its cumulative table written to OUT/<tag>.profile.txt."""
        entry = ["-m", "registry"] if card_gib is None else ["-c", AS_ON_A_CARD, str(card_gib)]
        if profile:
            entry = ["-c", PROFILED, str(self.out / f"{tag}.prof")]
        command = [sys.executable, *entry, "smoke", *paths, "-C", str(root), "--device", "cuda", "--json", *extra]
        command += ["--base-file", str(base)] if base else []
        start = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env})
        wall = time.perf_counter() - start
        (self.out / f"{tag}.stderr.txt").write_text(proc.stderr[-6000:])
        row: dict = {"tag": tag, "gpu": torch.cuda.get_device_name(0), "rc": proc.returncode, "wall_s": round(wall, 1)}
        row["bf16_bytes"] = self.weights_bytes
        try:
            receipts = json.loads(proc.stdout)
        except ValueError:
            self.emit(**row, stderr_tail=proc.stderr[-1500:])
            return wall
        if isinstance(receipts, dict):  # a refusal
            self.emit(**row, refusal=receipts)
            return wall
        (self.out / f"{tag}.receipts.json").write_text(json.dumps(receipts, indent=1))
        row["entries"] = {
            r["entry"].split("/", 1)[1]: {
                "passed": r["passed"],
                "failed": [c["name"] for c in r["checks"] if not c["passed"]],
                **{
                    k: r["timings"][k]
                    for k in ("total_s", "setup_s", "kernel_build_s", "decode_tokens_per_s", "gpu_peak_bytes")
                },
                "peak_ratio": round(r["timings"]["gpu_peak_bytes"] / self.weights_bytes, 3),
                "peak_gib": round(r["timings"]["gpu_peak_bytes"] / 2**30, 2),
                **{
                    k: v
                    for c in r["checks"]
                    if c["name"] == "model-parity"
                    for k, v in c["figures"].items()
                    if k.endswith("max_scaled_err")
                },
            }
            for r in receipts
        }
        self.emit(**row)
        if profile:
            table = io.StringIO()
            stats = pstats.Stats(str(self.out / f"{tag}.prof"), stream=table)
            stats.sort_stats("cumulative").print_stats(60)
            stats.sort_stats("tottime").print_stats(30)
            (self.out / f"{tag}.profile.txt").write_text(table.getvalue())
        return wall

    def warm(self, tag: str, *args: Any, **kwargs: Any) -> None:
        """A warm case, run ``repeat`` times; with more than one run, a row with their median."""
        walls = [self.smoke(tag if self.repeat == 1 else f"{tag}-{i + 1}", *args, **kwargs) for i in range(self.repeat)]
        if self.repeat > 1:
            median = round(statistics.median(walls), 1)
            self.emit(summary=tag, wall_s_median=median, wall_s=[round(w, 1) for w in walls])

    def build(self, part: str) -> Path:
        start = time.perf_counter()
        path = build_base(self.work / f"{NAMES[part]}.pth", SHAPES[part])
        self.weights_bytes = path.stat().st_size
        self.emit(step=f"build-{part}", seconds=round(time.perf_counter() - start, 1), bytes=path.stat().st_size)
        return path

    def train_json(self) -> Path:
        train = self.work / "train.json"
        train.write_text(
            json.dumps(
                {
                    "trainer": {"name": "synthetic", "version": "0"},
                    "hyperparameters": {},
                    "command": "bench/gpu_gate.py",
                    "data_sha256": "0" * 64,
                }
            )
        )
        return train


def part_7b(bench: Bench) -> None:
    spec, name = SHAPES["7b"], NAMES["7b"]
    base = bench.build("7b")
    root = init_registry(bench.work / "registry-7b").root
    start = time.perf_counter()
    base_sha = add_base(
        root, BaseRequest(path=base, filename=base.name, source="random (7.2B shape)", vocab="rwkv_vocab_v20230424.txt")
    ).base.sha256
    train = bench.train_json()
    entries = [
        add_weight(
            root,
            AddRequest(
                make_state_file(bench.work / "state-7b.pth", spec, seed=5), name, "state", "v1.41", train, move=True
            ),
        ).path
    ]
    for i, run in enumerate(MISS_RUNS):
        adapter = make_adapter_file(bench.work / run / "adapter-final.pth", spec, base_sha, rank=16, seed=6 + i)
        entries.append(add_weight(root, AddRequest(adapter, name, "miss", "v2.1", train, run=run, move=True)).path)
    bench.emit(step="registry-7b", seconds=round(time.perf_counter() - start, 1), entries=entries)
    env = bench.cold_caches("7b", root) if bench.cold else {}
    bench.smoke("7b-state-cold" if bench.cold else "7b-state-first", root, entries[:1], base, env)
    if bench.profile:  # first, while the time limit is far: the profiles are what a slow run is read by
        bench.smoke("7b-state-profiled", root, entries[:1], base, env, profile=True)
        bench.smoke("7b-seed001-repo-profiled", root, [], base, env, profile=True)
    bench.warm("7b-state-warm", root, entries[:1], base, env)
    bench.warm("7b-miss-warm", root, entries[1:2], base, env)
    bench.smoke("7b-miss-16gib", root, entries[1:2], base, env, "--max-gpu-memory", "16GiB")
    bench.warm("7b-seed001-repo-warm", root, [], base, env)


def part_13b(bench: Bench) -> None:
    name = NAMES["13b"]
    weights = bench.build("13b")
    root = init_registry(bench.work / "registry-13b").root
    start = time.perf_counter()
    add_base(
        root,
        BaseRequest(
            path=weights, filename=weights.name, source="random (13.3B shape)", vocab="rwkv_vocab_v20230424.txt"
        ),
    )
    # The fine-tune is the base's bytes moved into the registry: the gate runs a full entry on its own.
    entry = add_weight(root, AddRequest(weights, name, "full", "v1.0", bench.train_json(), move=True)).path
    bench.emit(step="registry-13b", seconds=round(time.perf_counter() - start, 1), entry=entry)
    env = bench.cold_caches("13b", root) if bench.cold else {}
    bench.smoke("13b-full-cold" if bench.cold else "13b-full-first", root, [entry], None, env)
    bench.warm("13b-full-warm", root, [entry], None, env)
    bench.smoke("13b-full-32gib-card", root, [entry], None, env, card_gib=32)
    bench.smoke("13b-full-24gib-refused", root, [entry], None, env, "--max-gpu-memory", "24GiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("7b", "13b"), required=True)
    parser.add_argument("--work", type=Path, default=Path("/dev/shm/gate"))
    parser.add_argument("--out", type=Path, default=Path("gate-out"))
    parser.add_argument(
        "--warm-only",
        action="store_true",
        help="keep this machine's caches: the first run is not cold (saves the JIT rebuilds)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="run each warm case this many times (median printed)")
    parser.add_argument("--profile", action="store_true", help="also run the 7.2B State and repo cases under cProfile")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    args.out.mkdir(parents=True, exist_ok=True)
    bench = Bench(args.work, args.out, cold=not args.warm_only, repeat=args.repeat, profile=args.profile)
    bench.emit(
        step="env",
        gpu=torch.cuda.get_device_name(0),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cpus=os.cpu_count(),
    )
    {"7b": part_7b, "13b": part_13b}[args.part](bench)


if __name__ == "__main__":
    main()
