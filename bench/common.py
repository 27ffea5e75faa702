"""Helpers shared by the benchmark scripts: timing, peak RSS of a child, synthetic data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def timed(func, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = func(*args, **kwargs)
    return time.perf_counter() - start, result


def run_timed(cmd: list[str], **kwargs) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kwargs)
    return time.perf_counter() - start


def run_measured(cmd: list[str], cwd: Path | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one run of ``cmd``; wait4 gives this child's own rusage."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(
            f"{' '.join(cmd)} "
            f"failed{f' in {cwd}' if cwd else ''}:"
            f" {proc.stderr.read().decode()[-500:] if proc.stderr else ''}"
        )
    return elapsed, usage.ru_maxrss * 1024


# Ends with os._exit, as the ``registry`` entry point does (registry.cli.run): no torch teardown.
PEAK_PROBE = """
print('PEAK', next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')), flush=True)
import os
os._exit(0)
"""


def child_peak_rss(code: str, *args: str) -> tuple[float, int, str]:
    """Run ``python -c code args`` in a fresh process; return (seconds, peak RSS bytes, stdout).

    The seconds are the whole process's, from start to exit (which skips the teardown).
    The peak is the child's own VmHWM: getrusage's ru_maxrss is inherited across fork+exec on
    Linux, so a child of a large parent would report the parent's peak.
    """
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", "import sys\n" + code + PEAK_PROBE, *args],
        cwd=Path(__file__).resolve().parent,
        check=True,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    peak_kib = int(next(line for line in proc.stdout.splitlines() if line.startswith("PEAK")).split()[1])
    return elapsed, peak_kib * 1024, proc.stdout


def write_random_file(path: Path, size: int, chunk: int = 64 << 20) -> Path:
    with open(path, "wb") as handle:
        left = size
        while left:
            n = min(chunk, left)
            handle.write(os.urandom(n))
            left -= n
    return path


def report(title: str, rows: dict) -> None:
    print(f"== {title}")
    print(json.dumps(rows, indent=2))


GIB = 1 << 30
MIB = 1 << 20
