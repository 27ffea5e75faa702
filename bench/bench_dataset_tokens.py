"""The content checks of a rows.jsonl (issue #46), against coreutils ``sha256sum`` of the same file.

Generates (at bench time, in ``--dir``, never committed) a seed-002-shaped rows.jsonl of about
``--gb`` GB: rows of about 16,000 characters (seed 002's longer rows, thousands of tokens each),
each ending in ``\\n\\nUser:``, with families by the split rule.  Then, each in a fresh process with
its peak RSS (VmHWM), the file warm in the page cache:

* ``tokenize``: the pass :func:`registry.dataset.rows.read_rows` makes with the content checks'
  observer (:class:`registry.dataset.content.VersionContent`): every row parsed, its stop text,
  family and split rule checked, tokenized with the rwkv World tokenizer, every loss-span boundary
  checked against its tokens; the token cache empty;
* ``cached``: the same pass again, the token results found in the cache (HMAC checked): what an
  unchanged file costs when a version's statements change;

and ``sha256sum`` of the file.  Run: ``python bench/bench_dataset_tokens.py [--gb 1] [--dir /tmp/bench-tokens]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

from common import GIB, MIB, child_peak_rss, report, run_timed

from registry.core.hashing import hash_file
from registry.dataset.synthetic import VersionSpec, line, row

ROW_CHARS = 16_000

CHECK = """
import json
from pathlib import Path
from registry.dataset.content import TokenCache, VersionContent
from registry.dataset.models import DataVersion
from registry.dataset.rows import read_rows
path, version = Path(sys.argv[1]), DataVersion.model_validate_json(sys.argv[2])
sha, cache = sys.argv[3], Path(sys.argv[4])
content = VersionContent(version, TokenCache(cache))
rows = read_rows(path, "rows.jsonl", version.wire, keep=False, observe=content.split("train", "rows.jsonl", sha))
problems = rows.report.findings() + content.findings()
content.remember()
stats = content.tokens["train"][1]
print("PROBLEMS", len(problems), [p.one_line() for p in problems[:3]])
print("TOKENS", sum(t * n for t, n in stats.histogram.items()), stats.maximum)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="about how many GB the rows file holds")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-tokens"))
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    os.environ["XDG_CONFIG_HOME"] = str(args.dir / "config")  # the cache's key: this bench's own, not the user's
    spec = VersionSpec(
        "v2.1",
        "full",
        train_rows=0,
        validation_rows=0,
        trained_name="segments-shuffled.jsonl",
        row_chars=ROW_CHARS,
        dropped_rows=0,
        token_stats=False,
    )
    path = args.dir / "rows.jsonl"
    rows = 0
    with open(path, "wb") as handle:
        while handle.tell() < args.gb * 1e9:
            handle.write(line(row(spec, "train", rows)))
            rows += 1
    size = path.stat().st_size
    version = {
        "version": "v2.1",
        "date": "2026-10-18",
        "thinking": "full",
        "profile": "g1k-think",
        "teachers": ["Qwen3.7-Flash"],
        "trained_file": {"path": "dataset/train/rows.jsonl", "sha256": "0" * 64, "size": size},
        "train_rows": rows,
        "validation_rows": 0,
        "wire": {"canonical": spec.wire_canonical, "hash": row(spec, "train", 0)["meta"]["wire_hash"]},
        "vocabulary": "rwkv_vocab_v20230424.txt",
        "stop_text": "\n\nUser:",
        "context": 8128,
        "family_key": spec.family_key,
        "split_rule": spec.split_rule,
    }
    sha = hash_file(path)
    run_timed(["sha256sum", str(path)])  # warm the page cache for every reader
    t_sha = min(run_timed(["sha256sum", str(path)]) for _ in range(2))
    cache = args.dir / "dataset-tokens.json"
    t_cold, rss_cold, out_cold = child_peak_rss(CHECK, str(path), json.dumps(version), sha, str(cache))
    assert "PROBLEMS 0" in out_cold, out_cold
    tokens = int(next(x for x in out_cold.splitlines() if x.startswith("TOKENS")).split()[1])
    t_warm, rss_warm, out_warm = child_peak_rss(CHECK, str(path), json.dumps(version), sha, str(cache))
    assert "PROBLEMS 0" in out_warm and f"TOKENS {tokens}" in out_warm, out_warm
    gb = size / 1e9
    report(
        "rows.jsonl: content checks (tokenized) vs sha256sum",
        {
            "rows_bytes": size,
            "rows": rows,
            "tokens": tokens,
            "cpus": os.cpu_count(),
            "load_average": [round(x, 1) for x in os.getloadavg()],
            "sha256sum_s": round(t_sha, 2),
            "sha256sum_s_per_GB": round(t_sha / gb, 2),
            "tokenize_s": round(t_cold, 2),
            "tokenize_s_per_GB": round(t_cold / gb, 1),
            "tokenize_MBps": round(size / t_cold / 1e6, 2),
            "tokenize_vs_sha256sum": round(t_cold / t_sha, 1),
            "tokenize_peak_rss_MiB": round(rss_cold / MIB, 1),
            "cached_s": round(t_warm, 2),
            "cached_s_per_GB": round(t_warm / gb, 1),
            "cached_vs_sha256sum": round(t_warm / t_sha, 1),
            "cached_peak_rss_MiB": round(rss_warm / MIB, 1),
            "rows_GiB": round(size / GIB, 3),
        },
    )
    shutil.rmtree(args.dir)


if __name__ == "__main__":
    main()
