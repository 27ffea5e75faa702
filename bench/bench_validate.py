"""``registry validate`` of an unchanged demo registry, as a pre-commit hook runs it, against
``sha256sum -c SHA256SUMS`` on the same tree: wall time from process start to exit and peak RSS.

Run: ``python bench/bench_validate.py [--runs 15] [--registry-bin PATH]``.  It builds the demo
registry once (``registry demo``), runs each command once to warm caches, then ``--runs`` times.
``--registry-bin`` picks the console script to measure (default: the one on PATH; pass a wheel
venv's ``bin/registry``, e.g. the light install without torch, to measure the installed tool).
The demo registry itself is built with this interpreter's ``registry`` (it needs torch).

Target: median <= 0.4 s and peak <= 80 MiB for ``registry validate``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import MIB, report, run_measured


def measure(cmd: list[str], cwd: Path, runs: int) -> dict:
    run_measured(cmd, cwd)  # warm: page cache, compiled templates, stat cache
    samples = [run_measured(cmd, cwd) for _ in range(runs)]
    walls = [s[0] for s in samples]
    return {
        "median_s": round(statistics.median(walls), 3),
        "min_s": round(min(walls), 3),
        "max_s": round(max(walls), 3),
        "peak_rss_MiB": round(max(s[1] for s in samples) / MIB, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--registry-bin", default=shutil.which("registry"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        # The demo needs the torch extra; the light install that pre-commit gets can still be measured.
        subprocess.run(
            [sys.executable, "-m", "registry", "demo", str(Path(tmp) / "demo")], check=True, capture_output=True
        )
        root = Path(tmp) / "demo" / "registry"
        files = sum(1 for _ in open(root / "SHA256SUMS"))
        ours = measure([args.registry_bin, "validate"], root, args.runs)
        peer = measure(["sha256sum", "--quiet", "-c", "SHA256SUMS"], root, args.runs)
    report(
        f"registry validate vs sha256sum -c, demo registry ({files} files), {args.runs} runs",
        {
            "registry_bin": args.registry_bin,
            "registry_validate": ours,
            "sha256sum_c": peer,
            "wall_ratio_vs_sha256sum": round(ours["median_s"] / peer["median_s"], 1),
            "rss_ratio_vs_sha256sum": round(ours["peak_rss_MiB"] / peer["peak_rss_MiB"], 1),
            "target_met": ours["median_s"] <= 0.4 and ours["peak_rss_MiB"] <= 80,
        },
    )


if __name__ == "__main__":
    main()
