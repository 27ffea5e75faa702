"""What the proofs of issue 31 cost: the Xet file hash against sha256, and ``registry sign``.

1. One 1 GiB random file, warm in the page cache: the registry's sha256 (``hash_file``, the peer)
   against hf_xet's Xet file hash (``hash_files``, what verification computes for each file whose
   tree entry carries a ``xetHash``; cached per file afterwards), in one run.
2. ``registry sign`` on a registry holding a ~1.1 GiB weight, and on one holding a ~35 MB one: it
   signs from SHA256SUMS (the stat cache vouches for the files), so its time should not grow with
   the weight.  Peer: the stock ``model_signing sign key`` CLI on the same registry, which reads
   and hashes every file.

Run: ``python bench/bench_xet.py [--dir /tmp/bench-xet]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from common import GIB, child_peak_rss, report, run_timed, timed, write_random_file
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from registry.core.hashing import hash_file
from registry.core.hashing.xet import hash_xet_files
from registry.core.names import UNSIGNED
from registry.ops.add import AddRequest, add_weight
from registry.ops.add_base import BaseRequest, add_base
from registry.ops.init import init_registry
from registry.ops.sign import sign
from registry.ops.validate import validate


def bench_hashes(directory: Path) -> dict:
    path = write_random_file(directory / "one.bin", GIB)
    hash_file(path)  # warm the page cache for both
    t_sha, _ = timed(hash_file, path)
    t_xet, _ = timed(hash_xet_files, [path])
    path.unlink()
    return {
        "bytes": GIB,
        "sha256_s": round(t_sha, 3),
        "sha256_GBps": round(GIB / t_sha / 1e9, 2),
        "xet_s": round(t_xet, 3),
        "xet_GBps": round(GIB / t_xet / 1e9, 2),
        "xet_time_vs_sha256": round(t_xet / t_sha, 2),
    }


# A random bf16 RWKV-7 checkpoint of the given shape, made in a child (torch's memory is not the bench's).
MAKE = """
from pathlib import Path
from registry.artifacts.synthetic import TinySpec, make_base_checkpoint
make_base_checkpoint(Path(sys.argv[1]), TinySpec(n_layer=int(sys.argv[2]), n_embd=int(sys.argv[3])))
"""
SHAPES = {"small": (2, 256), "big": (6, 2048)}  # about 35 MB and 1.09 GiB in bf16


def _registry(directory: Path, shape: tuple[int, int]) -> Path:
    """A registry holding one full fine-tune of the given shape (bases are recorded, not held)."""
    base, full = directory / "rwkv7-synthetic-20261206.pth", directory / "full.pth"
    child_peak_rss(MAKE, str(base), *map(str, shape))
    shutil.copyfile(base, full)
    with open(full, "r+b") as handle:  # other bytes than the base's: flip one bit in the middle of the tensor data
        handle.seek(full.stat().st_size // 2)
        byte = handle.read(1)[0]
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte ^ 1]))
    train = directory / "train.json"
    train.write_text(
        json.dumps(
            {
                "trainer": {"name": "rwkv_full_tune", "version": "1.0"},
                "hyperparameters": {"lr_init": 1e-5},
                "command": "train",
                "data_sha256": "ab" * 32,
            }
        )
    )
    root = init_registry(directory / "reg").root
    add_base(root, BaseRequest(path=base, filename=base.name))
    add_weight(root, AddRequest(full, base.stem, "full", "v1.0", train, move=True))
    base.unlink()
    old = time.time() - 3600  # older than the stat cache's racy window, like any settled tree
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (old, old))
    validate(root)  # fills the stat cache, as any earlier command has
    return root


def bench_sign(directory: Path, shape: tuple[int, int], key: Path) -> dict:
    directory.mkdir(parents=True)
    root = _registry(directory, shape)
    weight_bytes = max(p.stat().st_size for p in root.rglob("*.pth"))
    t_sign, _ = timed(sign, root, key)
    stock = [
        "model_signing",
        "sign",
        "key",
        str(root),
        "--signature",
        str(directory / "stock.sig"),
        "--private_key",
        str(key),
    ]
    stock += [arg for path in UNSIGNED for arg in ("--ignore-paths", str(root / path))]
    t_stock = run_timed(stock)
    shutil.rmtree(directory)
    return {
        "weight_bytes": weight_bytes,
        "registry_sign_s": round(t_sign, 3),
        "stock_model_signing_sign_s": round(t_stock, 3),
        "stock_vs_registry": round(t_stock / t_sign, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-xet"))
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    key = args.dir / "signer.pem"
    private = ec.generate_private_key(ec.SECP256R1())
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    report("Xet file hash vs sha256, one 1 GiB file (warm)", bench_hashes(args.dir))
    import model_signing._signing.sign_ec_key  # noqa: F401, PLC0415 optional dependency: model_signing (imported once, before any timing)

    small, big = (bench_sign(args.dir / name, SHAPES[name], key) for name in ("small", "big"))
    report(
        "registry sign vs stock model_signing sign key",
        {
            "small": small,
            "big": big,
            "registry_sign_big_vs_small": round(big["registry_sign_s"] / small["registry_sign_s"], 2),
        },
    )
    shutil.rmtree(args.dir)


if __name__ == "__main__":
    main()
