"""``.pth`` → safetensors conversion: throughput vs ``cp`` and peak RSS vs the naive path.

Builds synthetic RWKV-7-shaped bf16 checkpoints (n_embd 4096, vocab 65536, every tensor a view
of one shared storage, like the official files), then in fresh processes measures:
  * registry's streaming convert (torch.load mmap + tensor-by-tensor write + bit-exact verify),
    both of a registered full checkpoint (``registry convert PATH``: the source sha256 comes
    from index.json) and of a standalone file (its sha256 is computed first, for the metadata)
  * ``cp`` of the same file (throughput peer)
  * the naive path the Hub conversion bot takes: torch.load without mmap, then
    safetensors.torch.save_file (shared views cloned first, as save_file refuses shared storage)
Run: ``python bench/bench_convert.py [--sizes 3,12] [--dir /tmp/bench-convert]``.
Targets: peak RSS < 10% of the file for 12 GiB; throughput >= 0.5x cp.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import torch
from common import GIB, child_peak_rss, report, run_timed

from registry.artifacts.factory import TinySpec, checkpoint_shapes

CONVERT = """
from pathlib import Path
from registry.ops.convert import convert_standalone
convert_standalone(Path(sys.argv[1]), 1 << 40, force=True)
"""

REGISTER = """
import json
from pathlib import Path
from registry.ops.artifacts import AddRequest, BaseRequest, add_base, add_weight
from registry.ops.core import init_registry
source, root = Path(sys.argv[1]), Path(sys.argv[2])
init_registry(root)
add_base(root, BaseRequest(path=source, filename=source.name))
train = root.parent / "train.json"
train.write_text(json.dumps({"trainer": {"name": "bench", "version": "0"}, "hyperparameters": {}, "command": "bench", "data_sha256": "0" * 64}))
entry = add_weight(root, AddRequest(source, source.name[:-4], "full", "v1.0", train, move=True))
print("ENTRY", entry.path)
"""

CONVERT_ENTRY = """
from pathlib import Path
from registry.ops.convert import convert_entry
convert_entry(Path(sys.argv[1]), sys.argv[2], 1 << 40)
"""

MAKE = """
from pathlib import Path
from bench_convert import make_checkpoint
make_checkpoint(Path(sys.argv[1]), float(sys.argv[2]))
"""

NAIVE = """
import torch
from safetensors.torch import save_file
tensors = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
save_file({k: v.clone() for k, v in tensors.items()}, sys.argv[2], metadata={"format": "pt"})
"""


def spec_for(gib: float) -> TinySpec:
    """The RWKV-7 shape (n_embd 4096) whose bf16 checkpoint is closest to ``gib``."""
    best = None
    for n_layer in range(1, 64):
        spec = TinySpec(n_layer=n_layer, n_embd=4096, vocab_size=65536)
        size = sum(torch.Size(s).numel() for s in checkpoint_shapes(spec).values()) * 2
        if best is None or abs(size - gib * GIB) < abs(best[1] - gib * GIB):
            best = (spec, size)
    return best[0]


def make_checkpoint(path: Path, gib: float) -> Path:
    """One shared bf16 storage with every tensor a view of it; cheap deterministic values."""
    shapes = checkpoint_shapes(spec_for(gib))
    total = sum(torch.Size(s).numel() for s in shapes.values())
    flat = torch.empty(total, dtype=torch.bfloat16)
    pattern = torch.linspace(-1, 1, 1 << 20).to(torch.bfloat16)
    for start in range(0, total, pattern.numel()):
        chunk = flat[start : start + pattern.numel()]
        chunk.copy_(pattern[: chunk.numel()])
    views, offset = {}, 0
    for name, shape in shapes.items():
        n = torch.Size(shape).numel()
        views[name] = flat[offset : offset + n].view(shape)
        offset += n
    torch.save(views, path)
    return path


def bench(directory: Path, gib: float, naive: bool) -> dict:
    work = directory / f"{gib:g}gib"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    source = work / "rwkv7-synthetic.pth"
    child_peak_rss(MAKE, str(source), str(gib))  # built in a child so this process stays small
    size = source.stat().st_size
    # Each timed step starts with no dirty pages, so none pays for another's writeback.
    os.sync()
    t_cp = run_timed(["cp", str(source), str(work / "copy.pth")])
    (work / "copy.pth").unlink()
    os.sync()
    t_conv, rss_conv, _ = child_peak_rss(CONVERT, str(source))
    row = {
        "file_bytes": size,
        "cp_s": round(t_cp, 2),
        "standalone_convert_s": round(t_conv, 2),
        "standalone_throughput_vs_cp": round(t_cp / t_conv, 2),
        "convert_peak_rss_MiB": rss_conv >> 20,
        "convert_peak_rss_pct_of_file": round(100 * rss_conv / size, 1),
    }
    if naive:
        os.sync()
        t_naive, rss_naive, _ = child_peak_rss(NAIVE, str(source), str(work / "naive.safetensors"))
        (work / "naive.safetensors").unlink()
        row.update({"naive_s": round(t_naive, 2), "naive_peak_rss_MiB": rss_naive >> 20, "rss_ratio_convert_vs_naive": round(rss_conv / rss_naive, 3)})
    (work / "model.safetensors").unlink()
    _, _, out = child_peak_rss(REGISTER, str(source), str(work / "reg"))  # moves the file in
    entry = next(line.split(None, 1)[1] for line in out.splitlines() if line.startswith("ENTRY"))
    os.sync()
    t_entry, rss_entry, _ = child_peak_rss(CONVERT_ENTRY, str(work / "reg"), entry)
    row.update({
        "registered_convert_s": round(t_entry, 2),
        "registered_throughput_vs_cp": round(t_cp / t_entry, 2),
        "registered_peak_rss_MiB": rss_entry >> 20,
    })  # fmt: skip
    shutil.rmtree(work)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="3,12", help="GiB, comma separated; the naive path runs on the first only")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-convert"))
    args = parser.parse_args()
    for i, gib in enumerate(float(s) for s in args.sizes.split(",")):
        report(f"convert {gib:g} GiB checkpoint", bench(args.dir, gib, naive=i == 0))


if __name__ == "__main__":
    main()
