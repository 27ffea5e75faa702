"""Triton's interpreter brought closer to compiled Triton, so fla's RWKV-7 kernels run on CPU.

Without CUDA the tests run fla's Triton kernels in Triton's interpreter (``TRITON_INTERPRET=1``,
set in tests/conftest.py). Out of the box it runs only fla's fused-recurrent kernel in fp32.
``as_compiled()`` evens out three differences from compiled Triton for as long as it is entered:

* The autotuner cannot time its configs (it asks for a GPU driver): each kernel keeps its first
  config, so other block sizes, the same function.
* A loop's induction variable is a tensor when compiled (int32, or int64 if a bound is) but a Python
  int in the interpreter, and fla's chunked kernel calls ``.to`` on one: interpreted kernels get a
  ``range`` that yields scalar tensors of that type.
* The interpreter keeps bf16 as its uint16 bits and hands the bits to numpy: bf16 + bf16 is an
  integer sum, ``tl.dot`` multiplies the bits, and a cast from fp32 to bf16 truncates (``rtne`` or
  not). Elementwise arithmetic, fma and dot with a bf16 operand are done in fp32 (as the GPU
  accumulates a dot), and a bf16 result, or a cast to bf16, is rounded to nearest even by torch.
  That covers what fla's RWKV-7 kernels do in bf16; a bf16 ``tl.sum``, ``tl.cumsum`` or
  NaN-propagating ``tl.clamp`` would still work on the bits (fla's RWKV-7 reduces and clamps in
  fp32).

What stays different from a GPU: fp32 ``tl.dot`` is plain fp32 here (TF32 there), a multiply and
an add are not fused into one fma, ``exp``/``exp2`` are numpy's (approximations there), and a bf16
fma rounds twice here. So the tests keep the GPU's tolerances where those matter (bf16: the gate's
bf16 bound, never an fp32 one). tests/test_interpreted_triton.py checks each piece on small kernels.

Each relies on the interpreter's internals, written against Triton 3.9 (the test extra pins it):
a change there fails those checks, or loudly (a missing attribute)."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch


@contextlib.contextmanager
def as_compiled() -> Iterator[None]:
    import triton.language as tl  # noqa: PLC0415 optional dependency: triton
    from triton.runtime.autotuner import Autotuner  # noqa: PLC0415 optional dependency: triton
    from triton.runtime.interpreter import FunctionRewriter, InterpretedFunction, InterpreterBuilder, TensorHandle  # noqa: PLC0415 optional dependency: triton

    def induction_range(*bounds: Any) -> Iterator[Any]:
        wide = any(isinstance(b, tl.tensor) and b.dtype == tl.int64 for b in bounds)
        dtype, np_dtype = (tl.int64, np.int64) if wide else (tl.int32, np.int32)
        for i in range(*(b.handle.data.item() if isinstance(b, tl.tensor) else int(b) for b in bounds)):
            yield tl.tensor(TensorHandle(np.array(i, dtype=np_dtype), dtype), dtype)

    compile_and_exec = FunctionRewriter._compile_and_exec

    def exec_as_compiled(self: Any, tree: Any) -> Any:
        # The rewritten kernel is executed in a copy of its module's names, with `range` replaced.
        kernel = types.SimpleNamespace(
            __globals__={**self.fn.__globals__, "range": induction_range}, __name__=self.fn.__name__
        )
        return compile_and_exec(types.SimpleNamespace(fn=kernel, kwargs=self.kwargs, filename=self.filename), tree)

    def rounded_to_bf16(handle: Any) -> Any:  # to nearest, ties to even: what the GPU does
        values = torch.from_numpy(np.ascontiguousarray(handle.data, dtype=np.float32))
        return TensorHandle(values.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16), tl.bfloat16)

    def widened(handle: Any) -> Any:
        bits = torch.from_numpy(np.ascontiguousarray(handle.data).view(np.int16))
        return TensorHandle(bits.view(torch.bfloat16).float().numpy(), tl.float32)

    cast_impl = InterpreterBuilder.cast_impl

    def cast(self: Any, src: Any, dst_type: Any) -> Any:
        pair = (src.dtype.scalar, dst_type.scalar)
        if pair == (tl.float32, tl.bfloat16):
            return rounded_to_bf16(src)
        if pair == (tl.bfloat16, tl.float32):
            return widened(src)
        return cast_impl(self, src, dst_type)

    def bf16_in_fp32(method: Callable[..., Any], operands: int, result_like: int) -> Callable[..., Any]:
        """``method``'s first ``operands`` arguments are values; its result has the type of the one
        at ``result_like``, or is bools (a comparison)."""

        def computed(self: Any, *args: Any) -> Any:
            handles, rest = args[:operands], args[operands:]
            if not any(h.dtype.scalar == tl.bfloat16 for h in handles):
                return method(self, *args)
            out = method(self, *(widened(h) if h.dtype.scalar == tl.bfloat16 else h for h in handles), *rest)
            bf16_result = handles[result_like].dtype.scalar == tl.bfloat16 and out.data.dtype != np.bool_
            return rounded_to_bf16(out) if bf16_result else out

        return computed

    # (builder method, value arguments, the one its result is typed like): binary_op(lhs, rhs, op),
    # unary_op(arg, op), create_fma(x, y, z), create_dot(a, b, d = the accumulator, ...)
    computed_in_fp32 = (("binary_op", 2, 0), ("unary_op", 1, 0), ("create_fma", 3, 2), ("create_dot", 3, 2))
    prune = Autotuner.prune_configs
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Autotuner, "prune_configs", lambda self, kwargs: prune(self, kwargs)[:1])
        patch.setattr(FunctionRewriter, "_compile_and_exec", exec_as_compiled)
        patch.setattr(InterpreterBuilder, "cast_impl", cast)
        for name, operands, result_like in computed_in_fp32:
            patch.setattr(
                InterpreterBuilder, name, bf16_in_fp32(getattr(InterpreterBuilder, name), operands, result_like)
            )
        InterpretedFunction.rewritten_fn.clear()  # kernels are rewritten, with the names above, on first use
        try:
            yield
        finally:
            InterpretedFunction.rewritten_fn.clear()
