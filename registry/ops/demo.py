"""``registry demo``: the whole product, end to end, on tiny built-in RWKV-7 artifacts.

It builds a registry shaped like seed 001 (rwkv-agent-weights): two bases, a State file, three
MiSS runs, a full fine-tune, scores on two dates and backends; then converts, renders the card,
gates on CPU and plans a publish.  Each step prints one line; a failing step stops the demo with
the step's error.
"""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import torch

from ..errors import RegistryError
from ..hashing import hash_file
from ..models import Score
from ..progress import Echo
from ..synthetic import (
    TinySpec,
    make_adapter_file,
    make_base_state_dict,
    make_state_file,
    save_checkpoint,
)
from .add import AddRequest, add_weight
from .add_base import BaseRequest, add_base
from .convert import convert_entry
from .init import init_registry
from .score import add_score
from .smoke import smoke
from .validate import validate

MARKER = ".rwkv-registry-demo"
BASE_A = "rwkv7-tiny-g1k-20260930-ctx4096"
BASE_B = "rwkv7-tiny-g1k-20261120-ctx4096"
DATA_STATE = "feb2fd6b" + "0" * 56  # stand-ins for the dataset hashes, shaped like seed 002's
DATA_MISS = "2fbf6760" + "0" * 56
DATA_FULL = "5d3040d2" + "0" * 56
SPEC = TinySpec(n_layer=2, n_embd=128, vocab_size=65536)
DEMO_REPO_ID = "demo/rwkv-agent-weights"  # the demo never contacts the Hub: it plans against an empty remote



def _prepare(directory: Path) -> Path:
    directory = Path(directory).absolute()
    if directory.exists() and any(directory.iterdir()):
        if not (directory / MARKER).exists():
            raise RegistryError("demo.not-empty", directory, "directory is not empty and was not made by the demo", "pass a new or empty directory")
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text("made by `registry demo`; safe to delete\n")
    return directory


def _train_json(path: Path, trainer: str, data_sha: str, hyper: dict, command: str, runs: dict | None = None) -> Path:
    body = {"trainer": {"name": trainer, "version": "1.8.1"}, "hyperparameters": hyper, "command": command, "data_sha256": data_sha}
    if runs:
        body["runs"] = runs
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return path


def build_inputs(inputs: Path) -> dict[str, Path]:
    """Tiny bases, a State file, three MiSS adapters, a full fine-tune and their train.json files."""
    inputs.mkdir(parents=True, exist_ok=True)
    base_a = save_checkpoint(inputs / f"{BASE_A}.pth", make_base_state_dict(SPEC))
    base_b = save_checkpoint(inputs / f"{BASE_B}.pth", make_base_state_dict(TinySpec(**{**SPEC.__dict__, "seed": 7})))
    fingerprint = hash_file(base_a)
    files = {"base_a": base_a, "base_b": base_b, "state": make_state_file(inputs / "v141b-s1224.pth", SPEC, seed=3)}
    runs = {}
    for i, lr in enumerate(("2e-5", "1e-5", "3e-5")):
        run = f"r16-lr{lr}-e2"
        (inputs / run).mkdir(exist_ok=True)
        files[run] = make_adapter_file(inputs / run / "adapter-final.pth", SPEC, fingerprint, rank=16, scale=1.0, seed=10 + i)
        runs[run] = {"hyperparameters": {"lr_init": float(lr), "lr_final": float(lr) / 10}}
    tuned = {k: v + 0.01 * torch.randn(v.shape, generator=torch.Generator().manual_seed(5)).to(v.dtype) for k, v in make_base_state_dict(SPEC).items()}
    files["full"] = save_checkpoint(inputs / "rwkv-final.pth", tuned)
    files["train_state"] = _train_json(inputs / "train-state.json", "rwkv_state_tune", DATA_STATE, {"ctx_len": 8192, "micro_bsz": 8, "epochs": 3, "lr_init": 0.01, "lr_final": 0.00167}, "rwkv_state_tune --ctx_len 8192 --micro_bsz 8 --epoch_count 3 --lr_init 0.01 --lr_final 0.00167")
    files["train_miss"] = _train_json(inputs / "train-miss.json", "rwkv_miss_tune", DATA_MISS, {"rank": 16, "alpha": 16, "ctx_len": 8192, "micro_bsz": 8, "epochs": 2}, "rwkv_miss_tune --miss_r 16 --ctx_len 8192 --micro_bsz 8 --epoch_count 2", runs)
    files["train_full"] = _train_json(inputs / "train-full.json", "RWKV-LM", DATA_FULL, {"lr": 5e-7, "warmup_steps": 10, "weight_decay": 0.01, "grad_clip": 0.5}, "train.py --lr_init 5e-7 --lr_final 5e-7 --warmup_steps 10")
    return files


def run_demo(directory: Path, echo: Echo | None = None) -> list[dict]:
    """Run every pipeline step; return one record per step."""
    say = echo or (lambda _line: None)
    steps: list[dict] = []

    def step(name: str, detail: str) -> None:
        steps.append({"step": name, "detail": detail})
        say(f"[bold green]✓[/] {name}: {detail}")

    directory = _prepare(directory)
    files = build_inputs(directory / "inputs")
    step("build", f"tiny RWKV-7 artifacts in {directory / 'inputs'}")
    root = init_registry(directory / "registry", title="RWKV-Agent weights (demo)").root
    step("init", str(root))
    for key in ("base_a", "base_b"):
        base = add_base(root, BaseRequest(path=files[key], filename=files[key].name, source="BlinkDL/rwkv7-g1", vocab="rwkv_vocab_v20230424.txt")).base
        step("add-base", f"{base.name} sha256 {base.sha256[:12]}…")
    additions = [
        AddRequest(files["state"], BASE_A, "state", "v1.41", files["train_state"], recommended=True, dataset_repo="No-22/rwkv-agent-distill", notes="step 1224 of 1374; State recommended"),
        *(
            AddRequest(files[run], BASE_A, "miss", "v2.1", files["train_miss"], run=run, recommended=run == "r16-lr2e-5-e2", dataset_repo="No-22/rwkv-agent-distill", notes=note)
            for run, note in (("r16-lr2e-5-e2", "final weights; MiSS recommended"), ("r16-lr1e-5-e2", "control"), ("r16-lr3e-5-e2", "control"))
        ),
        AddRequest(files["full"], BASE_A, "full", "v1.0", files["train_full"], notes="full fine-tune"),
    ]
    entries = [add_weight(root, request) for request in additions]
    for entry in entries:
        step("add", f"{entry.path}")
    for entry, value, day, backend in (
        (entries[0], 46.9, "2026-10-16", "rwkv_lightning 1.8.1"),
        (entries[1], 52.2, "2026-10-17", "rwkv_lightning 1.8.2"),
        (entries[2], 51.3, "2026-10-17", "rwkv_lightning 1.8.2"),
        (entries[3], 49.4, "2026-10-17", "rwkv_lightning 1.8.2"),
    ):
        add_score(root, entry.path, Score(benchmark="exam", value=value, unit="%", date=date.fromisoformat(day), backend=backend, runs=2))
        step("score", f"{entry.path} exam {value}% ({day}, {backend})")
    for entry, shard_size in ((entries[0], 1 << 40), (entries[1], 1 << 40), (entries[4], 8 << 20)):
        derived = convert_entry(root, entry.path, shard_size)
        shards = f" in {len(derived.shards)} shards" if derived.shards else ""
        step("convert", f"{entry.path} -> {derived.path}{shards} (bit-exact)")
    for receipt in smoke(root, [], files["base_a"], "cpu"):
        verdict = "passed" if receipt.passed else "FAILED " + ", ".join(c.name for c in receipt.failed_checks())
        step("smoke", f"{receipt.entry} {verdict} (cpu gate; CUDA runs: docs/gpu-gate.md)")
    from .publish import PublishOptions, publish  # noqa: PLC0415 — only this step needs the Hub client

    step("publish --dry-run", publish(root, PublishOptions(DEMO_REPO_ID, dry_run=True, allow_cpu_gate=True, assume_empty_remote=True)).summary())
    findings = validate(root)
    if findings:
        raise RegistryError("demo.invalid", root, findings[0].one_line(), "report this bug")
    step("validate", "registry is valid")
    return steps
