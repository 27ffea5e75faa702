"""The RWKV-7 WKV recurrence in plain torch: the CPU path of the gate and the kernel's oracle.

Same signature and semantics as :func:`registry.gate.kernel.wkv7` (and as the rwkv package's
``wkv7s`` CUDA op): inputs ``[B, T, H*N]``, state ``[B, H, N, N]`` fp32 indexed
``state[b, h, i (value), j (key)]``, ``w`` the log-log decay (decay = exp(-exp(w))), and per step

    S = S * diag(decay) + (S a) b^T + v k^T,    y = S r.

Everything is computed in fp32 from the inputs as given, so a bf16 run differs from the kernel
only by the final rounding of ``y``.  Row-vector products are written as broadcast-and-sum rather
than matmul on purpose: a matmul on CUDA may silently use TF32 (the rwkv package turns it on at
import), which would make this oracle less precise than the kernel it checks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..artifacts.rwkv7 import HEAD_SIZE

# (r, w, k, v, a, b)
Wkv7Inputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def check_wkv7_args(
    r: torch.Tensor,
    w: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    state: torch.Tensor,
) -> None:
    """The shape/dtype contract shared by the reference and the CUDA wrapper (ValueError on breach)."""
    if r.dim() != 3:
        raise ValueError(f"wkv7: r must be [B, T, H*N], got {tuple(r.shape)}")
    for name, t in zip("wkvab", (w, k, v, a, b), strict=True):
        if t.shape != r.shape or t.dtype != r.dtype or t.device != r.device:
            raise ValueError(
                f"wkv7: {name} is {tuple(t.shape)} {t.dtype} on {t.device}; r is {tuple(r.shape)} {r.dtype} on {r.device}"
            )
    batch, _, channels = r.shape
    if (
        state.dim() != 4
        or state.shape[0] != batch
        or state.shape[2] != state.shape[3]
        or state.shape[1] * state.shape[2] != channels
    ):
        raise ValueError(
            f"wkv7: state must be [B, H, N, N] with B={batch} and H*N={channels}, got {tuple(state.shape)}"
        )
    if state.dtype != torch.float32 or state.device != r.device:
        raise ValueError(f"wkv7: state must be float32 on {r.device}, got {state.dtype} on {state.device}")


def wkv7_reference(
    r: torch.Tensor,
    w: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the recurrence over T steps; update ``state`` in place and return ``(y, state)``.

    ``y`` has the inputs' shape and dtype.  In-place update mirrors the CUDA op, so callers can
    swap one for the other without changing how they carry state between chunks.
    """
    check_wkv7_args(r, w, k, v, a, b, state)
    batch, steps, channels = r.shape
    heads, n = state.shape[1], state.shape[2]

    def per_head(t: torch.Tensor) -> torch.Tensor:
        return t.float().view(batch, steps, heads, n)

    r_, k_, v_, a_, b_ = map(per_head, (r, k, v, a, b))
    decay = torch.exp(-torch.exp(per_head(w)))
    s = state.clone()
    y = torch.empty(batch, steps, heads, n, dtype=torch.float32, device=r.device)
    for t in range(steps):
        sa = (s * a_[:, t, :, None, :]).sum(-1, keepdim=True)  # (S a) as a column: [B, H, N, 1]
        s = s * decay[:, t, :, None, :] + sa * b_[:, t, :, None, :] + v_[:, t, :, :, None] * k_[:, t, :, None, :]
        y[:, t] = (s * r_[:, t, :, None, :]).sum(-1)
    state.copy_(s)
    return y.view(batch, steps, channels).to(r.dtype), state


def make_wkv7_inputs(
    batch: int,
    steps: int,
    heads: int,
    *,
    head_size: int = HEAD_SIZE,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> tuple[Wkv7Inputs, torch.Tensor]:
    """Random ``(r, w, k, v, a, b), state`` shaped and ranged like a real RWKV-7 layer's.

    Built the way the model builds them (w = -softplus(-x) - 0.5, a = -kk, b = kk * sigmoid(.)
    with kk unit-norm per head) so the recurrence stays contractive over long sequences and
    parity checks exercise realistic magnitudes, not overflow.
    """
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, steps, heads * head_size)

    def randn(scale: float = 1.0) -> torch.Tensor:
        return torch.randn(shape, generator=gen) * scale

    r, k, v = randn(0.5), randn(0.5), randn()
    w = -F.softplus(-(randn() - 2.0)) - 0.5
    kk = F.normalize(randn().view(batch, steps, heads, head_size), dim=-1).view(shape)
    a = -kk
    b = kk * torch.sigmoid(randn())
    state = torch.randn((batch, heads, head_size, head_size), generator=gen) * 0.1
    r, w, k, v, a, b = (t.to(dtype=dtype, device=device).contiguous() for t in (r, w, k, v, a, b))
    return (r, w, k, v, a, b), state.to(device)


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """Largest absolute difference over the reference's largest magnitude (on CPU, in fp32)."""
    want = want.float().cpu()
    return ((got.float().cpu() - want).abs().max() / want.abs().max()).item()
