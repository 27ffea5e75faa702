"""A small RWKV-7 ("x070") runtime for the smoke-inference gate.

Numerically the model of the official ``rwkv==0.8.32`` package's ``RWKV_x070`` (layer-norm eps
1e-5, group-norm eps 64e-5, ``blocks.0.ln0`` folded into the embedding at load, the layer-0
``v_first`` residual, the log-log decay ``w = -softplus(-(w0 + w)) - 0.5``), written batched so
the gate can check several prompts at once.  The WKV recurrence runs through the project's CUDA
kernel on CUDA and through the pure-torch reference on CPU.

State is a list of ``3 * n_layer`` tensors in the package's order, each with a leading batch dim:
``[3i+0]`` attention token-shift ``[B, C]``, ``[3i+1]`` WKV state ``[B, H, N, N]`` float32,
``[3i+2]`` FFN token-shift ``[B, C]``.  :func:`to_package_state` / :func:`from_package_state`
convert a batch of one to and from the package's unbatched layout.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F

from ..artifacts.inspect import load_tensor_map
from ..artifacts.miss import merge_delta
from ..artifacts.rwkv7 import (
    GLOBAL_KEYS,
    MIX_KEYS,
    SHAPE_TENSORS,
    VALUE_RESIDUAL,
    block_key,
    block_name,
    has_value_residual,
    heads,
    is_linear_weight,
    layer_keys,
    linear_shapes,
    shape_of,
    state_key,
)
from ..artifacts.safetensors_header import read_shard_index
from ..core.errors import RegistryError
from ..core.models import Architecture
from ..core.names import SHARD_INDEX, SINGLE_SAFETENSORS
from .kernel import wkv7
from .reference import wkv7_reference

GROUP_NORM_EPS = 64e-5
WKV_CHOICES = ("auto", "kernel", "reference")
# The Linears, stored transposed ([in, out], applied as ``x @ W``): the official runtime's layout,
# so that it runs on this runtime's very tensors (:meth:`Rwkv7.checkpoint`), one copy for both.
TRANSPOSED = (
    "att.receptance.weight",
    "att.key.weight",
    "att.value.weight",
    "att.output.weight",
    "ffn.key.weight",
    "ffn.value.weight",
    "head.weight",
)
# Vocabulary columns of the head converted at a time when the model computes in another dtype
# than it stores (the fp32 reference of a bf16 model): 16384 x n_embd in fp32, not the whole head.
HEAD_CHUNK = 16384
MERGE_ROWS = 1024  # rows of a Linear merged at a time (:func:`merged_weights`)
StopReason = Literal["stop_token", "stop_text", "max_new_tokens"]


# --------------------------------------------------------------------------------------------
# Loading weights


def _load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file  # noqa: PLC0415 optional dependency: safetensors

    return load_file(path)


def _load_sharded(index_path: Path) -> dict[str, torch.Tensor]:
    """Every tensor the index's weight_map names, each read from its shard."""
    index = read_shard_index(index_path)
    weight_map = index.weight_map
    tensors: dict[str, torch.Tensor] = {}
    for shard in index.shard_names:
        shard_path = index.shard_path(shard)
        if not shard_path.is_file():
            raise RegistryError(
                "gate.weights-unreadable",
                index_path,
                f"names shard {shard}, which does not exist",
                "upload the missing shard or fix the index",
            )
        loaded = _load_safetensors(shard_path)
        for name in (n for n, s in weight_map.items() if s == shard):
            if name not in loaded:
                raise RegistryError(
                    "gate.weights-unreadable",
                    shard_path,
                    f"lacks {name}, which the index places there",
                    "regenerate the shards and the index together",
                )
            tensors[name] = loaded[name]
    return tensors


def load_tensors(path: str | Path) -> dict[str, torch.Tensor]:
    """Tensors of a ``.pth``, a ``.safetensors``, a sharded index, or a directory holding one."""
    path = Path(path)
    if path.is_dir():
        candidates = [path / SHARD_INDEX, path / SINGLE_SAFETENSORS]
        path = next((c for c in candidates if c.is_file()), candidates[0])
    if not path.is_file():
        raise RegistryError(
            "gate.weights-missing",
            path,
            "no such weights file",
            "pass a .pth, .safetensors or model.safetensors.index.json",
        )
    try:
        if path.name.endswith(".index.json"):
            return _load_sharded(path)
        if path.suffix == ".safetensors":
            return _load_safetensors(path)
        if path.suffix in (".pth", ".pt"):
            return load_tensor_map(path)
    except RegistryError:
        raise
    except Exception as error:
        raise RegistryError(
            "gate.weights-unreadable",
            path,
            f"cannot be read ({type(error).__name__}: {error})",
            "re-download or re-convert the file",
        ) from error
    raise RegistryError(
        "gate.weights-unreadable",
        path,
        "unknown weights format",
        "use .pth, .safetensors or a sharded safetensors index",
    )


# --------------------------------------------------------------------------------------------
# Adapters and state layout


def check_mergeable(
    base: Mapping[str, torch.Tensor], adapter: Mapping[str, torch.Tensor], *, source: str | Path | None = None
) -> None:
    """Every adapter block targets a Linear of ``base`` it can be merged into (else a refusal).

    Whether an adapter file fits a base file (its miss.json against the base's shapes) is
    :func:`registry.artifacts.inspect.check_miss_fits`; this checks the tensors about to be merged."""
    for name, block in adapter.items():
        if not is_linear_weight(name):
            raise RegistryError(
                "gate.miss-key",
                source,
                f"adapter tensor {name} is not a blocks.N.(att|ffn).X.weight",
                "export the adapter with x070 target names",
            )
        if name not in base:
            raise RegistryError(
                "gate.miss-target",
                source,
                f"adapter targets {name}, which the base model lacks",
                "merge onto the base the adapter was trained on",
            )
        weight = base[name]
        if block.dim() != 2 or weight.dim() != 2 or block.shape[0] != weight.shape[0]:
            raise RegistryError(
                "gate.miss-shape",
                source,
                f"{name}: adapter block {tuple(block.shape)} does not fit base weight {tuple(weight.shape)}",
                "merge onto the base the adapter was trained on",
            )


def merged_weights(
    base: Mapping[str, torch.Tensor],
    adapter: Mapping[str, torch.Tensor],
    scale: float,
    *,
    source: str | Path | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """The merged Linears one at a time (:func:`~registry.artifacts.miss.merge_delta`:
    ``W' = W + scale * D.repeat(1, ceil(in/rank))[:, :in]``), after checking that all of them fit,
    so a misfit is refused before anything is merged.  Each is computed on the base weight's device."""
    check_mergeable(base, adapter, source=source)
    for name, block in adapter.items():
        weight, block = base[name], block.to(base[name].device)
        # By MERGE_ROWS rows: each row's merge is its own (elementwise), so this is merge_delta's
        # result bit for bit, with its fp32 temporaries a slice of the Linear instead of four copies.
        rows = range(0, weight.shape[0], MERGE_ROWS)
        yield (
            name,
            torch.cat([merge_delta(weight[lo : lo + MERGE_ROWS], block[lo : lo + MERGE_ROWS], scale) for lo in rows]),
        )


@contextmanager
def patched(
    replace: Callable[[str, torch.Tensor], None],
    pristine: Mapping[str, torch.Tensor],
    patch: Iterable[tuple[str, torch.Tensor]],
    *,
    undo: bool = True,
) -> Iterator[None]:
    """Copy each patched weight into a runtime with ``replace``; afterwards copy the ``pristine``
    bytes back the same way, so the runtime is bit-exactly what it was (one weight at a time:
    no second copy of the model).  ``pristine`` needs only the patched names, and may live
    elsewhere (the host's mapped checkpoint): ``replace`` moves each value where it belongs.
    ``undo=False`` leaves the patch in (the model's last use: nothing would read the restore)."""
    done: list[str] = []
    try:
        for name, value in patch:
            replace(name, value)
            done.append(name)
        yield
    finally:
        for name in done if undo else ():
            replace(name, pristine[name])


def _transposed(name: str) -> bool:
    """Whether the runtime stores ``name`` transposed (:data:`TRANSPOSED`)."""
    leaf = name.split(".", 2)[-1] if name.startswith("blocks.") else name
    return leaf in TRANSPOSED


def to_package_state(state: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Batched state of batch size 1 -> the rwkv package's layout (no batch dim)."""
    if any(s.shape[0] != 1 for s in state):
        raise ValueError("only a state of batch size 1 has a package layout")
    return [s[0].clone() for s in state]


def from_package_state(state: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The rwkv package's state list -> this runtime's batched layout (batch size 1)."""
    return [s.unsqueeze(0).clone() for s in state]


# --------------------------------------------------------------------------------------------
# The model


@dataclass(frozen=True)
class Generation:
    tokens: list[int]  # generated tokens, without the stop token
    text: str  # their decoded text, cut before the stop text
    stop_reason: StopReason


def _infer_shape(tensors: Mapping[str, torch.Tensor], source: str | Path | None) -> Architecture:
    for name in SHAPE_TENSORS:
        if name not in tensors:
            raise RegistryError("gate.weights-keys", source, f"missing {name}", "pass an RWKV-7 (x070) checkpoint")
    n_head, head_size = tensors["blocks.0.att.r_k"].shape
    _vocab, n_embd = tensors["emb.weight"].shape
    if n_head * head_size != n_embd:
        raise RegistryError(
            "gate.weights-shape",
            source,
            f"r_k is {n_head}x{head_size} but n_embd is {n_embd}",
            "pass an RWKV-7 (x070) checkpoint",
        )
    return shape_of({name: t.shape for name, t in tensors.items()})


def _expected_keys(shape: Architecture) -> set[str]:
    keys = set(GLOBAL_KEYS)
    for i in range(shape.n_layer):
        keys.update(block_name(i, k) for k in layer_keys(i))
    return keys


def _expected_shape(name: str, shape: Architecture, tensors: Mapping[str, torch.Tensor]) -> tuple[int, ...] | None:
    """The shape a matrix must have; None for the vectors, which are checked by element count."""
    c, v = shape.n_embd, shape.vocab_size
    key = block_key(name)
    leaf = key[1] if key else name
    fixed = {
        "emb.weight": (v, c), "head.weight": (v, c),
        **linear_shapes(shape),
        "att.r_k": (heads(shape), shape.head_size),
    }  # fmt: skip
    if leaf in fixed:
        return fixed[leaf]
    lora = re.fullmatch(r"(.*att\.[wavg])([12])", name)
    if lora:  # a low-rank pair: [C, rank] then [rank, C], the rank read from the first
        rank = tensors[lora.group(1) + "1"].shape[-1]
        return (c, rank) if lora.group(2) == "1" else (rank, c)
    return None


def _check_weights(tensors: Mapping[str, torch.Tensor], shape: Architecture, source: str | Path | None) -> None:
    expected = _expected_keys(shape)
    present = set(tensors) - {block_name(0, k) for k in VALUE_RESIDUAL}
    missing, unknown = sorted(expected - present), sorted(present - expected)
    if missing:
        raise RegistryError(
            "gate.weights-keys",
            source,
            f"missing {len(missing)} tensors, e.g. {missing[0]}",
            "pass a complete RWKV-7 (x070) checkpoint",
        )
    if unknown:
        raise RegistryError(
            "gate.weights-keys",
            source,
            f"{len(unknown)} tensors this runtime does not know, e.g. {unknown[0]}",
            "the gate runs plain x070 checkpoints only",
        )
    for name in sorted(expected):
        got = tuple(tensors[name].shape)
        want = _expected_shape(name, shape, tensors)
        if (got != want) if want is not None else (math.prod(got) != shape.n_embd):
            raise RegistryError(
                "gate.weights-shape",
                source,
                f"{name} is {got}, expected {want or (shape.n_embd,)}",
                "pass a consistent RWKV-7 (x070) checkpoint",
            )


class Rwkv7:
    """RWKV-7 inference on CPU or CUDA in float32 or bfloat16; see the module docstring."""

    def __init__(
        self,
        tensors: Mapping[str, torch.Tensor],
        *,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        wkv: str = "auto",
        source: str | Path | None = None,
        copied: Callable[[torch.Tensor], None] | None = None,
    ):
        """``wkv``: "auto" (kernel on CUDA, reference on CPU), "kernel" (CUDA only) or "reference".

        ``copied`` is called with each of ``tensors`` once this model holds its own copy (the
        gate drops a memory-mapped checkpoint's pages there, so the copy does not double RSS)."""
        if dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"dtype must be float32 or bfloat16, got {dtype}")
        if wkv not in WKV_CHOICES:
            raise ValueError(f"wkv must be one of {WKV_CHOICES}, got {wkv!r}")
        self.device = torch.device(device)
        if wkv == "kernel" and self.device.type != "cuda":
            raise ValueError("wkv='kernel' needs device='cuda'")
        self.dtype = dtype
        self.source = source
        self.shape = _infer_shape(tensors, source)
        _check_weights(tensors, self.shape, source)
        self._wkv = wkv7_reference if wkv == "reference" else wkv7
        self._prepare(tensors, copied or (lambda _tensor: None))

    @classmethod
    def from_path(cls, path: str | Path, **kwargs: Any) -> Rwkv7:
        return cls(load_tensors(path), source=path, **kwargs)

    def _prepare(self, tensors: Mapping[str, torch.Tensor], copied: Callable[[torch.Tensor], None]) -> None:
        """Copy the weights to device/dtype, one tensor at a time (never sharing the caller's
        tensors: a patch of this model must not touch them), the Linears transposed
        (:data:`TRANSPOSED`), the [1, 1, C] vectors squeezed.  The copies are contiguous whatever
        the caller's strides (a transposed view read back from an export): a GEMM on a transposed
        operand may round differently on CUDA, and the same weights must give the same logits."""
        self._shapes: dict[str, tuple[int, ...]] = {}

        def prep(name: str) -> torch.Tensor:
            source = tensors[name]
            self._shapes[name] = tuple(source.shape)
            moved = source.to(device=self.device, dtype=self.dtype)  # the caller's own tensor, or a temporary
            laid = moved.t() if _transposed(name) else moved
            t = torch.empty(laid.shape, dtype=self.dtype, device=self.device).copy_(laid)
            del moved, laid
            copied(source)
            return t.flatten() if name.endswith("att.r_k") else t.squeeze()

        self._layers = [{k: prep(block_name(i, k)) for k in layer_keys(i)} for i in range(self.shape.n_layer)]
        self._outer = {
            name: prep(name)
            for name in ("blocks.0.ln0.weight", "blocks.0.ln0.bias", "ln_out.weight", "ln_out.bias", "head.weight")
        }
        self._emb = prep("emb.weight")  # ln0 is applied to the rows a forward uses
        self._stored_dtype = self.dtype

    def computing_in(self, dtype: torch.dtype, wkv: str) -> Rwkv7:
        """This model's weights run in ``dtype`` through ``wkv``, without a second copy of them:
        each layer is converted as it runs (the gate's fp32 reference of a bf16 model)."""
        if dtype not in (torch.float32, torch.bfloat16) or wkv not in WKV_CHOICES:
            raise ValueError(f"unsupported dtype {dtype} or wkv {wkv!r}")
        other = copy.copy(self)
        other.dtype = dtype
        other._wkv = wkv7_reference if wkv == "reference" else wkv7
        return other

    def _in_compute_dtype(self, tensors: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
        if self._stored_dtype == self.dtype:
            return tensors
        return {k: t.to(self.dtype) for k, t in tensors.items()}

    def _stored(self) -> dict[str, torch.Tensor]:
        """Every stored tensor by checkpoint name, in this model's layout."""
        return self.stored_weights() | self._outer | {"emb.weight": self._emb}

    def weight(self, name: str) -> torch.Tensor:
        """The stored tensor ``name`` as a view in the checkpoint's layout and shape (no copy)."""
        t = self._stored()[name]
        return t.t() if _transposed(name) else t.view(self._shapes[name])

    def checkpoint(self) -> dict[str, torch.Tensor]:
        """Every stored tensor as :meth:`weight` gives it: a checkpoint's tensors that are views of
        this model's (the official loader, handed these, keeps them: one copy for both runtimes)."""
        return {name: self.weight(name) for name in self._stored()}

    def replace_weight(self, name: str, value: torch.Tensor) -> None:
        """Copy ``value`` (checkpoint layout, any device and dtype) into the stored Linear weight
        ``name`` (``blocks.N.…weight``) in place."""
        key = block_key(name)
        layer = self._layers[key[0]] if key and key[0] < self.shape.n_layer else {}
        target = layer.get(key[1]) if key else None
        if target is None or self._shapes[name] != tuple(value.shape):
            raise ValueError(f"{name} is not a weight of this model with shape {tuple(value.shape)}")
        moved = value.to(device=target.device, dtype=target.dtype)
        target.copy_(moved.t() if _transposed(name) else moved.view_as(target))

    def stored_weights(self) -> dict[str, torch.Tensor]:
        """The stored block weights by checkpoint name, in this model's layout (for tests)."""
        return {block_name(i, k): t for i, layer in enumerate(self._layers) for k, t in layer.items()}

    def _layer_norm(self, x: torch.Tensor, weight_bias: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return F.layer_norm(x, (self.shape.n_embd,), *weight_bias)

    # ---- state ------------------------------------------------------------------------------

    def _state_shapes(self, batch: int) -> list[tuple[tuple[int, ...], torch.dtype]]:
        s = self.shape
        shift = ((batch, s.n_embd), self.dtype)
        wkv = ((batch, heads(s), s.head_size, s.head_size), torch.float32)
        return [shift, wkv, shift] * s.n_layer

    def zero_state(self, batch: int = 1) -> list[torch.Tensor]:
        return [torch.zeros(size, dtype=dtype, device=self.device) for size, dtype in self._state_shapes(batch)]

    def apply_state_file(
        self, tensors: Mapping[str, torch.Tensor], *, batch: int = 1, source: str | Path | None = None
    ) -> list[torch.Tensor]:
        """Initial state from a state-tuning file: WKV slots = ``blocks.i.att.time_state``, shifts zero."""
        s = self.shape
        expected = {state_key(i) for i in range(s.n_layer)}
        if set(tensors) != expected:
            odd = sorted(set(tensors) ^ expected)[0]
            raise RegistryError(
                "gate.state-mismatch",
                source,
                f"state file does not match a {s.n_layer}-layer model (at {odd})",
                "use the state trained for this base model",
            )
        state = self.zero_state(batch)
        for i in range(s.n_layer):
            t = tensors[state_key(i)]
            if tuple(t.shape) != (heads(s), s.head_size, s.head_size):
                raise RegistryError(
                    "gate.state-mismatch",
                    source,
                    f"{state_key(i)} is {tuple(t.shape)}, the model needs {(heads(s), s.head_size, s.head_size)}",
                    "use the state trained for this base model",
                )
            state[3 * i + 1] = t.to(device=self.device, dtype=torch.float32).unsqueeze(0).repeat(batch, 1, 1, 1)
        return state

    def _check_state(self, state: Sequence[torch.Tensor], batch: int) -> None:
        want = self._state_shapes(batch)
        if len(state) != len(want) or any(tuple(t.shape) != size for t, (size, _) in zip(state, want, strict=True)):
            raise ValueError(
                f"state does not fit this model with batch {batch}; build it with zero_state() or apply_state_file()"
            )

    # ---- forward ----------------------------------------------------------------------------

    def _token_ids(self, tokens: Sequence[int] | torch.Tensor) -> tuple[torch.Tensor, bool]:
        """[B, T] ids on the device, and whether the input was a single unbatched sequence."""
        ids = torch.as_tensor(tokens, dtype=torch.long)
        unbatched = ids.dim() <= 1
        ids = ids.reshape(1, -1) if unbatched else ids
        if ids.dim() != 2 or ids.shape[1] == 0:
            raise ValueError(f"tokens must be a non-empty list or a [B, T] tensor, got shape {tuple(ids.shape)}")
        if int(ids.min()) < 0 or int(ids.max()) >= self.shape.vocab_size:
            raise ValueError(f"token ids must be in [0, {self.shape.vocab_size})")
        return ids.to(self.device), unbatched

    @torch.inference_mode()
    def forward(
        self,
        tokens: Sequence[int] | torch.Tensor,
        state: Sequence[torch.Tensor] | None = None,
        *,
        full_output: bool = False,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Run tokens (a list/1-D tensor: one sequence; a [B, T] tensor: a batch) from ``state``.

        Returns ``(logits, new_state)``: logits of the last position (``[V]`` or ``[B, V]``), or
        of every position with ``full_output``.  The given state is not modified.  One token at a
        time (T = 1) is the generation mode; longer inputs are the prefill mode.
        """
        ids, unbatched = self._token_ids(tokens)
        if state is None:
            state = self.zero_state(ids.shape[0])
        else:
            self._check_state(state, ids.shape[0])
            state = [s.clone(memory_format=torch.contiguous_format) for s in state]
        outer = self._in_compute_dtype({k: t for k, t in self._outer.items() if k != "head.weight"})
        x = self._layer_norm(self._emb[ids].to(self.dtype), (outer["blocks.0.ln0.weight"], outer["blocks.0.ln0.bias"]))
        v_first = None
        for i, stored in enumerate(self._layers):
            p = self._in_compute_dtype(stored)  # computing in another dtype: this layer converted
            out, state[3 * i], v_first = self._time_mix(
                i, p, self._layer_norm(x, (p["ln1.weight"], p["ln1.bias"])), state[3 * i], state[3 * i + 1], v_first
            )
            x = x + out
            out, state[3 * i + 2] = self._channel_mix(
                p, self._layer_norm(x, (p["ln2.weight"], p["ln2.bias"])), state[3 * i + 2]
            )
            x = x + out
            del p, out  # one converted layer at a time: freed before the next is made
        if not full_output:
            x = x[:, -1]
        logits = self._head(self._layer_norm(x, (outer["ln_out.weight"], outer["ln_out.bias"])))
        return (logits[0] if unbatched else logits), state

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ head`` by :data:`HEAD_CHUNK` vocabulary columns, each converted to the compute
        dtype as it is used (the same chunks whatever the dtype, so a view computes what a model
        stored in its dtype computes)."""
        head = self._outer["head.weight"]
        return torch.cat(
            [x @ head[:, lo : lo + HEAD_CHUNK].to(self.dtype) for lo in range(0, head.shape[1], HEAD_CHUNK)], dim=-1
        )

    @staticmethod
    def _shift_delta(x: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        """Token shift: previous position's input minus this one's ([B, T, C])."""
        return torch.cat((prev.unsqueeze(1), x[:, :-1]), dim=1) - x

    def _time_mix(
        self,
        layer: int,
        p: Mapping[str, torch.Tensor],
        x: torch.Tensor,
        x_prev: torch.Tensor,
        wkv_state: torch.Tensor,
        v_first: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        batch, steps, c = x.shape
        n_head, n = heads(self.shape), self.shape.head_size
        xx = self._shift_delta(x, x_prev)
        xr, xw, xk, xv, xa, xg = (x + xx * p[f"att.{m}"] for m in MIX_KEYS)

        r = xr @ p["att.receptance.weight"]
        w = torch.tanh(xw @ p["att.w1"]) @ p["att.w2"]
        k = xk @ p["att.key.weight"]
        v = xv @ p["att.value.weight"]
        a = torch.sigmoid(p["att.a0"] + (xa @ p["att.a1"]) @ p["att.a2"])
        g = torch.sigmoid(xg @ p["att.g1"]) @ p["att.g2"]

        kk = F.normalize((k * p["att.k_k"]).view(batch, steps, n_head, n), dim=-1, p=2.0).view(batch, steps, c)
        k = k * (1 + (a - 1) * p["att.k_a"])
        if not has_value_residual(layer):
            v_first = v
        else:
            assert v_first is not None  # layer 0's value, passed on by forward
            v = v + (v_first - v) * torch.sigmoid(p["att.v0"] + (xv @ p["att.v1"]) @ p["att.v2"])
        w = -F.softplus(-(p["att.w0"] + w)) - 0.5

        y, _ = self._wkv(r, w, k, v, -kk, kk * a, wkv_state)
        y = F.group_norm(
            y.view(batch * steps, c), n_head, p["att.ln_x.weight"], p["att.ln_x.bias"], eps=GROUP_NORM_EPS
        ).view(batch, steps, c)
        bonus = (r * k * p["att.r_k"]).view(batch, steps, n_head, n).sum(-1, keepdim=True) * v.view(
            batch, steps, n_head, n
        )
        y = y + bonus.view(batch, steps, c)
        return (y * g) @ p["att.output.weight"], x[:, -1], v_first

    def _channel_mix(
        self, p: Mapping[str, torch.Tensor], x: torch.Tensor, x_prev: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        k = x + self._shift_delta(x, x_prev) * p["ffn.x_k"]
        k = torch.relu(k @ p["ffn.key.weight"]) ** 2
        return k @ p["ffn.value.weight"], x[:, -1]

    # ---- generation -------------------------------------------------------------------------

    def generate(
        self,
        prompt_tokens: Sequence[int],
        max_new_tokens: int,
        *,
        decode: Callable[[list[int]], str],
        stop_tokens: Iterable[int] = (0,),
        stop_texts: Sequence[str] = ("\n\nUser:",),
        state: Sequence[torch.Tensor] | None = None,
    ) -> Generation:
        """Greedy continuation of one prompt; stops on a stop token, a stop text or the budget.

        A stop text (the next chat turn's header) is cut from the returned text, from where the
        first of them starts: a model that answers and then starts the next turn has answered correctly.
        """
        stops = set(stop_tokens)
        logits, state = self.forward(list(prompt_tokens), state)
        tokens: list[int] = []
        while len(tokens) < max_new_tokens:
            if tokens:
                logits, state = self.forward(tokens[-1:], state)
            token = int(torch.argmax(logits))
            if token in stops:
                return Generation(tokens, decode(tokens), "stop_token")
            tokens.append(token)
            text = decode(tokens)
            found = [text.index(stop) for stop in stop_texts if stop and stop in text]
            if found:
                return Generation(tokens, text[: min(found)], "stop_text")
        return Generation(tokens, decode(tokens), "max_new_tokens")
