"""The project's WKV CUDA kernel against the reference recurrence (needs a GPU), and the
kernel-build failure path (runs anywhere: without CUDA torch the build fails before nvcc, with
it nvcc reports the broken source; either way the user gets one line naming the log).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from registry.artifacts.synthetic import TinySpec, make_base_state_dict
from registry.core.errors import RegistryError
from registry.core.resources import kernel_dir
from registry.gate.kernel import (
    BUILD_LOG,
    KERNEL_SOURCES,
    PARITY_CASES,
    build_kernel,
    kernel_source_hash,
    parity_check,
    wkv7,
)
from registry.gate.reference import make_wkv7_inputs
from registry.gate.runtime import Rwkv7

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built():
    return build_kernel()


def run_steps(inputs, state, start: int = 0, stop: int | None = None):
    """The kernel over timesteps [start, stop) of the inputs, carrying ``state`` in place."""
    return wkv7(*(t[:, start:stop].contiguous() for t in inputs), state)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
class TestKernelOnGpu:
    @pytest.mark.parametrize("case", PARITY_CASES, ids=lambda case: "{}-B{}-T{}-H{}".format(*case))
    def test_kernel_matches_reference(self, built, case):
        result = parity_check(*case, seed=7)
        assert result["ok"], result

    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
    def test_state_carried_across_chunks_equals_one_run(self, built, dtype):
        inputs, state = make_wkv7_inputs(2, 100, 2, dtype=dtype, device="cuda", seed=1)
        y_whole, state_whole = run_steps(inputs, state.clone())
        carried = state.clone()
        y_head, _ = run_steps(inputs, carried, 0, 37)
        y_tail, returned = run_steps(inputs, carried, 37)
        assert returned is carried
        assert torch.equal(torch.cat((y_head, y_tail), 1), y_whole)
        assert torch.equal(carried, state_whole)

    def test_batch_rows_are_independent(self, built):
        inputs, state = make_wkv7_inputs(4, 50, 3, dtype=torch.bfloat16, device="cuda", seed=2)
        y, final = wkv7(*inputs, state.clone())
        for e in range(4):
            y_one, final_one = wkv7(*(t[e : e + 1].contiguous() for t in inputs), state[e : e + 1].clone())
            assert torch.equal(y[e : e + 1], y_one) and torch.equal(final[e : e + 1], final_one)

    def test_empty_sequence_keeps_the_state(self, built):
        inputs, state = make_wkv7_inputs(1, 0, 2, device="cuda")
        y, final = wkv7(*inputs, state.clone())
        assert y.shape == (1, 0, 128) and torch.equal(final, state)

    def test_op_checks_its_inputs(self, built):
        (r, w, k, v, a, b), state = make_wkv7_inputs(1, 8, 2, device="cuda")
        op = torch.ops.rwkv_registry.wkv7_forward
        strided_k = torch.cat((k, k), dim=-1)[..., : k.shape[-1]]
        with pytest.raises(RuntimeError, match="k must be contiguous"):
            op(r, w, strided_k, v, a, b, state)
        with pytest.raises(RuntimeError, match="Half"):
            op(*(t.half() for t in (r, w, k, v, a, b)), state)
        with pytest.raises(RuntimeError, match="state must be float32"):
            op(r, w, k, v, a, b, state.double())
        with pytest.raises(RuntimeError, match="state must be a CUDA tensor"):
            op(r, w, k, v, a, b, state.cpu())
        with pytest.raises(ValueError, match="state must be"):
            wkv7(r, w, k, v, a, b, state[:, :1].clone())

    def test_op_refuses_a_misshaped_state_without_crashing(self, built):
        # In a child process: this check once segfaulted the interpreter (see wkv7_binding.cpp).
        probe = (
            "import sys, torch; from registry.gate.kernel import build_kernel; build_kernel(cache_root=sys.argv[1]); "
            "x = torch.zeros(1, 4, 128, device='cuda'); "
            "torch.ops.rwkv_registry.wkv7_forward(x, x, x, x, x, x, torch.zeros(1, 1, 64, 64, device='cuda'))"
        )
        proc = subprocess.run(
            [sys.executable, "-c", probe, str(built.directory.parent)], capture_output=True, text=True, cwd=REPO_ROOT
        )
        assert proc.returncode == 1 and "state must be [B, H, 64, 64]" in proc.stderr, proc.stderr[-2000:]

    def test_runtime_on_cuda_matches_the_cpu_reference_path(self, built):
        tensors = make_base_state_dict(TinySpec(n_layer=2, n_embd=128))
        prompt = [1, 5, 300, 7, 9000, 12]
        want, want_state = Rwkv7(tensors, wkv="reference").forward(prompt)
        got, state = Rwkv7(tensors, device="cuda", wkv="kernel").forward(prompt)
        assert (got.cpu() - want).abs().max().item() <= 1e-4
        got_next, _ = Rwkv7(tensors, device="cuda", wkv="kernel").forward([42], state)
        want_next, _ = Rwkv7(tensors, wkv="reference").forward([42], want_state)
        assert (got_next.cpu() - want_next).abs().max().item() <= 1e-4
        bf16, _ = Rwkv7(tensors, dtype=torch.bfloat16, device="cuda").forward(prompt)
        assert (bf16.float().cpu() - want).abs().max().item() < 0.05 * want.abs().max().item()

    def test_second_build_is_cached(self, built):
        assert build_kernel().cached
        probe = (
            "import json, sys; from registry.gate.kernel import build_kernel; b = "
            "build_kernel(cache_root=sys.argv[1]); print(json.dumps([b.key, b.cached, b.seconds]))"
        )
        proc = subprocess.run(
            [sys.executable, "-c", probe, str(built.directory.parent)], capture_output=True, text=True, cwd=REPO_ROOT
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        key, cached, seconds = json.loads(proc.stdout.splitlines()[-1])
        assert (key, cached) == (built.key, True) and seconds < 10
        assert built.source_hash == kernel_source_hash()


def test_build_failure_names_the_log(tmp_path):
    broken = tmp_path / "kernels"
    broken.mkdir()
    for name in KERNEL_SOURCES:  # a missing include stops both compilers at once
        (broken / name).write_text('#include "wkv7_deliberately_missing.h"\n' + (kernel_dir() / name).read_text())
    with pytest.raises(RegistryError) as caught:
        build_kernel(source_dir=broken, cache_root=tmp_path / "cache")
    error = caught.value
    log = Path(error.file)
    assert error.code == "gate.kernel-build" and log.name == BUILD_LOG and log.parent.parent == tmp_path / "cache"
    assert "\n" not in error.one_line() and "fix:" in error.one_line()
    text = log.read_text()
    assert str(broken / KERNEL_SOURCES[0]) in text
    if torch.cuda.is_available():  # CUDA torch: cpp_extension got as far as the compilers
        assert "wkv7_deliberately_missing.h" in text
