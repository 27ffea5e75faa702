"""Checking a data version's three row forms, against coreutils ``sha256sum`` of the same files.

Builds a seed-002-shaped version folder of about ``--gb`` GB in ``--dir`` (generated at bench time,
never committed: rows.jsonl, segments.jsonl, the shuffled segments file, train.jsonl per split, and
the packing input), then measures, each in a fresh process with its peak RSS (VmHWM):

* ``check``: :func:`registry.dataset.versions.version_problems` alone (every row parsed, spans and
  wire hash checked, segments and text multisets compared), the files warm in the page cache;
* ``add``: ``registry dataset add`` into a new dataset registry (copy + hash + check + commit);
* ``validate``: ``registry validate`` of that registry, stat cache removed (hash + check), then
  again unchanged (what the pre-commit hook pays on the next commit: stat cache, checked versions);

and ``sha256sum`` of the version's files (warm).  Then ``check`` again on a version of many short
rows (``--many-rows``), whose peak RSS over the first one's gives the memory a row costs (the row
digests are the only thing that grows).
Run: ``python bench/bench_dataset.py [--gb 1] [--many-rows 400000] [--dir /tmp/bench-dataset]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from common import GIB, MIB, child_peak_rss, report, run_timed

from registry.dataset.synthetic import VersionSpec, build_version

ROW_CHARS = 16_000  # about seed 002's longer rows (up to 8128 tokens)
BYTES_PER_TRAIN_ROW = 95_000  # rows + segments + shuffled + train.jsonl + packing input, measured at ROW_CHARS


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


CHECK = """
from pathlib import Path
from registry.dataset.models import DatasetIndex
from registry.dataset.versions import version_problems
from registry.core.hashing import hash_file
folder, index = Path(sys.argv[1]), DatasetIndex.model_validate_json(Path(sys.argv[2]).read_text())
version = index.versions[0]
rels = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
files = {rel: version.trained_file.sha256 if rel == version.trained_file.path else "" for rel in rels}
files = {rel: sha or "0" * 64 for rel, sha in files.items()}
problems = [p for p in version_problems(version, files, folder.joinpath) if p.code != "version.manifest-mismatch"]
print("PROBLEMS", len(problems), [p.one_line() for p in problems[:3]])
"""

ADD = """
from pathlib import Path
from registry.ops.dataset_add import VersionRequest, add_version
from registry.ops.dataset_init import init_dataset
from datetime import date
import json
request = json.loads(sys.argv[2])
root = init_dataset(Path(sys.argv[1])).root
add_version(root, VersionRequest(**{**request, "source": Path(request["source"]), "date": date(2026, 10, 18)}))
"""

VALIDATE = """
from pathlib import Path
from registry.ops.validate import validate
problems = validate(Path(sys.argv[1]))
print("PROBLEMS", len(problems))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="about how many GB the version folder holds")
    parser.add_argument(
        "--many-rows", type=int, default=400_000, help="train rows of the short-row version (memory per row)"
    )
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-dataset"))
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    train = max(10, int(args.gb * 1e9 / BYTES_PER_TRAIN_ROW))
    spec = VersionSpec(
        "v2.1",
        "full",
        train_rows=train,
        validation_rows=max(2, train // 40),
        trained_name="segments-shuffled.jsonl",
        row_chars=ROW_CHARS,
        dropped_rows=0,
        token_stats=False,
    )
    built = build_version(args.dir / "final-20261018", spec)
    size = folder_bytes(built.folder)
    files = sorted(str(p) for p in built.folder.rglob("*") if p.is_file())
    request = {
        "source": str(built.folder),
        "version": spec.version,
        "thinking": spec.thinking,
        "teachers": ["Qwen3.7-Flash"],
        "trained_file": built.trained_path,
        "trained_sha256": built.trained_sha256,
        "train_rows": spec.train_rows,
        "validation_rows": spec.validation_rows,
        "wire_canonical": spec.wire_canonical,
        "wire_hash": built.wire_hash,
        "vocabulary": "rwkv_vocab_v20230424.txt",
    }
    run_timed(["sha256sum", *files])  # warm the page cache for every reader
    t_sha = min(run_timed(["sha256sum", *files]) for _ in range(2))
    registry = args.dir / "distill"
    t_add, rss_add, _ = child_peak_rss(ADD, str(registry), json.dumps(request))
    index = registry / "index.json"
    t_check, rss_check, out_check = child_peak_rss(CHECK, str(registry / "v2.1"), str(index))
    assert "PROBLEMS 0" in out_check, out_check
    shutil.rmtree(built.folder)  # the registry's copy is what is read from here on
    (registry / ".registry" / "statcache.json").unlink(missing_ok=True)
    t_validate, rss_validate, out_validate = child_peak_rss(VALIDATE, str(registry))
    assert "PROBLEMS 0" in out_validate, out_validate
    t_again, rss_again, out_again = child_peak_rss(VALIDATE, str(registry))
    assert "PROBLEMS 0" in out_again, out_again
    rows = spec.train_rows + spec.validation_rows
    report(
        "dataset version: three row forms checked vs sha256sum",
        {
            "version_bytes": size,
            "version_files": len(files),
            "rows": rows,
            "sha256sum_s": round(t_sha, 2),
            "check_s": round(t_check, 2),
            "check_MBps": round(size / t_check / 1e6, 1),
            "check_vs_sha256sum": round(t_sha / t_check, 2),
            "check_peak_rss_MiB": round(rss_check / MIB, 1),
            "add_s": round(t_add, 2),
            "add_vs_sha256sum": round(t_sha / t_add, 2),
            "add_peak_rss_MiB": round(rss_add / MIB, 1),
            "validate_uncached_s": round(t_validate, 2),
            "validate_vs_sha256sum": round(t_sha / t_validate, 2),
            "validate_peak_rss_MiB": round(rss_validate / MIB, 1),
            "revalidate_unchanged_s": round(t_again, 2),
            "revalidate_unchanged_peak_rss_MiB": round(rss_again / MIB, 1),
            "version_GiB": round(size / GIB, 2),
        },
    )
    shutil.rmtree(args.dir)
    args.dir.mkdir()
    many = VersionSpec(
        "v1.41",
        "off",
        train_rows=args.many_rows,
        validation_rows=2,
        trained_name="segments-1-41.jsonl",
        row_chars=60,
        dropped_rows=0,
        token_stats=False,
    )
    short = build_version(args.dir / "final-20261013", many)
    many_registry = args.dir / "distill"
    child_peak_rss(
        ADD,
        str(many_registry),
        json.dumps(
            {
                **request,
                "source": str(short.folder),
                "version": many.version,
                "thinking": many.thinking,
                "trained_file": short.trained_path,
                "trained_sha256": short.trained_sha256,
                "train_rows": many.train_rows,
                "validation_rows": many.validation_rows,
                "wire_canonical": many.wire_canonical,
                "wire_hash": short.wire_hash,
            }
        ),
    )
    t_many, rss_many, out_many = child_peak_rss(CHECK, str(many_registry / "v1.41"), str(many_registry / "index.json"))
    assert "PROBLEMS 0" in out_many, out_many
    report(
        "memory per row: check of a version of short rows",
        {
            "rows": many.train_rows + many.validation_rows,
            "version_bytes": folder_bytes(short.folder),
            "check_s": round(t_many, 2),
            "check_peak_rss_MiB": round(rss_many / MIB, 1),
            "bytes_per_row_over_the_long_row_check": round(
                (rss_many - rss_check) / (many.train_rows + many.validation_rows - rows)
            ),
        },
    )
    shutil.rmtree(args.dir)


if __name__ == "__main__":
    main()
