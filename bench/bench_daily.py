"""The daily commands against their yardsticks, in one run (issue #39).

* ``validate``, ``list --json``, ``card --check``, ``sums --check`` on a seed-001-shaped registry
  the stat cache vouches for (files an hour old, each command run once before), against
  ``python -c "import click"`` (target: at most 3×) and, for validate, ``sha256sum -c SHA256SUMS``
  on the same tree; validate with its verdict dropped (every file re-checked from the stat cache)
  too.
* ``add`` of a small State and of a MiSS adapter, and ``adopt`` of a seed-001-shaped repo with
  small weights, against ``python -c "import torch"`` (target: faster, at most 100 MiB peak).

Wall time of the whole process (start to exit) and the child's own peak RSS (``wait4``), median of
``--runs`` runs.  Run: ``python bench/bench_daily.py [--runs 7] [--registry-bin PATH]``
(default: ``python -m registry`` with this interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import MIB, report, run_measured

BASE = "rwkv7-bench-20260101"
# The weights are made in a child: this process stays small, so a child's rusage peak is its own
# (ru_maxrss survives fork and exec: a child of a process that imported torch reports torch's peak).
MAKE_INPUTS = f"""
import hashlib, sys
from pathlib import Path
from registry.artifacts.synthetic import TinySpec, make_adapter_file, make_base_checkpoint, make_state_file
spec, folder = TinySpec(n_layer=2, n_embd=128, vocab_size=512), Path(sys.argv[1])
base = make_base_checkpoint(folder / "{BASE}.pth", spec)
make_state_file(folder / "s1.pth", spec)
make_state_file(folder / "s2.pth", spec, seed=2)
make_adapter_file(folder / "adapter-final.pth", spec, hashlib.sha256(base.read_bytes()).hexdigest(), rank=8)
"""


def measure(cmd: list[str], runs: int, before: Callable[[], None] = lambda: None, cwd: Path | None = None) -> dict:
    samples = []
    for _ in range(runs):
        before()
        samples.append(run_measured(cmd, cwd))
    walls = [s[0] for s in samples]
    return {
        "median_s": round(statistics.median(walls), 3),
        "min_s": round(min(walls), 3),
        "peak_rss_MiB": round(max(s[1] for s in samples) / MIB, 1),
    }


def age(root: Path) -> None:
    an_hour_ago = time.time() - 3600
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            os.utime(path, (an_hour_ago, an_hour_ago))


def train_json(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "trainer": {"name": "rwkv_state_tune", "version": "1.8.1"},
                "hyperparameters": {"lr_init": 0.01},
                "command": "rwkv_state_tune",
                "data_sha256": "ab" * 32,
            }
        )
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--registry-bin", help="the console script to measure (default: python -m registry)")
    args = parser.parse_args()
    registry = [args.registry_bin] if args.registry_bin else [sys.executable, "-m", "registry"]
    with tempfile.TemporaryDirectory(prefix="bench-daily-") as tmp:
        work = Path(tmp)
        inputs = work / "inputs"
        inputs.mkdir()
        subprocess.run([sys.executable, "-c", MAKE_INPUTS, str(inputs)], check=True)
        base = inputs / f"{BASE}.pth"
        train = train_json(inputs / "train.json")

        def add(reg: Path, file: str, method: str, *extra: str) -> list[str]:
            return [
                *registry,
                "add",
                str(inputs / file),
                "-C",
                str(reg),
                "--base",
                BASE,
                "--method",
                method,
                "--data-version",
                "v1.41",
                "--train-json",
                str(train),
                *extra,
            ]

        # A seed-001-shaped registry: a base, two States, a MiSS adapter.
        reg = work / "reg"
        for cmd in (
            [*registry, "init", str(reg)],
            [*registry, "add-base", str(base), "-C", str(reg)],
            add(reg, "s1.pth", "state"),
        ):
            run_measured(cmd)
        template = work / "template"  # what the writing commands start from
        shutil.copytree(reg, template)
        run_measured(add(reg, "s2.pth", "state"))
        run_measured(add(reg, "adapter-final.pth", "miss", "--run", "r8"))
        age(reg)
        files = sum(1 for _ in open(reg / "SHA256SUMS"))

        click = measure([sys.executable, "-c", "import click"], args.runs)
        torch = measure([sys.executable, "-c", "import torch"], args.runs)
        sha256sum = measure(["sha256sum", "--quiet", "-c", "SHA256SUMS"], args.runs, cwd=reg)
        rows: dict = {
            "registry": " ".join(registry),
            "files": files,
            "python -c 'import click'": click,
            "python -c 'import torch'": torch,
            "sha256sum -c": sha256sum,
        }
        verdict = reg / ".registry" / "verdict.json"
        for name, cmd in (
            ("validate", ["validate"]),
            ("list --json", ["list", "--json"]),
            ("card --check", ["card", "--check"]),
            ("sums --check", ["sums", "--check"]),
        ):
            full = [*registry, *cmd, "-C", str(reg)]
            run_measured(full)  # the run that leaves the verdict
            ours = measure(full, args.runs)
            rows[name] = {
                **ours,
                "ratio_vs_import_click": round(ours["median_s"] / click["median_s"], 2),
                "target_met": ours["median_s"] <= 3 * click["median_s"],
            }
        rows["validate"]["ratio_vs_sha256sum_c"] = round(rows["validate"]["median_s"] / sha256sum["median_s"], 2)
        dropped = measure(
            [*registry, "validate", "-C", str(reg)], args.runs, before=lambda: verdict.unlink(missing_ok=True)
        )
        rows["validate, verdict dropped (stat cache only)"] = {
            **dropped,
            "ratio_vs_import_click": round(dropped["median_s"] / click["median_s"], 2),
            "ratio_vs_sha256sum_c": round(dropped["median_s"] / sha256sum["median_s"], 2),
        }

        # Writing commands, each on a fresh copy of the registry without the weight.
        target = work / "target"

        def fresh(source: Path) -> Callable[[], None]:
            def copy() -> None:
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(source, target)

            return copy

        hand_made = work / "hand-made"
        version = hand_made / BASE / "state" / "v1.41"
        version.mkdir(parents=True)
        for name in ("s1.pth", "s2.pth", "train.json"):
            shutil.copy(inputs / name, version / name)
        (hand_made / "README.md").write_text("# Hand-made\n\nState 推荐\n")
        subprocess.run(
            "find * -type f ! -name SHA256SUMS | sort | xargs sha256sum > SHA256SUMS",
            shell=True,
            cwd=hand_made,
            check=True,
        )
        writing = {
            "add (State, 36 kB)": (add(target, "s2.pth", "state"), fresh(template)),
            "add (MiSS adapter)": (add(target, "adapter-final.pth", "miss", "--run", "r8"), fresh(template)),
            "adopt (seed-001-shaped, 2 States)": (
                [*registry, "adopt", str(target), "--base-file", str(base)],
                fresh(hand_made),
            ),
        }
        for name, (cmd, before) in writing.items():
            ours = measure(cmd, args.runs, before=before)
            rows[name] = {
                **ours,
                "ratio_vs_import_torch": round(ours["median_s"] / torch["median_s"], 2),
                "target_met": ours["median_s"] < torch["median_s"] and ours["peak_rss_MiB"] <= 100,
            }
    report(f"daily commands vs their yardsticks, median of {args.runs} runs", rows)


if __name__ == "__main__":
    main()
