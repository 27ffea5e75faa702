"""Tensor dtype names of the safetensors spec, and their sizes, without importing torch.

The names are language-neutral, so other tools can rebuild ``content_version``; light commands
(validate, card, sums) check safetensors headers with this table alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.errors import RegistryError

if TYPE_CHECKING:
    import torch

ITEMSIZE: dict[str, int] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "U16": 2,
    "I16": 2,
    "U32": 4,
    "I32": 4,
    "U64": 8,
    "I64": 8,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F16": 2,
    "BF16": 2,
    "F32": 4,
    "F64": 8,
}

# str(torch dtype) -> safetensors name; torch prints its dtypes as "torch.<attribute>".
_CODE_OF_TORCH_NAME = {
    "torch.bool": "BOOL",
    "torch.uint8": "U8",
    "torch.int8": "I8",
    "torch.uint16": "U16",
    "torch.int16": "I16",
    "torch.uint32": "U32",
    "torch.int32": "I32",
    "torch.uint64": "U64",
    "torch.int64": "I64",
    "torch.float8_e4m3fn": "F8_E4M3",
    "torch.float8_e5m2": "F8_E5M2",
    "torch.float16": "F16",
    "torch.bfloat16": "BF16",
    "torch.float32": "F32",
    "torch.float64": "F64",
}


def dtype_code(dtype: Any) -> str:
    """The safetensors name of a torch dtype (``torch.bfloat16`` → ``"BF16"``)."""
    try:
        return _CODE_OF_TORCH_NAME[str(dtype)]
    except KeyError as exc:
        raise RegistryError(
            "weights.dtype",
            None,
            f"tensor dtype {dtype} has no safetensors name",
            f"convert the tensors to one of {', '.join(ITEMSIZE)}",
        ) from exc


def bit_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    """The same dtype, shape and bytes (``y`` moved to ``x``'s device).  Bytes, not values: a NaN
    equals itself and -0.0 differs from 0.0, where ``torch.equal`` says otherwise."""
    import torch  # noqa: PLC0415 optional dependency: torch

    return (
        x.dtype == y.dtype
        and x.shape == y.shape
        and torch.equal(x.reshape(-1).view(torch.uint8), y.to(x.device).reshape(-1).view(torch.uint8))
    )


def little_endian_bytes(tensor: torch.Tensor) -> memoryview:
    """The elements in row-major order as little-endian bytes, whatever the strides, storage
    sharing or host byte order (on little-endian hosts this copies nothing beyond .contiguous())."""
    import torch  # noqa: PLC0415 optional dependency: torch

    flat = tensor.detach().cpu().contiguous().reshape(-1)
    unsigned = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32, 8: torch.uint64}[flat.element_size()]
    words = flat.view(unsigned).numpy()
    return words.astype(words.dtype.newbyteorder("<"), copy=False).data.cast("B")
