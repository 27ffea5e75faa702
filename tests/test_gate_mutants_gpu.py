"""The whole gate against deliberately broken kernels (needs a GPU; skipped without CUDA).

Each mutant is a copy of ``kernels/`` with one planted error, built and run by ``registry smoke``
in its own process (torch registers the kernel's op once per process).  Every mutant must fail
``kernel-parity``; the unmodified copy must pass.  A GPU too small for the model gets one line
naming the entry, the card and the memory needed, before anything loads; a card of exactly the
planned size runs the gate, its peak within the plan.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from registry.artifacts.synthetic import TinySpec
from registry.core.repo import Repo
from registry.core.resources import kernel_dir
from registry.gate.memory import plan_gpu

from .test_gate_smoke import state_registry

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SPEC = TinySpec(n_layer=2, n_embd=128, vocab_size=65536, seed=21)
# (what the source says, what the mutant says instead): each a small, plausible kernel bug.
MUTANTS = {
    "unmodified": None,
    "scaled-ab-term": ("sa * sh_b[slot][j]", "1.02f * sa * sh_b[slot][j]"),
    "drifted-state-write-back": ("row[j] = s[j];", "row[j] = 1.01f * s[j];"),
    "wrong-decay": ("__expf(-__expf(static_cast<float>(cur.w)))", "__expf(-1.02f * __expf(static_cast<float>(cur.w)))"),
    "perturbed-k": (
        "sh_k[slot][i] = static_cast<float>(cur.k);",
        "sh_k[slot][i] = 1.003f * static_cast<float>(cur.k);",
    ),
}
# Runs the gate with the kernel sources taken from argv[1] instead of the installed ones.
GATE_WITH_SOURCES = """
import json, sys
from pathlib import Path
import registry.gate.kernel as kernel
kernel.kernel_dir = lambda: Path(sys.argv[1])
if len(sys.argv) > 5:
    import torch
    torch.cuda.set_per_process_memory_fraction(float(sys.argv[5]))
from registry.core.errors import RegistryError
from registry.ops.smoke import smoke
try:
    receipts = smoke(Path(sys.argv[2]), [sys.argv[3]], Path(sys.argv[4]), "cuda")
    print(json.dumps({"receipts": [r.model_dump(mode="json") for r in receipts]}))
except RegistryError as err:
    print(json.dumps({"error": err.problem.as_dict(), "exit": err.exit_code}))
"""


@pytest.fixture(scope="module")
def gate_registry(tmp_path_factory):
    root, base, entry = state_registry(tmp_path_factory.mktemp("mutants"), SPEC, "rwkv7-mutants-20260101")
    return root, base, entry.path


def _sources(tmp_path: Path, mutation: tuple[str, str] | None) -> Path:
    sources = tmp_path / "kernels"
    shutil.copytree(kernel_dir(), sources)
    if mutation:
        cu = sources / "wkv7_fwd.cu"
        text = cu.read_text()
        assert text.count(mutation[0]) == 1, f"the mutation's target is not in the kernel once: {mutation[0]}"
        cu.write_text(text.replace(mutation[0], mutation[1]))
    return sources


def _gate(sources: Path, root: Path, entry: str, base: Path, tmp_path: Path, *extra: str) -> dict:
    # Only our kernel's cache is per test (each mutant is its own build). The user's cache stays:
    # torch keeps the rwkv package's JIT builds there too (under XDG_CACHE_HOME), and a private one
    # per test would rebuild them (about a minute each) in every process.
    # The kernel check's reference runs on CPU: with every parallel test process starting one torch
    # thread per core, their spinning threads starve each other (minutes instead of a second).
    env = {**os.environ, "RWKV_REGISTRY_KERNEL_CACHE": str(tmp_path / "kcache"), "OMP_NUM_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", GATE_WITH_SOURCES, str(sources), str(root), entry, str(base), *extra],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_every_planted_kernel_bug_fails_the_gate(gate_registry, tmp_path, mutant):
    root, base, entry = gate_registry
    [receipt] = _gate(_sources(tmp_path, MUTANTS[mutant]), root, entry, base, tmp_path)["receipts"]
    failed = [c["name"] for c in receipt["checks"] if not c["passed"]]
    if MUTANTS[mutant] is None:
        assert receipt["passed"], failed
        # the State's smoke sample ran on our kernel in its method's default format (g1k)
        sample = receipt["sample"]
        assert (sample["format"], sample["format_from"], len(sample["first_tokens"])) == ("g1k", "default", 16)
    else:
        assert not receipt["passed"] and "kernel-parity" in failed, receipt["checks"][0]


def _plan(root: Path, base: Path):
    [registered] = Repo.open(root).load_index().bases
    return plan_gpu("", 0, base.stat().st_size, registered.architecture)


def test_a_gpu_too_small_is_refused_in_one_line_before_loading(gate_registry, tmp_path):
    root, base, entry = gate_registry
    total = torch.cuda.mem_get_info()[1]
    fraction = (_plan(root, base).need - 2**20) / total
    result = _gate(_sources(tmp_path, None), root, entry, base, tmp_path, str(fraction))
    assert result["exit"] == 5 and result["error"]["code"] == "gate.gpu-memory", result
    assert entry in result["error"]["file"] and "GiB" in result["error"]["message"]
    assert torch.cuda.get_device_name(0) in result["error"]["message"]


def test_a_gpu_of_the_planned_size_runs_the_gate_within_the_plan(gate_registry, tmp_path):
    root, base, entry = gate_registry
    plan = _plan(root, base)
    result = _gate(_sources(tmp_path, None), root, entry, base, tmp_path, str(plan.need / torch.cuda.mem_get_info()[1]))
    [receipt] = result["receipts"]
    assert receipt["passed"] and receipt["timings"]["gpu_peak_bytes"] <= plan.need, receipt["timings"]
