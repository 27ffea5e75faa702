"""``registry convert`` and ``export-hf`` of a ``.pth``: throughput vs ``cp``, peak RSS vs the naive path.

Builds synthetic RWKV-7-shaped bf16 checkpoints (n_embd 4096, vocab 65536, every tensor a view
of one shared storage, like the official files) and times, each in a fresh process:
  * ``cp`` of the file (the throughput peer), and ``cp`` then ``sync``: convert fsyncs its
    outputs before renaming them, ``cp`` leaves its copy in the page cache;
  * the ``registry convert`` command on the file outside any registry ("standalone": it also
    hashes the source, for the metadata) and on the same file registered as a full checkpoint
    ("registered": index.json has its sha256), with the default ``--shard-size 5GB``;
  * ``registry export-hf`` of the registered entry: the same pipeline writing fla's names (the
    low-rank matrices transposed), then config, tokenizer files and the folder's checks with
    Transformers, fla and PEFT (fla's model built on the meta device); the peak RSS of importing
    those alone is reported beside the command's;
  * once, on the first size, the naive path the Hub conversion bot takes: ``torch.load``
    without mmap, then ``safetensors.torch.save_file`` (shared views cloned first, as save_file
    refuses shared storage); it needs about twice the file in RAM.

Every step starts from the same state: no output of an earlier step on disk, ``sync``, clean
page cache dropped (when run as root), then the source read once so that it is cached, as a file
just downloaded or trained is.  A full page cache made writes 2-3x slower here.  The steps run
in interleaved rounds (``--rounds``), as this VM's disk speed drifts from minute to minute;
medians are reported, with every sample.
Run: ``python bench/bench_convert.py [--sizes 3,12] [--rounds 3] [--dir DIR]``.
Targets: peak RSS < 10% of the file for 12 GiB (convert and export-hf); throughput >= 0.5x cp.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
from pathlib import Path

import torch
from common import GIB, child_peak_rss, report, run_timed

from registry.artifacts.synthetic import TinySpec, checkpoint_shapes

CLI = """
from registry.cli import main
main(sys.argv[1:], standalone_mode=False)
"""

WARM_IMPORTS = """
import registry.cli, registry.ops.convert
"""

REGISTER = """
import json
from pathlib import Path
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.init import init_registry
source, root = Path(sys.argv[1]), Path(sys.argv[2])
init_registry(root)
add_base(root, BaseRequest(path=source, filename=source.name))
train = root.parent / "train.json"
facts = {"trainer": {"name": "bench", "version": "0"}, "hyperparameters": {}, "command": "bench"}
train.write_text(json.dumps({**facts, "data_sha256": "0" * 64}))
entry = add_weight(root, AddRequest(source, source.name[:-4], "full", "v1.0", train, move=True))
print("ENTRY", entry.path)
"""

MAKE = """
from pathlib import Path
from bench_convert import make_checkpoint
make_checkpoint(Path(sys.argv[1]), float(sys.argv[2]))
"""

# export-hf imports, besides convert's, what checks its folder (fla, PEFT, Transformers' Auto
# classes): warmed the same way, and their peak RSS alone is reported beside the command's.
EXPORT_IMPORTS = (
    WARM_IMPORTS
    + """
import registry.ops.export_hf
from registry.hf.verify import require_hf
require_hf()
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
"""
)

NAIVE = """
import torch
from safetensors.torch import save_file
tensors = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
save_file({k: v.clone() for k, v in tensors.items()}, sys.argv[2], metadata={"format": "pt"})
"""


def spec_for(gib: float) -> TinySpec:
    """The RWKV-7 shape (n_embd 4096) whose bf16 checkpoint is closest to ``gib``."""
    best = None
    for n_layer in range(2, 64):  # export-hf takes 2 layers or more (fla's RWKV-7 does)
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


def small_files(root: Path) -> dict[Path, bytes]:
    """Every file of a registry but its weights, to put the registry back after a conversion."""
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p.stat().st_size < 1 << 20}


def restore(root: Path, saved: dict[Path, bytes], keep: Path) -> None:
    for path in [p for p in root.rglob("*") if p.is_file() and p not in saved and p != keep]:
        path.unlink()
    shutil.rmtree(keep.parent / "hf", ignore_errors=True)  # the export's folder, emptied above
    for path, data in saved.items():
        path.write_bytes(data)


def remove_outputs(directory: Path) -> None:
    for path in directory.glob("model*.safetensors*"):
        path.unlink()


def same_start(source: Path, imports: str = WARM_IMPORTS) -> bool:
    """sync, drop the clean page cache if allowed, then cache ``source`` and the libraries the
    command imports (as on a machine that just ran it); whether caches were dropped."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        dropped = True
    except OSError:
        dropped = False
    with open(source, "rb", buffering=0) as handle:
        while handle.read(64 << 20):
            pass
    child_peak_rss(imports)
    return dropped


def bench(directory: Path, gib: float, rounds: int, naive: bool) -> dict:
    work = directory / f"{gib:g}gib"
    shutil.rmtree(work, ignore_errors=True)
    (work / "outside").mkdir(parents=True)
    source = work / "outside" / "rwkv7-synthetic.pth"
    child_peak_rss(MAKE, str(source), str(gib))  # built in a child so this process stays small
    size = source.stat().st_size
    # The registered copy is a hard link, made before add: one inode, one page cache, and its
    # stat fingerprint (which the stat cache checks) no longer changes after add remembers it.
    linked = work / source.name
    os.link(source, linked)
    _, _, out = child_peak_rss(REGISTER, str(linked), str(work / "reg"))
    entry = next(line.split(None, 1)[1] for line in out.splitlines() if line.startswith("ENTRY"))
    registered = work / "reg" / entry
    saved = small_files(work / "reg")
    copy = work / "copy.pth"

    samples: dict[str, list[float]] = {
        "cp": [],
        "cp_then_sync": [],
        "standalone": [],
        "registered": [],
        "export_hf": [],
    }
    peak = {"standalone": 0, "registered": 0}
    export_peak = 0
    for _ in range(rounds):
        dropped = same_start(source)
        samples["cp"].append(run_timed(["cp", str(source), str(copy)]))
        copy.unlink()
        same_start(source)
        samples["cp_then_sync"].append(run_timed(["sh", "-c", f"cp '{source}' '{copy}' && sync"]))
        copy.unlink()
        same_start(source)
        seconds, rss, out = child_peak_rss(CLI, "convert", str(source), "--json")
        assert json.loads(out.split("PEAK")[0])[0]["outputs"], out  # it did convert
        samples["standalone"].append(seconds)
        peak["standalone"] = max(peak["standalone"], rss)
        remove_outputs(source.parent)
        same_start(source)
        seconds, rss, _ = child_peak_rss(CLI, "convert", "-C", str(work / "reg"), entry, "--json")
        samples["registered"].append(seconds)
        peak["registered"] = max(peak["registered"], rss)
        restore(work / "reg", saved, registered)
        same_start(source, EXPORT_IMPORTS)
        seconds, rss, out = child_peak_rss(CLI, "export-hf", "-C", str(work / "reg"), entry, "--json")
        assert json.loads(out.split("PEAK")[0])["files"], out  # it did export
        samples["export_hf"].append(seconds)
        export_peak = max(export_peak, rss)
        restore(work / "reg", saved, registered)
    imports_peak = child_peak_rss(EXPORT_IMPORTS)[1]

    median = {k: statistics.median(v) for k, v in samples.items()}
    row = {
        "file_bytes": size,
        "rounds": rounds,
        "page_cache_dropped_before_each_step": dropped,
        **{f"{k}_s": round(v, 2) for k, v in median.items()},
        "standalone_throughput_vs_cp": round(median["cp"] / median["standalone"], 2),
        "registered_throughput_vs_cp": round(median["cp"] / median["registered"], 2),
        "standalone_throughput_vs_cp_then_sync": round(median["cp_then_sync"] / median["standalone"], 2),
        "registered_throughput_vs_cp_then_sync": round(median["cp_then_sync"] / median["registered"], 2),
        "convert_peak_rss_MiB": max(peak.values()) >> 20,
        "convert_peak_rss_pct_of_file": round(100 * max(peak.values()) / size, 1),
        "export_hf_throughput_vs_cp": round(median["cp"] / median["export_hf"], 2),
        "export_hf_throughput_vs_cp_then_sync": round(median["cp_then_sync"] / median["export_hf"], 2),
        "export_hf_peak_rss_MiB": export_peak >> 20,
        "export_hf_peak_rss_pct_of_file": round(100 * export_peak / size, 1),
        "export_hf_imports_alone_peak_rss_MiB": imports_peak >> 20,
        "samples_s": {k: [round(x, 2) for x in v] for k, v in samples.items()},
    }
    if naive:
        same_start(source)
        t_naive, rss_naive, _ = child_peak_rss(NAIVE, str(source), str(work / "naive.safetensors"))
        row.update(
            {
                "naive_s": round(t_naive, 2),
                "naive_peak_rss_MiB": rss_naive >> 20,
                "rss_ratio_convert_vs_naive": round(max(peak.values()) / rss_naive, 3),
            }
        )
    shutil.rmtree(work)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="3,12", help="GiB, comma separated; the naive path runs on the first only")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions of every step")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-convert"))
    parser.add_argument(
        "--no-naive", action="store_true", help="skip the naive path (it needs about 2x the first size in RAM)"
    )
    args = parser.parse_args()
    for i, gib in enumerate(float(s) for s in args.sizes.split(",")):
        report(
            f"convert and export-hf of a {gib:g} GiB checkpoint",
            bench(args.dir, gib, args.rounds, naive=i == 0 and not args.no_naive),
        )


if __name__ == "__main__":
    main()
