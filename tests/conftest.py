"""Shared fixtures: tiny RWKV-7 artifacts built at test time (no weights are committed)."""

from __future__ import annotations

import gc
import hashlib
import os
from pathlib import Path

import pytest
import torch

from registry.artifacts.synthetic import TinySpec, make_base_checkpoint
from registry.ops.init import init_registry

# fla's kernels are Triton kernels: without CUDA the tests run them in Triton's interpreter, on CPU
# tensors (tests/test_export_hf_fla.py). Triton reads this when fla's kernels are defined, at import.
TEST_ONLY_ENVIRONMENT = {"TRITON_INTERPRET": "1"} if not torch.cuda.is_available() else {}
os.environ.update(TEST_ONLY_ENVIRONMENT)


def user_environment() -> dict[str, str]:
    """This process's environment without what the tests set for themselves: for a subprocess that
    runs the tool as a user would."""
    return {k: v for k, v in os.environ.items() if k not in TEST_ONLY_ENVIRONMENT}


# Small enough to build in milliseconds; vocab 65536 only where a tokenizer is involved.
SMALL = TinySpec(n_layer=2, n_embd=128, vocab_size=512)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root except the tool's private folder, for byte-identity assertions."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(Path(root).rglob("*"))
        if p.is_file() and not p.is_symlink() and ".registry" not in p.relative_to(root).parts
    }


@pytest.fixture(scope="session", autouse=True)
def receipt_key_home(tmp_path_factory):
    """The gate's receipt key (registry/gate/seal.py) in a folder of this session's, never the
    user's ~/.config; set in the environment, so the tool run as a subprocess uses it too.  The
    user cache likewise (``$XDG_CACHE_HOME``: the file-hash cache, the gate's tokenizer, compiled
    templates): what a test finds there is what this session put there, not what another checkout
    or an earlier run left in ~/.cache, so a test that counts what a command writes counts the same
    on every machine."""
    folders = {"XDG_CONFIG_HOME": tmp_path_factory.mktemp("config"), "XDG_CACHE_HOME": tmp_path_factory.mktemp("cache")}
    before = {name: os.environ.get(name) for name in folders}
    os.environ.update({name: str(path) for name, path in folders.items()})
    yield folders["XDG_CONFIG_HOME"]
    for name, value in before.items():
        if value is None:
            del os.environ[name]
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def small_base(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("bases")
    return make_base_checkpoint(directory / "rwkv7-tiny-a-20260101.pth", SMALL)


@pytest.fixture
def empty_registry(tmp_path) -> Path:
    return init_registry(tmp_path / "reg").root


# pytest-xdist hands tests out in the order they were collected, and a long test handed out last
# keeps one worker busy while the other idles.  The files whose tests run longest (`--durations`,
# docs/benchmarks.md "The test line") are collected first, longest first; each file's tests stay
# together and in their order, so its module-scoped fixtures are still built once per worker.
LONGEST_FIRST = (
    "test_crash.py",
    "test_wheel.py",
    "test_demo.py",
    "test_export_hf_fla.py",
    "test_dataset_adopt.py",
    "test_gguf.py",
    "test_sign.py",
    "test_adopt_seeds.py",
    "test_export_hf.py",
    "test_gate_smoke.py",
)


def pytest_configure(config: pytest.Config) -> None:
    # Each xdist worker gets its share of the cores for torch's thread pool, and so does the tool it
    # runs as a subprocess (through the environment).  With the default, every worker's pool takes
    # every core and spins while another worker holds them: tests/test_gate_smoke.py took 117 s
    # beside a second copy of itself and 32 s with a core each (2026-12-07, 2 cores).
    # A value the user set is theirs: torch read it at import.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        share = max(1, len(os.sched_getaffinity(0)) // workers)
        os.environ["OMP_NUM_THREADS"] = str(share)
        torch.set_num_threads(share)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_collection_finish(session: pytest.Session) -> None:
    # A worker's heap grows to millions of objects (torch, transformers, fla, the TRIE tokenizer's
    # 116k nodes), and each full collection walks all of it: 34-38 of them, 26-33 s a worker
    # (2026-12-07).  What collecting imported lives as long as the worker and is frozen out of the
    # collector's reach; a full collection comes after 100 young ones, not 10 (the young ones still
    # free short-lived cycles): 10-14 s a worker, peak RSS 2.0-2.2 GB a worker.
    gc.freeze()
    gc.set_threshold(700, 10, 100)
