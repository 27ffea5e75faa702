"""tests/interpreted_triton.py on small kernels: what Triton's interpreter computes inside
``as_compiled()`` is what compiled Triton computes (torch's CPU bf16 arithmetic rounds the same way:
in fp32, then to nearest even). Without CUDA only: with it, Triton compiles and no interpreter runs."""

from __future__ import annotations

import pytest
import torch

from .interpreted_triton import as_compiled

pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="Triton compiles with CUDA; the interpreter runs without it"
)

if not torch.cuda.is_available():
    import triton
    import triton.language as tl

    @triton.jit
    def _bf16_arithmetic(a_ptr, b_ptr, c_ptr, wide_ptr, out_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        a, b, c = tl.load(a_ptr + i), tl.load(b_ptr + i), tl.load(c_ptr + i)
        wide = tl.load(wide_ptr + i)
        results = (
            a + b, a - b, a * b, -a, tl.where(a < b, a, b), tl.maximum(a, b), tl.fma(a, b, c),
            wide.to(tl.bfloat16), wide.to(tl.bfloat16, fp_downcast_rounding="rtne"),
        )  # fmt: skip
        for k in tl.static_range(len(results)):
            tl.store(out_ptr + k * N + i, results[k])

    @triton.jit
    def _bf16_dot(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
        rows, cols = tl.arange(0, N)[:, None], tl.arange(0, N)[None, :]
        a, b = tl.load(a_ptr + rows * N + cols), tl.load(b_ptr + rows * N + cols)
        tl.store(out_ptr + rows * N + cols, tl.dot(a, b, out_dtype=tl.float32))

    @triton.jit
    def _loop_indices(out_ptr, n, n64_ptr):
        for i in range(n):
            tl.store(out_ptr + i, i.to(tl.int64) * 3)
        for j in range(tl.load(n64_ptr)):
            tl.static_assert(j.dtype == tl.int64, "an int64 bound gives an int64 index")

    @triton.autotune(configs=[triton.Config({"BLOCK": 8}), triton.Config({"BLOCK": 16})], key=["n"])
    @triton.jit
    def _autotuned_double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int16)


def test_bf16_arithmetic_and_casts_round_as_the_gpu_does():
    n = 1024
    generator = torch.Generator().manual_seed(0)
    scale = torch.logspace(-3, 3, n)  # magnitudes over six decades, both signs
    a, b, c = ((torch.randn(n, generator=generator) * scale).bfloat16() for _ in range(3))
    wide = torch.randn(n, generator=generator) * scale
    out = torch.empty(9, n, dtype=torch.bfloat16)
    with as_compiled():
        _bf16_arithmetic[(1,)](a, b, c, wide, out, n)
    exact_fma = (a.double() * b.double() + c.double()).float().bfloat16()  # rounded twice, as the shim does
    want = [
        a + b,
        a - b,
        a * b,
        -a,
        torch.where(a < b, a, b),
        torch.maximum(a, b),
        exact_fma,
        wide.bfloat16(),
        wide.bfloat16(),
    ]
    for k, expected in enumerate(want):
        assert torch.equal(_bits(out[k]), _bits(expected)), f"result {k} differs from torch's bf16"


def test_a_bf16_dot_multiplies_values_and_accumulates_in_fp32():
    n = 16
    generator = torch.Generator().manual_seed(1)
    a, b = (torch.randn(n, n, generator=generator).bfloat16() for _ in range(2))
    out = torch.empty(n, n)
    with as_compiled():
        _bf16_dot[(1,)](a, b, out, n)
    torch.testing.assert_close(out, a.float() @ b.float(), rtol=1e-6, atol=1e-6)


def test_a_loop_index_is_a_tensor_as_when_compiled():
    out = torch.zeros(5, dtype=torch.int64)
    with as_compiled():
        _loop_indices[(1,)](out, 5, torch.tensor([2]))
    assert out.tolist() == [0, 3, 6, 9, 12]


def test_an_autotuned_kernel_runs_with_its_first_config():
    x = torch.arange(20, dtype=torch.float32)
    out = torch.zeros(20)
    with as_compiled():
        _autotuned_double[lambda meta: (triton.cdiv(20, meta["BLOCK"]),)](x, out, 20)
    assert torch.equal(out, x * 2)
