"""What the gate builds in the background, and the environment its receipts name.

Our kernel (CUDA) and the official runtime's import (its JIT builds on CUDA) start in a small
pool while the weights are hashed and loaded; the kernel check waits for them once per run.
"""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from importlib.metadata import version
from typing import Any

import torch

from .. import __version__
from .kernel import KernelBuild, build_kernel, kernel_source_hash
from .official import import_official
from .receipt import Environment


@contextmanager
def background_builds(device: str) -> Iterator[list[Future[Any]]]:
    """The builds ``device`` needs, started; left only once they have finished."""
    with ThreadPoolExecutor(2, thread_name_prefix="build") as pool:
        builds: list[Future[Any]] = [pool.submit(import_official, device)]
        if device == "cuda":
            builds.append(pool.submit(build_kernel))
        yield builds


def built_kernel(builds: list[Future[Any]]) -> KernelBuild | None:
    """Once every build has finished: our kernel's build (None on CPU)."""
    built = [build.result() for build in builds]
    return next((b for b in built if isinstance(b, KernelBuild)), None)


def environment(device: str) -> Environment:
    gpu = driver = None
    if device == "cuda":
        gpu = torch.cuda.get_device_name(0)
        try:
            driver = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            driver = None
    return Environment(
        device=device,
        gpu=gpu,
        driver=driver,
        torch=torch.__version__,
        cuda=torch.version.cuda,
        rwkv=version("rwkv"),
        python=platform.python_version(),
        registry=__version__,
        kernel_source_hash=kernel_source_hash(),
    )
