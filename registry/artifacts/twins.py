"""A ``.safetensors`` beside a ``.pth`` of the same name: the same weights (a twin) or other ones.

``registry convert`` writes a twin and checks it as it writes; a hand-made repo may hold one made
elsewhere, or a stale one.  :func:`twin_difference` compares every tensor (names, shapes, dtypes,
values) of the two files, each read by its own strict reader: the ``.pth`` with
:func:`~registry.artifacts.inspect.load_tensor_map` (``weights_only``), the safetensors with the
safetensors loader itself.
"""

from __future__ import annotations

from pathlib import Path

from .inspect import load_tensor_map


def twin_difference(pth: Path, safetensors: Path) -> str | None:
    """What differs between the tensors of the two files, or None when they hold the same ones."""
    import torch  # noqa: PLC0415 optional dependency: torch
    from safetensors import safe_open  # noqa: PLC0415 optional dependency: safetensors

    source = load_tensor_map(pth)
    with safe_open(str(safetensors), framework="pt") as reader:
        names = set(reader.keys())
        if names != set(source):
            only = sorted(names ^ set(source))
            return f"other tensor names ({len(only)} differ, e.g. {only[0]})"
        for name in sorted(names):
            tensor = reader.get_tensor(name)
            mine = source[name]
            if tensor.shape != mine.shape or tensor.dtype != mine.dtype:
                return (
                    f"tensor {name} is {tuple(tensor.shape)} {tensor.dtype}, the "
                    f".pth's {tuple(mine.shape)} {mine.dtype}"
                )
            if not torch.equal(tensor, mine):
                return f"tensor {name} holds other values"
    return None
