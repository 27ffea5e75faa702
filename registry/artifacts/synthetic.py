"""Tiny random RWKV-7 artifacts for tests, the demo and benchmarks.

No real RWKV weights can be downloaded where this project is tested, so every test builds its
own checkpoints here: real x070 key names and shapes (those of BlinkDL's RWKV-LM v7 trainer and
of the official ``rwkv`` package's loader), random values scaled so that a forward pass stays
finite.  The official ``rwkv==0.8.32`` package loads them on ``cpu fp32`` (tests prove it).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from .miss import default_targets, write_adapter
from .rwkv7 import HEAD_SIZE, MIX_KEYS, has_value_residual, state_key


def _lora_dim(n_embd: int, factor: float, power: float) -> int:
    # The RWKV-7 trainer's sizing rule for its low-rank projections (multiples of 32, at least 32).
    return max(32, int(round(factor * (n_embd**power) / 32) * 32))


@dataclass(frozen=True)
class TinySpec:
    """Shape of a random RWKV-7 checkpoint."""

    n_layer: int = 2
    n_embd: int = 128
    vocab_size: int = 65536
    head_size: int = HEAD_SIZE
    dtype: torch.dtype = torch.bfloat16
    seed: int = 0
    with_layer0_v: bool = True  # official files carry unused blocks.0.att.v0/v1/v2

    @property
    def n_head(self) -> int:
        return self.n_embd // self.head_size

    @property
    def dim_ffn(self) -> int:
        return 4 * self.n_embd

    @property
    def lora(self) -> dict[str, int]:
        c = self.n_embd
        return {
            "w": _lora_dim(c, 1.8, 0.5),
            "a": _lora_dim(c, 1.8, 0.5),
            "v": _lora_dim(c, 1.3, 0.5),
            "g": _lora_dim(c, 0.6, 0.8),
        }


def _layer_shapes(spec: TinySpec, layer: int) -> dict[str, tuple[int, ...]]:
    c, h, n, f = spec.n_embd, spec.n_head, spec.head_size, spec.dim_ffn
    lora = spec.lora
    att = f"blocks.{layer}.att."
    ffn = f"blocks.{layer}.ffn."
    shapes: dict[str, tuple[int, ...]] = {}
    if layer == 0:
        shapes["blocks.0.ln0.weight"] = (c,)
        shapes["blocks.0.ln0.bias"] = (c,)
    for ln in ("ln1", "ln2"):
        shapes[f"blocks.{layer}.{ln}.weight"] = (c,)
        shapes[f"blocks.{layer}.{ln}.bias"] = (c,)
    for mix in MIX_KEYS:
        shapes[att + mix] = (1, 1, c)
    shapes[att + "w0"] = (1, 1, c)
    shapes[att + "w1"] = (c, lora["w"])
    shapes[att + "w2"] = (lora["w"], c)
    shapes[att + "a0"] = (1, 1, c)
    shapes[att + "a1"] = (c, lora["a"])
    shapes[att + "a2"] = (lora["a"], c)
    if has_value_residual(layer) or spec.with_layer0_v:
        shapes[att + "v0"] = (1, 1, c)
        shapes[att + "v1"] = (c, lora["v"])
        shapes[att + "v2"] = (lora["v"], c)
    shapes[att + "g1"] = (c, lora["g"])
    shapes[att + "g2"] = (lora["g"], c)
    shapes[att + "k_k"] = (1, 1, c)
    shapes[att + "k_a"] = (1, 1, c)
    shapes[att + "r_k"] = (h, n)
    for lin in ("receptance", "key", "value", "output"):
        shapes[att + lin + ".weight"] = (c, c)
    shapes[att + "ln_x.weight"] = (c,)
    shapes[att + "ln_x.bias"] = (c,)
    shapes[ffn + "x_k"] = (1, 1, c)
    shapes[ffn + "key.weight"] = (f, c)
    shapes[ffn + "value.weight"] = (c, f)
    return shapes


def checkpoint_shapes(spec: TinySpec) -> dict[str, tuple[int, ...]]:
    """Every tensor name of an x070 checkpoint with its shape, in the trainer's order."""
    c, v = spec.n_embd, spec.vocab_size
    shapes: dict[str, tuple[int, ...]] = {"emb.weight": (v, c)}
    for layer in range(spec.n_layer):
        shapes.update(_layer_shapes(spec, layer))
    shapes["ln_out.weight"] = (c,)
    shapes["ln_out.bias"] = (c,)
    shapes["head.weight"] = (v, c)
    return shapes


def _init_value(name: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """A random value in the range a trained model has, so forwards stay finite and varied."""
    randn = functools.partial(torch.randn, generator=gen, device=gen.device)
    rand = functools.partial(torch.rand, generator=gen, device=gen.device)
    leaf = name.rsplit(".", 1)[-1] if not name.endswith((".weight", ".bias")) else name.rsplit(".", 2)[-2]
    if name.endswith(".bias"):
        return randn(shape) * 0.02
    if leaf in ("ln0", "ln1", "ln2", "ln_out", "ln_x"):
        return 1.0 + randn(shape) * 0.05
    if leaf.startswith("x_"):
        return rand(shape)
    if leaf == "w0":
        return rand(shape) * -4.0 - 0.5
    if leaf in ("a0", "v0"):
        return randn(shape) * 0.1
    if leaf == "k_k":
        return 0.7 + rand(shape) * 0.3
    if leaf == "k_a":
        return 0.8 + rand(shape) * 0.4
    if leaf == "r_k":
        return randn(shape) * 0.1
    if name == "emb.weight":
        return randn(shape) * 0.5
    fan_in = shape[-1]
    return randn(shape) / math.sqrt(fan_in)


def make_base_state_dict(spec: TinySpec = TinySpec(), device: str = "cpu") -> dict[str, torch.Tensor]:
    """Random x070 weights on the CPU, each tensor its own storage.

    ``device="cuda"`` draws the numbers on the GPU (a 7.2B-shaped model in seconds, not minutes);
    the values then differ from a CPU draw with the same seed.
    """
    gen = torch.Generator(device).manual_seed(spec.seed)
    return {name: _init_value(name, shape, gen).to(spec.dtype).cpu() for name, shape in checkpoint_shapes(spec).items()}


def share_storage(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The same tensors as views into one flat storage, the layout of official checkpoints.

    torch.save then writes a single storage record; a naive converter that saves each view's
    whole storage would write the model once per tensor.
    """
    dtype = next(iter(tensors.values())).dtype
    total = sum(t.numel() for t in tensors.values())
    flat = torch.empty(total, dtype=dtype)
    views: dict[str, torch.Tensor] = {}
    offset = 0
    for name, t in tensors.items():
        view = flat[offset : offset + t.numel()].view(t.shape)
        view.copy_(t)
        views[name] = view
        offset += t.numel()
    return views


def save_checkpoint(path: Path, tensors: dict[str, torch.Tensor]) -> Path:
    """torch-zip .pth, as the trainers write it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(tensors, path)
    return path


def make_base_checkpoint(path: Path, spec: TinySpec = TinySpec(), shared: bool = False) -> Path:
    tensors = make_base_state_dict(spec)
    return save_checkpoint(path, share_storage(tensors) if shared else tensors)


def make_state_tensors(spec: TinySpec, seed: int = 1, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """A State-tuning file: one initial WKV state [H, N(v), N(k)] per layer."""
    gen = torch.Generator().manual_seed(seed)
    dtype = dtype or spec.dtype
    return {
        state_key(i): (torch.randn((spec.n_head, spec.head_size, spec.head_size), generator=gen) * 0.1).to(dtype)
        for i in range(spec.n_layer)
    }


def make_state_file(path: Path, spec: TinySpec = TinySpec(), seed: int = 1) -> Path:
    return save_checkpoint(path, make_state_tensors(spec, seed))


def make_adapter_tensors(spec: TinySpec, rank: int = 16, seed: int = 2) -> dict[str, torch.Tensor]:
    """Random bf16 ``D[out, rank]`` for every default target of a tiny checkpoint."""
    gen = torch.Generator().manual_seed(seed)
    return {
        t.name: (torch.randn((t.shape[0], rank), generator=gen) * 0.01).to(torch.bfloat16)
        for t in default_targets(checkpoint_shapes(spec))
    }


def make_adapter_file(
    path: str | Path, spec: TinySpec, base_sha256: str, rank: int = 16, scale: float = 1.0, seed: int = 2
) -> Path:
    """A MiSS adapter for the tiny base built from ``spec`` whose file hashes to ``base_sha256``."""
    tensors = make_adapter_tensors(spec, rank, seed)
    write_adapter(path, tensors, rank, scale, default_targets(checkpoint_shapes(spec)), base_sha256)
    return Path(path)
