"""``registry demo``: the whole product, end to end, on tiny built-in RWKV-7 artifacts.

It builds three registries from the facts of the public cards the project grew from:

* ``DIR/registry``, shaped like seed 001 (No-22/rwkv-agent-weights): a State file and three MiSS
  runs on one base, the base's own score, a run that was never uploaded as a comparison row, known
  issues, train.json with the trainer, serving profiles; a Chinese card;
* ``DIR/finetune-registry``, shaped like seed 000 (a 13.3B full fine-tune): prompt format, stop
  rules, VRAM hint, a training stage, the dataset at a revision, an evaluation setup and results
  against a baseline; an English card.

* ``DIR/dataset-registry``, shaped like seed 002 (No-22/rwkv-agent-distill): the data the first one
  was trained on, two versions with seed 002's row counts (generated rows), its card listing the
  weights trained on each version (``registry dataset link``); the first registry's entries cite
  its versions' data sha256, and ``validate --linked`` checks both directions.

The weights are tiny random checkpoints (the 7.2B base name is the catalog's, so seed 001's base
gets a tiny name of its own); hashes of training data, backend versions and seed 000's table values
(lost from its card) are stand-ins.  Then it converts, gates on CPU, plans a publish and validates
each.  Each step prints one line; a failing step stops the demo with the step's error.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import torch

from ..artifacts.accept import BaseRequest
from ..artifacts.synthetic import TinySpec, make_adapter_file, make_base_state_dict, make_state_file, save_checkpoint
from ..core.errors import RegistryError
from ..core.hashing import hash_file
from ..core.models import Entry, Score
from ..core.names import VOCAB_NAME
from ..core.progress import Say, silent
from ..core.repo import Repo
from .add import AddRequest, add_weight
from .add_base import add_base
from .convert import convert_entry
from .dataset_link import link_models
from .demo_dataset import build_dataset_registry
from .describe import Description, Target, describe
from .eval_setup import set_setup
from .init import init_registry
from .score import Subject, add_score
from .set import set_field
from .smoke import smoke
from .train_stage import set_stage
from .validate import validate

MARKER = ".rwkv-registry-demo"
SPEC = TinySpec(n_layer=2, n_embd=128, vocab_size=65536)
DATA_STATE = "feb2fd6b" + "0" * 56  # stand-ins for the dataset hashes, shaped like seed 002's
DATA_MISS = "2fbf6760" + "0" * 56
DATA_NOVEL = "5d3040d2" + "0" * 56
AGENT_DATASET = "No-22/rwkv-agent-distill"
BACKEND_1016, BACKEND_1017 = "rwkv_lightning 1.8.1", "rwkv_lightning 1.8.2"  # "两天的推理后端版本不同"

Step = Callable[[str, str], None]


@dataclass(frozen=True)
class Built:
    root: Path
    base_file: Path  # the tiny base the weights fit (the gate needs it)


def _prepare(directory: Path) -> Path:
    directory = Path(directory).absolute()
    if directory.exists() and any(directory.iterdir()):
        if not (directory / MARKER).exists():
            raise RegistryError(
                "demo.not-empty",
                directory,
                "directory is not empty and was not made by the demo",
                "pass a new or empty directory",
            )
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text("made by `registry demo`; safe to delete\n")
    return directory


def _train_json(path: Path, trainer: dict, data_sha: str, hyper: dict, command: str, runs: dict | None = None) -> Path:
    body = {
        "trainer": trainer,
        "hyperparameters": hyper,
        "command": command,
        "data_sha256": data_sha,
        "runs": runs or {},
    }
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _score(benchmark: str, value: float, day: str, backend: str, **fields: Any) -> Score:
    """A result; ``fields`` are Score's other fields (by default in % and the mean of two runs)."""
    return Score.model_validate(
        {
            "unit": "%",
            "runs": 2,
            **fields,
            "benchmark": benchmark,
            "value": value,
            "date": date.fromisoformat(day),
            "backend": backend,
        }
    )


# ----------------------------------------------------------------------------------------------
# seed 001: No-22/rwkv-agent-weights (State + MiSS, Chinese card)

AGENT_BASE = "rwkv7-tiny-g1k-20260930-ctx4096"
LIGHTNING_TRAINER = {
    "version": "1.8.1",
    "package": "rwkv_lightning_cuda",
    "requires": "带 segments 掩码（提交 47df608）的版本，也就是 v1.8.1 及以后；更早的版本会对整段提示都算 loss，训出来不一样",
}
MISS_RUNS = (  # run, (initial, final) learning rate, note, exam result (value, questions), result note
    (
        "r16-lr2e-5-e2",
        (2e-5, 2e-6),
        "lr 2e-5→2e-6，2 epoch 共 1378 步，最终权重。MiSS 推荐",
        (52.2, 296.5),
        "对 v2.0 逐题 +95/−54，p=0.001",
    ),
    ("r16-lr1e-5-e2", (1e-5, 1e-6), "lr 1e-5→1e-6，对照组", (51.3, 291.5), "与 2e-5 分不出"),
    ("r16-lr3e-5-e2", (3e-5, 3e-6), "lr 3e-5→3e-6，对照组", (49.4, 280.5), "读对了却取错值、算错的题变多"),
)
UNPUBLISHED = "MiSS v2.0 r16 lr3e-5"


def _agent_inputs(inputs: Path, data: Mapping[str, str]) -> dict[str, Path]:
    inputs.mkdir(parents=True, exist_ok=True)
    base = save_checkpoint(inputs / f"{AGENT_BASE}.pth", make_base_state_dict(SPEC))
    fingerprint = hash_file(base)
    files = {"base": base, "state": make_state_file(inputs / "v141b-s1224.pth", SPEC, seed=3)}
    runs = {}
    for i, (run, (lr_init, lr_final), *_) in enumerate(MISS_RUNS):
        (inputs / run).mkdir(exist_ok=True)
        files[run] = make_adapter_file(
            inputs / run / "adapter-final.pth", SPEC, fingerprint, rank=16, scale=1.0, seed=10 + i
        )
        command = f"rwkv_miss_tune --miss_r 16 --miss_alpha 16 --ctx_len 8192 --micro_bsz 8 --epoch_count 2 --lr_init {lr_init} --lr_final {lr_final}"
        runs[run] = {"hyperparameters": {"lr_init": lr_init, "lr_final": lr_final}, "command": command}
    files["train_state"] = _train_json(
        inputs / "train-state.json", {**LIGHTNING_TRAINER, "name": "rwkv_state_tune"}, data["v1.41"],
        {"ctx_len": 8192, "micro_bsz": 8, "epochs": 3, "lr_init": 0.01, "lr_final": 0.00167},
        "rwkv_state_tune --ctx_len 8192 --micro_bsz 8 --epoch_count 3 --lr_init 0.01 --lr_final 0.00167",
    )  # fmt: skip
    files["train_miss"] = _train_json(
        inputs / "train-miss.json", {**LIGHTNING_TRAINER, "name": "rwkv_miss_tune"}, data["v2.1"],
        {"rank": 16, "alpha": 16, "ctx_len": 8192, "micro_bsz": 8, "epochs": 2},
        "rwkv_miss_tune --miss_r 16 --miss_alpha 16 --ctx_len 8192 --micro_bsz 8 --epoch_count 2", runs,
    )  # fmt: skip
    return files


def build_agent_registry(directory: Path, step: Step, data: Mapping[str, str] | None = None) -> Built:
    """A registry with seed 001's facts, through the same functions the commands call; ``data``:
    the data sha256 of v1.41 and v2.1 (the demo's dataset registry's; default: stand-ins)."""
    files = _agent_inputs(directory / "inputs", data or {"v1.41": DATA_STATE, "v2.1": DATA_MISS})
    step("build", f"tiny RWKV-7 base, State and MiSS adapters in {directory / 'inputs'}")
    root = init_registry(directory / "registry", title="RWKV-Agent 权重（State 与 MiSS 适配器）").root
    set_field(root, "languages", ["zh"])
    set_field(root, "repo-id", ["No-22/rwkv-agent-weights"])
    set_field(root, "summary", [
        "RWKV-Agent 在 RWKV-7 基模上训出的两种轻量权重，让基模学会当本地工具 Agent。两者都不改基模本身，推理时按请求挂上：",
        "State（state tuning）：只训练模型的初始状态，7.2B 上单文件 16MB，配不带思考的 g1k 格式。MiSS 适配器：一种低秩适配器，7.2B r16 约 36MB，配带思考的 g1k-think 格式。",
    ])  # fmt: skip
    step("init", f"{root} (zh card)")
    base = add_base(
        root, BaseRequest(path=files["base"], filename=files["base"].name, source="BlinkDL/rwkv7-g1", vocab=VOCAB_NAME)
    ).base
    step("add-base", f"{base.name} sha256 {base.sha256[:12]}…")
    state = add_weight(
        root,
        AddRequest(
            files["state"],
            AGENT_BASE,
            "state",
            "v1.41",
            files["train_state"],
            recommended=True,
            dataset_repo=AGENT_DATASET,
            notes="lr 0.01→0.00167，第 1224 步（共 1374 步）。State 推荐",
        ),
    )
    miss = {
        run: add_weight(
            root,
            AddRequest(
                files[run],
                AGENT_BASE,
                "miss",
                "v2.1",
                files["train_miss"],
                run=run,
                recommended=i == 0,
                dataset_repo=AGENT_DATASET,
                notes=note,
            ),
        )
        for i, (run, _, note, *_) in enumerate(MISS_RUNS)
    }
    for entry in (state, *miss.values()):
        step("add", entry.path)
    describe(root, Target(path=state.path), Description(profile="g1k", sampling="g1k-agent"))
    describe(root, Target(method="miss"), Description(profile="g1k-think", sampling="g1k-agent"))
    describe(
        root,
        Target(path=miss["r16-lr2e-5-e2"].path),
        Description(
            adapter_id="v21-lr2e-5-e2",
            known_issues=(
                "v2.1 的退步：网页题、不该调工具的题比 v2.0 少对几题（本地搜空后不上网、纯数学题去调计算器）。",
            ),
        ),
    )
    describe(
        root,
        Target(base=AGENT_BASE),
        Description(
            known_issues=(
                "训练数据的已知问题（含 v1.41 里 80 行由测试题改编）见数据集仓库 README。",
                "MiSS 模型被问身份时可能自称 Qwen（思考风格继承自千问老师）。",
            )
        ),
    )
    step("describe", "serving profiles (g1k, g1k-think, g1k-agent), adapter id, known issues")
    set_setup(
        root,
        "exam",
        {"items": 568},
        describe=[
            "新考卷 exam（568 题，App harness，每组跑两遍取平均；10-16 和 10-17 两天的推理后端版本不同，跨天只作参考）。",
            "完整报告见 GitHub 仓库 docs/evaluations/（exam-3arm-20261016、exam-v21-20261017）。",
        ],
    )
    set_setup(
        root,
        "old-bank",
        {},
        describe=[
            "旧题库，三次平均：workbank 干净题、bfcl-product（60 题）、bash 探针（26 题）。完整报告见 GitHub 仓库 docs/evaluations/state-v141-20261013。"
        ],
    )
    exam = {"setup": "exam"}
    add_score(root, Subject(base=AGENT_BASE), _score("exam", 21.4, "2026-10-16", BACKEND_1016, **exam))
    add_score(root, state.path, _score("exam", 46.9, "2026-10-16", BACKEND_1016, **exam))
    add_score(
        root,
        Subject(base=AGENT_BASE, reference=UNPUBLISHED, method="miss"),
        _score("exam", 46.0, "2026-10-17", BACKEND_1017, count=261.0, **exam),
    )
    for run, _, _, (value, count), note in MISS_RUNS:
        baseline = {"baseline": UNPUBLISHED} if run == "r16-lr2e-5-e2" else {}
        add_score(
            root,
            miss[run].path,
            _score("exam", value, "2026-10-17", BACKEND_1017, count=count, notes=note, **exam, **baseline),
        )
    old_bank = {"setup": "old-bank", "runs": 3}
    for benchmark, unit, v141, v13 in (
        ("workbank", "", 25.0, 22.7),
        ("bfcl-product", "/60", 41.0, 24.3),
        ("bash", "/26", 9.0, 2.0),
    ):
        add_score(root, state.path, _score(benchmark, v141, "2026-10-13", BACKEND_1016, unit=unit, **old_bank))
        add_score(
            root,
            Subject(base=AGENT_BASE, reference="State v1.3", method="state"),
            _score(benchmark, v13, "2026-10-13", BACKEND_1016, unit=unit, **old_bank),
        )
    add_score(
        root, Subject(base=AGENT_BASE), _score("bfcl-product", 44.0, "2026-10-13", BACKEND_1016, unit="/60", **old_bank)
    )
    step("score", "exam: base alone, State, an unpublished MiSS v2.0 run, three MiSS v2.1 runs; the old bank")
    for entry in (state, miss["r16-lr2e-5-e2"]):
        twin = convert_entry(root, entry.path, 1 << 40)
        step("convert", f"{entry.path} -> {twin.path} (bit-exact)")
    return Built(root, files["base"])


# ----------------------------------------------------------------------------------------------
# seed 000: a single 13.3B full fine-tune (English card)

NOVEL_BASE = "rwkv7-g1h-13.3b-20260710-ctx10240"
NOVEL_DATASET = "mikuhhn1239/novel-agent-sft-dataset"
NOVEL_REVISION = "5d3040d21f51b3ce90b9396b058e552c47f43cd5"
NOVEL_PROMPT = "System: 你是一个中文小说归因辅助助手。只能从候选角色中选择，并只输出 JSON。\n\nUser: 候选角色：甲、乙\n上下文：……\n\nAssistant:"
NOVEL_EXAMPLE = 'System: 场景边界检测。仅输出 {"boundaries":[N]}\n\nUser: [P1] 雨停了。\n[P2] 三天后，他回到故乡。\n[P3] 他推开老宅的门。\n\nAssistant:'
README_BASELINE = "dataset README (v4-590)"
NOVEL_TEXTS = {
    "summary": [
        "This is an experimental Chinese novel-agent supervised fine-tune of RWKV-7 G1h 13.3B. It targets novel continuation/instruction following and structured narrative tasks such as speaker attribution, narrative-type classification, and scene-boundary detection.",
        "This release is the full-pass checkpoint after one nominal packed-data pass over the local packed training stream. Use it for research and evaluation rather than production.",
    ],
    "intended-use": [
        "Research on Chinese fiction generation and continuation.",
        "Experiments in speaker attribution, narrative classification, and scene boundary detection.",
        "Further fine-tuning and evaluation of RWKV-7 recurrent inference.",
    ],
    "limitations": [
        "This is an experimental SFT checkpoint; output quality may be unstable.",
        "The configured 10,240-token training segment length is not evidence of reliable performance across that full length.",
        "Generated JSON may be malformed or violate the requested schema.",
        "The model has not been evaluated for factuality, bias, memorization, harmful content, or prompt-injection resistance.",
        "Training data contains third-party Chinese novel text. Per-book rights and provenance are not fully established, so users must assess copyright, privacy, and downstream-use obligations for their jurisdiction and use case.",
        "Do not rely on generated text for legal, medical, financial, safety-critical, or other high-impact decisions.",
    ],
    "attribution": [
        "The upstream RWKV-7 G1h checkpoint is distributed under Apache-2.0, and this repository retains that model-repository license metadata. The dataset's Apache-2.0 label does not establish rights to every underlying novel. The data rights caveat above remains applicable to this derivative checkpoint.",
        "RWKV implementation and base-model credit: `BlinkDL/RWKV-LM` and `BlinkDL/rwkv7-g1`.",
    ],
}
# (benchmark, unit, base alone, this checkpoint): stand-in values, the seed card's tables were lost
NOVEL_RESULTS = (
    ("speaker attribution accuracy", "%", 38.5, 71.2),
    ("narrative-type accuracy", "%", 44.0, 80.3),
    ("scene boundary F1", "%", 21.7, 63.9),
)
README_F1 = 58.1
F1_FOOTNOTE = "The dataset README's published scene F1 is for its v4-590 evaluation setup, not this local merged v4/v4.1 held-out split, so it is a directional reference rather than a strict apples-to-apples baseline."


def build_finetune_registry(directory: Path, step: Step) -> Built:
    """A registry with seed 000's facts, through the same functions the commands call."""
    inputs = directory / "inputs-finetune"
    inputs.mkdir(parents=True, exist_ok=True)
    base_file = save_checkpoint(inputs / f"{NOVEL_BASE}.pth", make_base_state_dict(SPEC))
    gen = torch.Generator().manual_seed(5)
    tuned = {
        k: v + 0.01 * torch.randn(v.shape, generator=gen).to(v.dtype) for k, v in make_base_state_dict(SPEC).items()
    }
    weight = save_checkpoint(inputs / "rwkv-final.pth", tuned)
    train = _train_json(
        inputs / "train.json", {"name": "RWKV-LM train.py", "version": "x070"}, DATA_NOVEL,
        {"ctx_len": 10240, "micro_bsz": 2, "lr_init": 5e-7, "lr_final": 5e-7, "warmup_steps": 10, "weight_decay": 0.01, "grad_cp": 1, "magic_prime": True},
        "python train.py --my_testing x070 --ctx_len 10240 --micro_bsz 2 --lr_init 5e-7 --lr_final 5e-7 --warmup_steps 10 --weight_decay 0.01 --grad_clip 0.5",
    )  # fmt: skip
    step("build", f"tiny RWKV-7 base and full fine-tune in {inputs}")
    root = init_registry(
        directory / "finetune-registry", title="RWKV Novel Agent G1h 13B (10,240 context)", license="apache-2.0"
    ).root
    set_field(root, "languages", ["en"])
    set_field(root, "repo-id", ["xiaol/rwkv-novel-agent-g1h-13b-ctx10240"])
    for field, texts in NOVEL_TEXTS.items():
        set_field(root, field, texts)
    step("init", f"{root} (en card)")
    add_base(root, BaseRequest(path=base_file, filename=base_file.name, source="BlinkDL/rwkv7-g1", vocab=VOCAB_NAME))
    entry: Entry = add_weight(
        root,
        AddRequest(
            weight,
            NOVEL_BASE,
            "full",
            "v1.0",
            train,
            recommended=True,
            dataset_repo=NOVEL_DATASET,
            notes="Full-pass checkpoint after one nominal packed-data pass",
        ),
    )
    step("add", entry.path)
    describe(root, Target(path=entry.path), Description(
        prompt_format=NOVEL_PROMPT, prompt_example=NOVEL_EXAMPLE, stop_tokens=(0,), stop_texts=("\n\nUser:",), keep_stop_text=False,
        parameters=13_300_000_000, dtype="bf16", dataset_revision=NOVEL_REVISION,
    ))  # fmt: skip
    set_stage(root, entry.path, "full-pass continuation", {
        "gpus": 6, "precision": "BF16", "deepspeed_stage": 2, "global_batch": 12, "tokens_per_update": 122_880, "loss_masking": "assistant-only",
        "lr_schedule": "constant learning rate 5e-7 after 10 warmup steps", "weight_decay": 0.01, "grad_clip": 0.5,
        "conversations": 131_920, "tokens": 413_123_655, "supervised_tokens": 329_536_148,
    }, describe=["Training data was derived from the dataset and includes continuation, instruction, attribution, narrative-analysis, and scene-boundary examples."],
       caveats=['Because packed sampling used the training script\'s magic-prime schedule, "one nominal pass" should not be read as every raw token being seen exactly once.'])  # fmt: skip
    step("describe", "prompt format, stop rules, VRAM hint, dataset revision, training stage")
    set_setup(root, "local-heldout", {
        "runtime": "rwkv==0.8.32", "torch": "2.7.1+cu128", "precision": "BF16", "gpu": "NVIDIA A800 80 GB",
        "decoding": "greedy: temperature=0, top_p=0, alpha_frequency=0, alpha_presence=0, chunk_len=256, stop token [0], stop text \\n\\nUser:",
    }, describe=[
        "Local held-out test split. Prompts were rendered with the same local packing code used for training, ending at Assistant:. Invalid JSON counted as wrong or empty predictions.",
        "The last recorded training loss is not an evaluation metric and is intentionally omitted.",
    ], metrics=["scene boundary F1=F1 of predicted against gold boundary paragraph indices", "speaker attribution accuracy=share of quotes attributed to the gold speaker"])  # fmt: skip
    # The dataset README's figure was measured elsewhere, in its own setup: it is recorded as such
    # (its own setup and source, not this run's date and backend), and compared only with a footnote.
    set_setup(
        root,
        "v4-590",
        {},
        describe=[
            "The dataset README's published evaluation (its v4-590 setup); the figure is copied from there, not run here."
        ],
    )
    add_score(
        root, Subject(base=NOVEL_BASE, reference=README_BASELINE, location=f"{NOVEL_DATASET} README"),
        _score("scene boundary F1", README_F1, "2026-07-25", "as published in the dataset README", setup="v4-590", runs=1),
    )  # fmt: skip
    setup = {"setup": "local-heldout", "runs": 1}
    for benchmark, unit, before, after in NOVEL_RESULTS:
        add_score(
            root, Subject(base=NOVEL_BASE), _score(benchmark, before, "2026-07-25", "rwkv 0.8.32", unit=unit, **setup)
        )
        compared = (
            {"baseline": README_BASELINE, "footnote": F1_FOOTNOTE}
            if benchmark == "scene boundary F1"
            else {"baseline": NOVEL_BASE}
        )
        add_score(
            root, entry.path, _score(benchmark, after, "2026-07-25", "rwkv 0.8.32", unit=unit, **setup, **compared)
        )
    step("score", "local held-out results against the starting checkpoint and the dataset README")
    return Built(root, base_file)


# ----------------------------------------------------------------------------------------------


def run_demo(directory: Path, say: Say | None = None) -> dict:
    """Build both registries, then gate, plan and validate each; the registries' paths and one record per step."""
    say = say or silent
    steps: list[dict] = []

    def step(name: str, detail: str) -> None:
        steps.append({"step": name, "detail": detail})
        say(f"[bold green]✓[/] {name}: {detail}")

    from .publish import PublishOptions, publish  # noqa: PLC0415 — only this step needs the Hub client

    directory = _prepare(directory)
    dataset, data = build_dataset_registry(directory, step)
    built = {
        "seed001": build_agent_registry(directory, step, data),
        "seed000": build_finetune_registry(directory, step),
    }
    link_models(dataset, built["seed001"].root)
    step(
        "dataset link",
        f"{dataset}: the weights of {built['seed001'].root} trained on each version, matched by data sha256",
    )
    for built_one in built.values():
        root = built_one.root
        for receipt in smoke(root, [], built_one.base_file, "cpu"):
            verdict = "passed" if receipt.passed else "FAILED " + ", ".join(c.name for c in receipt.failed_checks())
            step("smoke", f"{receipt.entry} {verdict} (cpu gate; CUDA runs: docs/gpu-gate.md)")
        # The demo never contacts the Hub: it plans against an empty remote.
        target = Repo.open(root).load_index().registry.repo_id or "demo/registry"
        step(
            "publish --dry-run",
            publish(
                root, PublishOptions(target, dry_run=True, allow_cpu_gate=True, assume_empty_remote=True)
            ).summary(),
        )
        findings = validate(root)
        if findings:
            raise RegistryError("demo.invalid", root, findings[0].one_line(), "report this bug")
        step("validate", f"{root} is valid")
    step(
        "publish --dry-run",
        publish(dataset, PublishOptions(AGENT_DATASET, dry_run=True, assume_empty_remote=True)).summary(),
    )
    for root, linked in ((dataset, built["seed001"].root), (built["seed001"].root, dataset)):
        findings = validate(root, linked=linked)
        if findings:
            raise RegistryError("demo.invalid", root, findings[0].one_line(), "report this bug")
        step("validate --linked", f"{root} agrees with {linked}")
    registries = {**{name: str(b.root) for name, b in built.items()}, "seed002": str(dataset)}
    return {"ok": True, "registries": registries, "steps": steps}
