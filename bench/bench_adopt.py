"""``registry adopt`` of a hand-made repo holding a ~1 GiB full fine-tune, against coreutils
``sha256sum -c`` of the same repo's SHA256SUMS.  Prints the ratio; run:
``python bench/bench_adopt.py [--dir /tmp/bench-adopt] [--layers 31]``.

The repo is made as a person makes it (the weight copied into ``<base>/full/v1/``, a train.json,
a README, ``sha256sum`` over every file).  Adopt runs as users run it, ``python -m registry adopt
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

from common import GIB, report, run_timed

from registry.artifacts.synthetic import TinySpec, make_base_checkpoint
from registry.ops.validate import validate

BASE = "rwkv7-bench-20260930"


def make_repo(directory: Path, layers: int) -> tuple[Path, Path]:
    import torch

    base = make_base_checkpoint(directory / f"{BASE}.pth", TinySpec(n_layer=layers, n_embd=1024, vocab_size=65536))
    repo = directory / "hand-made"
    (repo / BASE / "full" / "v1").mkdir(parents=True)
    tensors = torch.load(base, weights_only=True, mmap=True)
    tensors = {**tensors, "emb.weight": tensors["emb.weight"] + 1}  # fine-tuned
    torch.save(tensors, repo / BASE / "full" / "v1" / "rwkv-final.pth")
    (repo / BASE / "full" / "v1" / "train.json").write_text(json.dumps({"trainer": {"name": "RWKV-LM", "version": "7"}, "hyperparameters": {}, "command": "train.py", "data_sha256": "ab" * 32}))
    (repo / "README.md").write_text("# A full fine-tune\n\nMade by hand.\n")
    subprocess.run("find * -type f | sort | xargs sha256sum > SHA256SUMS", shell=True, cwd=repo, check=True)
    return base, repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-adopt"))
    parser.add_argument("--layers", type=int, default=31, help="31 layers of n_embd 1024, vocab 65536: a 1.02 GiB checkpoint")
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    base, repo = make_repo(args.dir, args.layers)
    weight = repo / BASE / "full" / "v1" / "rwkv-final.pth"
    subprocess.run(["cat", str(base), str(weight)], check=True, stdout=subprocess.DEVNULL)  # warm the page cache
    t_check = run_timed(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=repo)
    t_same_bytes = run_timed(["sha256sum", str(base), *(str(p) for p in sorted(repo.rglob("*")) if p.is_file())])
    t_adopt = run_timed([sys.executable, "-m", "registry", "adopt", str(repo), "--base-file", str(base), "--json"])
    problems = validate(repo)
    assert not problems, problems
    report(
        "registry adopt vs sha256sum -c (warm page cache)",
        {
            "weight_bytes": weight.stat().st_size, "weight_GiB": round(weight.stat().st_size / GIB, 3), "base_bytes": base.stat().st_size,
            "adopt_s": round(t_adopt, 3), "sha256sum_c_s": round(t_check, 3), "sha256sum_same_bytes_s": round(t_same_bytes, 3),
            "ratio_vs_sha256sum_c": round(t_check / t_adopt, 2), "ratio_vs_sha256sum_same_bytes": round(t_same_bytes / t_adopt, 2),
            "validate_after": "clean",
        },
    )  # fmt: skip
    shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
