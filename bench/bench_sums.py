"""SHA256SUMS hashing vs coreutils ``sha256sum`` on the same data, and re-validate with/without
the stat cache.  Prints ratios; run: ``python bench/bench_sums.py [--dir /tmp/bench-sums] [--small]``.

Targets (2-core machine): >= 3x sha256sum on one 2 GiB file, >= 1.7x from hashing two files at
once (8 x 256 MiB, engine with 1 vs 2 workers), unchanged 4 GiB re-validate < 0.5 s.
Both tools read the files warm from the page cache (each is run once first).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from common import GIB, MIB, report, run_timed, timed, write_random_file

from registry.core.hashing import hash_file, hash_files
from registry.ops.init import init_registry
from registry.ops.sums import write_sums
from registry.ops.validate import validate


def bench_one_file(directory: Path, size: int) -> dict:
    big = write_random_file(directory / "one.bin", size)
    hash_file(big)  # warm the page cache for both sides
    t_core, _ = timed(hash_file, big)
    t_coreutils = run_timed(["sha256sum", str(big)])
    big.unlink()
    return {
        "bytes": size,
        "registry_s": round(t_core, 3),
        "sha256sum_s": round(t_coreutils, 3),
        "registry_GBps": round(size / t_core / 1e9, 2),
        "ratio_vs_sha256sum": round(t_coreutils / t_core, 2),
    }


def bench_many_files(directory: Path, count: int, size: int) -> dict:
    files = [write_random_file(directory / f"part{i}.bin", size) for i in range(count)]
    hash_files(files, workers=2)
    t_one, _ = timed(hash_files, files, workers=1)
    t_two, _ = timed(hash_files, files, workers=2)
    t_coreutils = run_timed(["sha256sum", *map(str, files)])
    for f in files:
        f.unlink()
    return {
        "files": count,
        "bytes_each": size,
        "1_worker_s": round(t_one, 3),
        "2_workers_s": round(t_two, 3),
        "parallel_speedup": round(t_one / t_two, 2),
        "ratio_vs_sha256sum": round(t_coreutils / t_two, 2),
    }


def bench_revalidate(directory: Path, total: int) -> dict:
    root = init_registry(directory / "reg").root
    pieces = 4
    for i in range(pieces):
        write_random_file(root / f"blob{i}.bin", total // pieces)
    old = time.time() - 60  # older than the cache's racy window, like any settled tree
    for i in range(pieces):
        os.utime(root / f"blob{i}.bin", (old, old))
    write_sums(root)
    validate(root)  # fills the stat cache
    t_cached, findings = timed(validate, root)
    (root / ".registry" / "statcache.json").unlink()
    t_uncached, _ = timed(validate, root)
    return {
        "tree_bytes": total,
        "stray_findings": len(findings),
        "revalidate_cached_s": round(t_cached, 3),
        "revalidate_uncached_s": round(t_uncached, 3),
        "cache_speedup": round(t_uncached / t_cached, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-sums"))
    parser.add_argument("--small", action="store_true", help="1/16 of the sizes, for a quick look")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    scale = 16 if args.small else 1
    report("one file vs sha256sum", bench_one_file(args.dir, 2 * GIB // scale))
    report("8 files, 1 vs 2 workers", bench_many_files(args.dir, 8, 256 * MIB // scale))
    report("re-validate unchanged tree", bench_revalidate(args.dir / f"rv{time.time_ns()}", 4 * GIB // scale))


if __name__ == "__main__":
    main()
