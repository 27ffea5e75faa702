"""The CPU gate (what CI runs) against a named peer: this tree's ``registry smoke`` vs another commit's.

    python bench/bench_gate_cpu.py [--peer 94c0323] [--big]

The peer is checked out into a temporary git worktree (default: 94c0323, the last commit before
the gate loaded each base once per process).  Both gate the same registries, built by the peer's
code so that both can read them: the demo's (8 tiny entries: a State, three MiSS runs, a full
checkpoint, and safetensors twins) and, with ``--big``, one 0.45B-shaped full checkpoint (24
layers, n_embd 1024, vocab 65536, bf16).  Each run is a fresh process; prints wall time, peak RSS
and the ratios, peer over this tree.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD_BIG = """
import json, sys, torch
from pathlib import Path
from registry.artifacts.synthetic import TinySpec, make_base_checkpoint, save_checkpoint
from registry.ops.init import init_registry
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.add import AddRequest, add_weight
work = Path(sys.argv[1])
spec = TinySpec(n_layer=24, n_embd=1024, vocab_size=65536, seed=3)
base = make_base_checkpoint(work / "rwkv7-cpu-0.45b-20260101.pth", spec)
root = init_registry(work / "registry").root
add_base(root, BaseRequest(path=base, filename=base.name))
train = work / "train.json"
facts = {"trainer": {"name": "t", "version": "1"}, "hyperparameters": {}, "command": "t", "data_sha256": "ab" * 32}
train.write_text(json.dumps(facts))
tuned = {k: v + 0.001 for k, v in torch.load(base, weights_only=True).items()}
add_weight(root, AddRequest(save_checkpoint(work / "rwkv-final.pth", tuned), base.name[:-4], "full", "v1.0", train))
"""
# Runs a command and reports its wall time and the peak RSS of that one child.
MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": proc.returncode, "wall_s": time.perf_counter() - start,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
                  "stderr": proc.stderr[-800:]}))
"""


def run(code_root: Path, *args: str) -> subprocess.CompletedProcess:
    """Python with ``code_root``'s package first; run from / so the current directory's is never imported."""
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, check=True, cwd="/")


def measure(code_root: Path, registry: Path, base: Path | None) -> dict:
    command = [sys.executable, "-m", "registry", "smoke", "-C", str(registry), "--device", "cpu", "--json"]
    command += ["--base-file", str(base)] if base else []
    result = json.loads(run(code_root, "-c", MEASURE, *command).stdout)
    if result["rc"] not in (0,):
        raise SystemExit(f"smoke failed under {code_root}: {result['stderr']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer", default="94c0323", help="commit to compare against")
    parser.add_argument("--big", action="store_true", help="also gate a 0.45B-shaped full checkpoint")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gate-cpu-") as tmp:
        work, peer = Path(tmp), Path(tmp) / "peer"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(peer), args.peer],
            check=True,
            capture_output=True,
        )
        try:
            cases = []
            run(peer, "-m", "registry", "demo", str(work / "demo"))
            base = next((work / "demo" / "inputs").glob("rwkv7-tiny-g1k-20260930*.pth"))
            cases.append(("demo (8 tiny entries)", work / "demo" / "registry", base, base.stat().st_size))
            if args.big:
                (work / "big").mkdir()
                run(peer, "-c", BUILD_BIG, str(work / "big"))
                cases.append(
                    ("0.45B full", work / "big" / "registry", None, (work / "big" / "rwkv-final.pth").stat().st_size)
                )
            for name, registry, base_file, size in cases:
                # the peer always needs --base-file; this tree needs it for State/MiSS entries only
                peer_base = base_file or next(registry.parent.glob("rwkv7-cpu-*.pth"))
                theirs = measure(peer, registry, peer_base)
                ours = measure(REPO, registry, base_file)
                print(
                    json.dumps(
                        {
                            "case": name,
                            "checkpoint_bytes": size,
                            "peer": {
                                "commit": args.peer,
                                "wall_s": round(theirs["wall_s"], 2),
                                "peak_rss_gib": round(theirs["peak_rss_bytes"] / 2**30, 2),
                            },
                            "this_tree": {
                                "wall_s": round(ours["wall_s"], 2),
                                "peak_rss_gib": round(ours["peak_rss_bytes"] / 2**30, 2),
                                "peak_rss_over_checkpoint": round(ours["peak_rss_bytes"] / size, 2),
                            },
                            "speedup": round(theirs["wall_s"] / ours["wall_s"], 2),
                            "rss_ratio": round(theirs["peak_rss_bytes"] / ours["peak_rss_bytes"], 2),
                        }
                    ),
                    flush=True,
                )
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(peer)], capture_output=True)


if __name__ == "__main__":
    main()
