"""``registry add-base`` of a 3 GiB synthetic checkpoint vs hashing the same file.

add-base hashes the file (the core hasher), inspects it without loading tensor data, and writes
index.json, the card and SHA256SUMS.  Its wall time should be close to the hash alone, and its
peak RSS far below the file size.  Run: ``python bench/bench_add_base.py [--gib 3]``.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from bench_convert import MAKE
from common import child_peak_rss, report

# Each child times its own work after its imports and prints "ELAPSED <seconds>".
ADD_BASE = """
import time
from pathlib import Path
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.init import init_registry
root = init_registry(Path(sys.argv[2])).root
path = Path(sys.argv[1])
start = time.perf_counter()
add_base(root, BaseRequest(path=path, filename=path.name))
print("ELAPSED", time.perf_counter() - start)
"""

HASH = """
import time
from pathlib import Path
from registry.core.hashing import hash_file
start = time.perf_counter()
hash_file(Path(sys.argv[1]))
print("ELAPSED", time.perf_counter() - start)
"""


def elapsed(stdout: str) -> float:
    return float(next(line for line in stdout.splitlines() if line.startswith("ELAPSED")).split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=3.0)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-add-base"))
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    source = args.dir / "rwkv7-synthetic-20261203.pth"
    child_peak_rss(MAKE, str(source), str(args.gib))
    size = source.stat().st_size
    child_peak_rss(HASH, str(source))  # warm the page cache for both
    _, rss_hash, out_hash = child_peak_rss(HASH, str(source))
    _, rss_add, out_add = child_peak_rss(ADD_BASE, str(source), str(args.dir / "reg"))
    t_hash, t_add = elapsed(out_hash), elapsed(out_add)
    report(
        "add-base vs core hasher",
        {
            "file_bytes": size,
            "hash_only_s": round(t_hash, 2),
            "add_base_s": round(t_add, 2),
            "add_base_vs_hash": round(t_add / t_hash, 2),
            "add_base_peak_rss_MiB": rss_add >> 20,
            "add_base_peak_rss_pct_of_file": round(100 * rss_add / size, 1),
            "hash_peak_rss_MiB": rss_hash >> 20,
        },
    )
    shutil.rmtree(args.dir)


if __name__ == "__main__":
    main()
