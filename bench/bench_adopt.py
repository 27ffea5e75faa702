"""``registry adopt`` of two hand-made repos, each against coreutils ``sha256sum -c`` of the same
repo's SHA256SUMS, in one run: seed 000's shape (a ~1 GiB full fine-tune) and seed 001's (1 State
and 3 MiSS adapters on the same ~1 GiB base, train.json in the card's own words and a
hand-written index.json).  Prints the ratios; run:
``python bench/bench_adopt.py [--dir /tmp/bench-adopt] [--layers 31]``.

Each repo is made as a person makes it (a train.json, a README, ``sha256sum`` over every file).
Seed 000's weight stays at the repo root as ``rwkv-final.pth``, its train.json beside it naming the
base and the dataset repo + revision (no data sha256), as its author published it; seed 001's
weights sit in ``<base>/<method>/<version>/``.  Adopt runs as users run it, ``python -m registry adopt
DIR --base-file BASE.pth`` in a fresh process (interpreter and torch import included), so it also
reads the ~1 GiB base to check the weight against it: the second peer, ``sha256sum`` of the repo's
files and the base, hashes the same bytes adopt reads.  All files are warm in the page cache.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from common import GIB, report, run_timed

from registry.artifacts.synthetic import TinySpec, make_adapter_file, make_base_checkpoint, make_state_file
from registry.core.hashing import hash_file
from registry.ops.validate import validate

BASE = "rwkv7-bench-20260930"


def make_repo(directory: Path, layers: int) -> tuple[Path, Path]:
    base = make_base_checkpoint(directory / f"{BASE}.pth", TinySpec(n_layer=layers, n_embd=1024, vocab_size=65536))
    repo = directory / "hand-made"
    repo.mkdir(parents=True)
    tensors = torch.load(base, weights_only=True, mmap=True)
    tensors = {**tensors, "emb.weight": tensors["emb.weight"] + 1}  # fine-tuned
    torch.save(tensors, repo / "rwkv-final.pth")  # at the root, where people download it by name
    data = {"repo": "mikuhhn1239/novel-agent-sft-dataset", "revision": "5d3040d21f51b3ce90b9396b058e552c47f43cd5"}
    (repo / "train.json").write_text(
        json.dumps(
            {
                "trainer": "RWKV-LM",
                "base": f"BlinkDL/rwkv7-g1/{BASE}.pth",
                "hyperparameters": {"lr": 5e-7},
                "command": "train.py",
                "data": data,
            }
        )
    )
    (repo / "README.md").write_text("# A full fine-tune\n\nMade by hand.\n")
    subprocess.run(
        "find * -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS", shell=True, cwd=repo, check=True
    )
    return base, repo


RUNS = ("r16-lr2e-5-e2", "r16-lr1e-5-e2", "r16-lr3e-5-e2")


def make_seed_001(directory: Path, base: Path, spec: TinySpec) -> Path:
    """1 State + 3 MiSS on ``base``, train.json as seed 001's author writes it, a hand-written index.json."""
    repo = directory / "agent-weights"
    state_dir, miss_dir = repo / BASE / "state" / "v1.41", repo / BASE / "miss" / "v2.1"
    state_dir.mkdir(parents=True)
    make_state_file(state_dir / "v141b-s1224.pth", spec, seed=5)
    base_sha = hash_file(base)
    for i, run in enumerate(RUNS):
        (miss_dir / run).mkdir(parents=True)
        make_adapter_file(miss_dir / run / "adapter-final.pth", spec, base_sha, seed=10 + i)
    data = {"repo": "No-22/rwkv-agent-distill", "version": "v1.41", "sha256": "feb2fd6b" * 8, "rows": 3662}
    (state_dir / "train.json").write_text(
        json.dumps(
            {
                "trainer": "rwkv_state_tune",
                "trainer_version": "v1.8.1",
                "base": f"{BASE}.pth",
                "data": data,
                "hyperparameters": {"lr_init": 0.01},
                "command": "rwkv_state_tune",
                "step": 1224,
            }
        )
    )
    runs = {
        run: {
            "lr_init": lr,
            "command": f"rwkv_miss_tune --lr_init {lr}",
            "started": "2026-10-16T00:00",
            "finished": "2026-10-16T03:00",
        }
        for run, lr in zip(RUNS, (2e-5, 1e-5, 3e-5), strict=True)
    }
    (miss_dir / "train.json").write_text(
        json.dumps(
            {
                "trainer": "rwkv_miss_tune",
                "trainer_version": "v1.8.1",
                "data": {**data, "version": "v2.1", "sha256": "2fbf6760" * 8, "rows": 5512},
                "shared_hyperparameters": {"r": 16},
                "runs": runs,
            }
        )
    )
    entries = [{"path": f"{BASE}/state/v1.41/v141b-s1224.pth", "recommended": True}] + [
        {"path": f"{BASE}/miss/v2.1/{run}/adapter-final.pth", "recommended": run == RUNS[0]} for run in RUNS
    ]
    (repo / "index.json").write_text(
        json.dumps(
            {"repo": "No-22/rwkv-agent-weights", "bases": [{"dir": BASE, "sha256": base_sha}], "entries": entries}
        )
    )
    (repo / "README.md").write_text("# RWKV-Agent 权重\n\n手写的说明。\n")
    subprocess.run(
        "find * -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS", shell=True, cwd=repo, check=True
    )
    return repo


def measure(title: str, repo: Path, base: Path) -> None:
    files = [str(p) for p in sorted(repo.rglob("*")) if p.is_file()]
    subprocess.run(["cat", str(base), *files], check=True, stdout=subprocess.DEVNULL)  # warm the page cache
    t_check = run_timed(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=repo)
    t_same_bytes = run_timed(["sha256sum", str(base), *files])
    t_adopt = run_timed([sys.executable, "-m", "registry", "adopt", str(repo), "--base-file", str(base), "--json"])
    problems = validate(repo)
    assert not problems, problems
    before = {p.relative_to(repo).as_posix() for p in map(Path, files) if p.suffix == ".pth"}
    assert before <= {e["path"] for e in json.loads((repo / "index.json").read_text())["entries"]}, (
        "every weight registered where it was"
    )
    size = sum(Path(f).stat().st_size for f in files)
    report(
        title,
        {
            "repo_bytes": size,
            "repo_GiB": round(size / GIB, 3),
            "base_bytes": base.stat().st_size,
            "adopt_s": round(t_adopt, 3),
            "sha256sum_c_s": round(t_check, 3),
            "sha256sum_same_bytes_s": round(t_same_bytes, 3),
            "ratio_vs_sha256sum_c": round(t_check / t_adopt, 2),
            "ratio_vs_sha256sum_same_bytes": round(t_same_bytes / t_adopt, 2),
            "validate_after": "clean",
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-adopt"))
    parser.add_argument(
        "--layers", type=int, default=31, help="31 layers of n_embd 1024, vocab 65536: a 1.02 GiB checkpoint"
    )
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    base, repo = make_repo(args.dir, args.layers)
    measure("seed 000's shape: registry adopt of a ~1 GiB full fine-tune vs sha256sum -c (warm page cache)", repo, base)
    spec = TinySpec(n_layer=args.layers, n_embd=1024, vocab_size=65536)
    measure(
        "seed 001's shape: registry adopt of 1 State + 3 MiSS vs sha256sum -c (warm page cache)",
        make_seed_001(args.dir, base, spec),
        base,
    )
    shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
