"""The official ``rwkv==0.8.32`` runtime as the gate's independent implementation.

It reads its switches from the environment when ``rwkv.model`` is first imported, so they are
set here right before that import: RWKV_V7_ON=1 always, RWKV_CUDA_ON=1 on CUDA (its own
JIT-built wkv7s kernel) and 0 on CPU.  State files go into its state list at ``[3i+1]``; merged
MiSS weights replace its (transposed) Linear weights, exactly where its loader put them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol
from unittest import mock

import torch

from ..artifacts.rwkv7 import state_key
from ..core.errors import RegistryError

# The loader stores these weights transposed (x @ W form).
_TRANSPOSED = ("key.weight", "value.weight", "receptance.weight", "output.weight", "head.weight")


@contextlib.contextmanager
def quietly() -> Iterator[None]:
    """Keep what the official runtime prints off both streams: its banner, its ``Loading …``
    lines, torch's FutureWarnings, the compiler output of its JIT builds (C level too).  What was
    printed goes to stderr only when the block fails, or with REGISTRY_DEBUG=1."""
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as sink:
        text = open(
            os.dup(sink.fileno()), "w", encoding="utf-8", errors="replace"
        )  # closed below, before the streams are restored
        saved = os.dup(1), os.dup(2)
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        failed = True
        try:
            with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
                yield
            failed = False
        finally:
            text.close()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            if failed or os.environ.get("REGISTRY_DEBUG") not in (None, "", "0"):
                sink.seek(0)
                sys.stderr.write(sink.read().decode("utf-8", "replace"))
                sys.stderr.flush()


def import_official(device: str) -> ModuleType:
    """``rwkv.model``, imported for ``device`` (on CUDA its import JIT-builds the package's kernel)."""
    wanted_cuda = "1" if device == "cuda" else "0"
    if "rwkv.model" in sys.modules and os.environ.get("RWKV_CUDA_ON") != wanted_cuda:
        raise RegistryError(
            "gate.official-runtime",
            "rwkv.model",
            f"the rwkv package was already imported with RWKV_CUDA_ON={os.environ.get('RWKV_CUDA_ON')}",
            f"run the {device} gate in a fresh process",
        )
    os.environ["RWKV_V7_ON"] = "1"
    os.environ["RWKV_JIT_ON"] = "1"
    os.environ["RWKV_CUDA_ON"] = wanted_cuda
    try:
        with quietly():  # its import prints a banner; on CUDA its JIT build prints compiler output
            import rwkv.model as model  # noqa: PLC0415 optional dependency: rwkv (reads the switches set above)
    except ImportError as error:
        raise RegistryError(
            "gate.official-runtime", "rwkv", f"cannot import the official runtime ({error})", "pip install rwkv==0.8.32"
        ) from error
    _no_tf32()
    return model


def _no_tf32() -> None:
    """Importing rwkv.model turns TF32 on for all of torch; the gate's fp32 reference needs it off."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


class _RWKV(Protocol):
    """What the gate uses of ``rwkv.model.RWKV`` (the package ships no type hints)."""

    z: dict[str, torch.Tensor]

    def generate_zero_state(self) -> list[torch.Tensor]: ...

    def forward(
        self, tokens: list[int], state: list[torch.Tensor] | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]: ...


@dataclass
class OfficialModel:
    """An ``rwkv.model.RWKV`` plus what it took to load."""

    model: _RWKV
    device: str
    load_s: float
    version: str

    def state_from_file(self, tensors: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
        """Zero state with each layer's WKV slot replaced by the State file's time_state."""
        state = self.model.generate_zero_state()
        for i in range(len(state) // 3):
            state[3 * i + 1] = tensors[state_key(i)].to(device=self.device, dtype=torch.float32).clone()
        return state

    def replace_weight(self, name: str, weight: torch.Tensor) -> None:
        """Overwrite one Linear weight (a merged MiSS target) in the loader's layout, in place.

        The TorchScript module captured the loader's tensors when it was built, so assigning a new
        tensor to ``z`` would go unseen: the bytes are copied into the captured tensor instead.
        Only the transposed Linears are replaceable: the loader made them its own copies, while
        other weights may share the caller's tensors (:func:`load_official` with ``tensors``).
        """
        if name not in self.model.z or not name.endswith(_TRANSPOSED):
            raise RegistryError(
                "gate.official-runtime", name, "not a Linear weight of the official runtime", "report this bug"
            )
        with torch.no_grad():
            self.model.z[name].copy_(weight.t())

    def logits(self, tokens: list[int], state: list[torch.Tensor] | None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        state = [s.clone() for s in state] if state is not None else None
        out, new_state = self.model.forward(tokens, state)
        return out.float(), new_state


def load_official(checkpoint: Path, device: str, tensors: Mapping[str, torch.Tensor] | None = None) -> OfficialModel:
    """Load a .pth checkpoint (the loader wants the path without .pth) on cuda bf16 or cpu fp32.

    With ``tensors`` (the checkpoint's tensors, already read and checked by the gate, possibly on
    the GPU) the official loader runs on them instead of reading the file a second time: its
    ``torch.load`` of ``checkpoint`` returns them, and everything after that is its own code.
    Handed :meth:`~registry.gate.runtime.Rwkv7.checkpoint` (our runtime's tensors as views in the
    file's layout, in the strategy's dtype and device), it keeps them as they are: its transposes
    give back our stored tensors, its ``.to()`` returns them, so both runtimes share one copy.
    """
    module = import_official(device)
    strategy = "cuda bf16" if device == "cuda" else "cpu fp32"
    start = time.perf_counter()
    with quietly(), _loading_from(checkpoint, tensors):  # the loader prints "Loading …" lines
        model = module.RWKV(model=str(checkpoint)[: -len(".pth")], strategy=strategy)
    _no_tf32()
    return OfficialModel(model, device, time.perf_counter() - start, version("rwkv"))


@contextlib.contextmanager
def _loading_from(checkpoint: Path, tensors: Mapping[str, torch.Tensor] | None) -> Iterator[None]:
    """While the official loader runs, its ``torch.load`` of ``checkpoint`` yields ``tensors``."""
    if tensors is None:
        yield
        return
    real_load = torch.load

    def load(path: str | Path, *args: Any, **kwargs: Any) -> Any:
        if Path(path) != checkpoint:
            return real_load(path, *args, **kwargs)
        return dict(tensors)  # a copy: the loader deletes each key once it has converted it

    with mock.patch.object(torch, "load", load):
        yield
