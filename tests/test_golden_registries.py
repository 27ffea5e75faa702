"""The two golden registries, built from the seeds' facts with tiny weights (the demo's builders,
which call the same functions as the commands), and every fact of each seed in its rendered card.

Seed 001 (No-22/rwkv-agent-weights): State + three MiSS runs, base score, an unpublished comparison
row, known issues, trainer, serving profiles; a Chinese card.  Seed 000 (a 13.3B full fine-tune):
prompt format, stop rules, VRAM hint, training stage, dataset revision, evaluation against a
baseline; an English card.  What the tiny registries cannot carry is said where it applies.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from huggingface_hub import ModelCard
from jsonschema import Draft202012Validator

from registry.cli import main
from registry.core.models import Index
from registry.core.resources import schema_dir
from registry.core.sums import parse_sums
from registry.ops.demo import build_agent_registry, build_finetune_registry
from registry.ops.publish import PublishOptions, publish
from registry.ops.validate import validate

from .conftest import snapshot

CJK = re.compile(r"[\u4e00-\u9fff]")

# Seed 001's facts as its card states them.  Its base name and sha256 are the catalog's official
# 7.2B file, which add-base refuses for a tiny file of other bytes; the index-level golden card
# (tests/test_card.py, card_seed001.md) carries those two.
SEED001_FACTS = [
    "RWKV-Agent 权重（State 与 MiSS 适配器）",
    "RWKV-Agent 在 RWKV-7 基模上训出的两种轻量权重，让基模学会当本地工具 Agent。",
    "7.2B 上单文件 16MB，配不带思考的 g1k 格式",
    "7.2B r16 约 36MB，配带思考的 g1k-think 格式",
    "No-22/rwkv-agent-distill",
    "BlinkDL/rwkv7-g1",
    "rwkv_vocab_v20230424.txt",
    "state/v1.41/v141b-s1224.pth",
    "miss/v2.1/r16-lr2e-5-e2/adapter-final.pth",
    "miss/v2.1/r16-lr1e-5-e2/adapter-final.pth",
    "miss/v2.1/r16-lr3e-5-e2/adapter-final.pth",
    "feb2fd6b…",
    "2fbf6760…",
    "lr 0.01→0.00167，第 1224 步（共 1374 步）。State 推荐",
    "lr 2e-5→2e-6，2 epoch 共 1378 步，最终权重。MiSS 推荐",
    "lr 1e-5→1e-6，对照组",
    "lr 3e-5→3e-6，对照组",
    # 训练器
    "rwkv_state_tune",
    "rwkv_miss_tune",
    "rwkv_lightning_cuda",
    "47df608",
    "v1.8.1 及以后",
    "训练时没有记录",
    # each MiSS run's own command line (the three differ by --lr_init)
    "--epoch_count 2 --lr_init 2e-05 --lr_final 2e-06\n",
    "--epoch_count 2 --lr_init 1e-05 --lr_final 1e-06\n",
    "--epoch_count 2 --lr_init 3e-05 --lr_final 3e-06\n",
    # 跑分
    "568 题",
    "App harness",
    "每组跑两遍取平均",
    "跨天只作参考",
    "基模（不挂任何权重）",
    "21.4%",
    "46.9%",
    "MiSS v2.0 r16 lr3e-5（未上传）",
    "46.0%（261.0 题）",
    "52.2%（296.5 题）",
    "对 v2.0 逐题 +95/−54，p=0.001",
    "51.3%（291.5 题）",
    "与 2e-5 分不出",
    "49.4%（280.5 题）",
    "读对了却取错值、算错的题变多",
    "state-v141-20261013",
    "exam-3arm-20261016",
    "exam-v21-20261017",
    # 已知问题
    "含 v1.41 里 80 行由测试题改编",
    "MiSS 模型被问身份时可能自称 Qwen（思考风格继承自千问老师）",
    "v2.1 的退步：网页题、不该调工具的题比 v2.0 少对几题",
    # 用法
    "rwkv-cli state upload --api-url <URL> --file rwkv7-tiny-g1k-20260930-ctx4096/state/v1.41/v141b-s1224.pth",
    "rwkv-cli adapter register --api-url <URL> --adapter-id v21-lr2e-5-e2 --file "
    "rwkv7-tiny-g1k-20260930-ctx4096/miss/v2.1/r16-lr2e-5-e2/adapter-final.pth",
    "--state-id <state_id> --profile g1k --sampling g1k-agent",
    "--profile g1k-think --sampling g1k-agent",
    "v1.8.1 及以后",
    "/v1/adapters",
    "`adapter-final/miss.json`",
    "`__metadata__`",
    "content_version",
    "hf download No-22/rwkv-agent-weights",
    "sha256sum -c SHA256SUMS",
    "本仓库尚未指定许可证。",
]

# Seed 000's facts.  Its evaluation tables did not survive in the seed's text, so the values are the
# demo's stand-ins (NOVEL_RESULTS); the table's shape, setup, baseline and footnote are the seed's.
SEED000_FACTS = [
    "RWKV Novel Agent G1h 13B (10,240 context)",
    "This is an experimental Chinese novel-agent supervised fine-tune of RWKV-7 G1h 13.3B.",
    "speaker attribution, narrative-type classification, and scene-boundary detection",
    "Use it for research and evaluation rather than production.",
    "BlinkDL/rwkv7-g1/rwkv7-g1h-13.3b-20260710-ctx10240.pth",
    "This repository does not include a Transformers config or Safetensors conversion",
    # prompt format and stop rules
    "System: 你是一个中文小说归因辅助助手。只能从候选角色中选择，并只输出 JSON。\n\nUser: "
    "候选角色：甲、乙\n上下文：……\n\nAssistant:",
    "Keep the single spaces after role labels.",
    "Generation should stop on token 0 (EOD) or the text `\\n\\nUser:`. Consume the stop sequence instead of "
    "displaying it.",
    # inference
    "One GPU with about 30 GiB of available VRAM is recommended for BF16 inference",
    'python -m pip install "torch>=2.5" "rwkv==0.8.32" "tokenizers>=0.13.2" ninja',
    'os.environ["RWKV_V7_ON"] = "1"',
    'os.environ["RWKV_JIT_ON"] = "1"',
    'os.environ["RWKV_CUDA_ON"] = "1"',
    '# The RWKV-v7 loader appends ".pth", so omit the suffix here.',
    'model = RWKV(model="rwkv7-g1h-13.3b-20260710-ctx10240/full/v1.0/rwkv-final", strategy="cuda bf16")',
    'pipeline = PIPELINE(model, "rwkv_vocab_v20230424")',
    'prompt = """System: 场景边界检测。仅输出 {"boundaries":[N]}\n\nUser: [P1] 雨停了。',
    "    temperature=0,\n    top_p=0,\n    alpha_frequency=0,\n    alpha_presence=0,\n    "
    "token_stop=[0],\n    chunk_len=256,",
    "text = pipeline.generate(prompt, token_count=128, args=args)",
    'text = text.split("\\n\\nUser:", 1)[0]',
    "JIT-compiles the RWKV-7 extension on first use",
    "must omit the `.pth` suffix",
    # training
    "| GPUs | 6 |",
    "| DeepSpeed | ZeRO-2 |",
    "12 sequences (122,880 tokens/update)",
    "assistant-only",
    "constant learning rate 5e-7 after 10 warmup steps",
    "| Weight decay | 0.01 |",
    "| Gradient clipping | 0.5 |",
    "131,920",
    "413,123,655",
    "329,536,148",
    "magic-prime schedule",
    '"one nominal pass" should not be read as every raw token being seen exactly once',
    "`mikuhhn1239/novel-agent-sft-dataset` at revision 5d3040d21f51b3ce90b9396b058e552c47f43cd5",
    # evaluation
    "| Runtime | rwkv==0.8.32 |",
    "| PyTorch | 2.7.1+cu128 |",
    "| Decoding | greedy: temperature=0, top_p=0,",
    "| GPU | NVIDIA A800 80 GB |",
    "Prompts were rendered with the same local packing code used for training, ending at Assistant:.",
    "Invalid JSON counted as wrong or empty predictions.",
    "Local held-out test split",
    "dataset README (v4-590)",
    "not this local merged v4/v4.1 held-out split",
    "directional reference rather than a strict apples-to-apples baseline",
    "The last recorded training loss is not an evaluation metric and is intentionally omitted.",
    # intended use, limitations, license and attribution
    "Research on Chinese fiction generation and continuation.",
    "Further fine-tuning and evaluation of RWKV-7 recurrent inference.",
    "output quality may be unstable",
    "is not evidence of reliable performance across that full length",
    "Generated JSON may be malformed",
    "prompt-injection resistance",
    "Per-book rights and provenance are not fully established",
    "legal, medical, financial, safety-critical",
    "`apache-2.0`",
    "The dataset's Apache-2.0 label does not establish rights to every underlying novel.",
    "`BlinkDL/RWKV-LM` and `BlinkDL/rwkv7-g1`",
    "hf download xiaol/rwkv-novel-agent-g1h-13b-ctx10240",
]


# Facts that only one section of the card may hold, by the heading that opens that section: table
# rows whole, so a number or a word that appears elsewhere (a code fence, another table) cannot pass.
SEED001_SECTIONS = {
    "#### 2026-10-13 · rwkv_lightning 1.8.1 · old-bank：同日同后端，表内可比": [
        "| 基模（不挂任何权重） | — | bfcl-product | 44.0/60 | 3 | — |",
        "| State v1.3（未上传） | State | bash | 2.0/26 | 3 | — |",
        "| State v1.3（未上传） | State | bfcl-product | 24.3/60 | 3 | — |",
        "| State v1.3（未上传） | State | workbank | 22.7 | 3 | — |",
        "| `state/v1.41/v141b-s1224.pth` | State | bash | 9.0/26 | 3 | — |",
        "| `state/v1.41/v141b-s1224.pth` | State | bfcl-product | 41.0/60 | 3 | — |",
        "| `state/v1.41/v141b-s1224.pth` | State | workbank | 25.0 | 3 | — |",
    ],
    "#### 2026-10-16 · rwkv_lightning 1.8.1 · exam：同日同后端，表内可比": [
        "| 基模（不挂任何权重） | — | exam | 21.4% | 2 | — |",
        "| `state/v1.41/v141b-s1224.pth` | State | exam | 46.9% | 2 | — |",
    ],
    "#### 2026-10-17 · rwkv_lightning 1.8.2 · exam：同日同后端，表内可比": [
        "| MiSS v2.0 r16 lr3e-5（未上传） | MiSS | exam | 46.0%（261.0 题） | — | 2 | — |",
        "| `miss/v2.1/r16-lr1e-5-e2/adapter-final.pth` | MiSS | exam | 51.3%（291.5 题） | — | 2 | 与 2e-5 分不出 |",
        "| `miss/v2.1/r16-lr2e-5-e2/adapter-final.pth` | MiSS | exam | 52.2%（296.5 题） | 46.0%（MiSS v2.0 "
        "r16 lr3e-5） | 2 | 对 v2.0 逐题 +95/−54，p=0.001 |",
        "| `miss/v2.1/r16-lr3e-5-e2/adapter-final.pth` | MiSS | exam | 49.4%（280.5 题） | — | 2 | "
        "读对了却取错值、算错的题变多 |",
    ],
}
SEED000_SECTIONS = {
    "#### Training": ["| Precision | BF16 |", "| GPUs | 6 |"],
    "### local-heldout": ["| Precision | BF16 |", "| Runtime | rwkv==0.8.32 |"],
    "### Scores": [
        "| base alone (no weights attached) | — | narrative-type accuracy | 44.0% | — | 1 | — |",
        "| base alone (no weights attached) | — | scene boundary F1 | 21.7% | — | 1 | — |",
        "| base alone (no weights attached) | — | speaker attribution accuracy | 38.5% | — | 1 | — |",
        "| `full/v1.0/rwkv-final.pth` | Full | narrative-type accuracy | 80.3% | 44.0% "
        "(rwkv7-g1h-13.3b-20260710-ctx10240) | 1 | — |",
        "| `full/v1.0/rwkv-final.pth` | Full | scene boundary F1 | 63.9% | 58.1% (dataset README (v4-590)) | 1 | [1] |",
        "| `full/v1.0/rwkv-final.pth` | Full | speaker attribution accuracy | 71.2% | 38.5% "
        "(rwkv7-g1h-13.3b-20260710-ctx10240) | 1 | — |",
        "[1] The dataset README's published scene F1 is for its v4-590 evaluation setup",
    ],
}


def section(text: str, heading: str) -> str:
    """The card's section that ``heading`` (a whole line) opens, up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    assert heading in lines, f"no heading {heading!r}"
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if re.match(rf"#{{1,{level}}} ", lines[i])), len(lines))
    return "\n".join(lines[start:end])


@pytest.mark.parametrize(("name", "sections"), [("seed001", SEED001_SECTIONS), ("seed000", SEED000_SECTIONS)])
def test_each_table_fact_is_in_its_own_section(built, name, sections):
    text = card(built[name])
    missing = [
        (heading, fact) for heading, facts in sections.items() for fact in facts if fact not in section(text, heading)
    ]
    assert not missing, missing


def test_model_index_lists_only_this_repos_own_weights(built):
    for root in built.values():
        index = Index.model_validate_json((root / "index.json").read_text())
        own = {e.path for e in index.entries}
        names = [r.metric_name for r in ModelCard(card(root)).data.eval_results]
        assert names and all(re.sub(r" \([^()]+\)$", "", name) in own for name in names), names
        assert not any(name.endswith("()") for name in names)
    assert "rwkv7-tiny-g1k-20260930-ctx4096/state/v1.41/v141b-s1224.pth" in names_of(
        built["seed001"]
    )  # workbank: no unit, no "()"


def names_of(root: Path) -> list[str]:
    return [r.metric_name for r in ModelCard(card(root)).data.eval_results]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("golden")
    return {
        "seed001": build_agent_registry(directory, lambda *_: None).root,
        "seed000": build_finetune_registry(directory, lambda *_: None).root,
    }


def card(root: Path) -> str:
    return (root / "README.md").read_text(encoding="utf-8")


def prose(text: str) -> str:
    """The card's body without code blocks (prompts and commands may hold either language)."""
    body = text.split("\n---\n", 1)[1]
    return re.sub(r"```.*?```", "", body, flags=re.S)


@pytest.mark.parametrize(("name", "facts"), [("seed001", SEED001_FACTS), ("seed000", SEED000_FACTS)])
def test_every_seed_fact_is_in_the_card(built, name, facts):
    text = card(built[name])
    missing = [fact for fact in facts if fact not in text]
    assert not missing, missing


def test_the_cards_are_in_their_one_language(built):
    zh, en = card(built["seed001"]), card(built["seed000"])
    assert ModelCard(zh).data.language == ["zh"] and ModelCard(en).data.language == ["en"]
    for heading in re.findall(r"^#+ (.+)$", prose(zh), flags=re.M):
        assert not re.search(r"\b(Files|Scores|Usage|Bases|Trainer|Known issues)\b", heading), heading
    assert not CJK.search(re.sub(r"`[^`]*`", "", prose(en))), "Chinese outside code in the English card"


def test_sections_only_for_the_methods_present(built):
    zh, en = card(built["seed001"]), card(built["seed000"])
    assert "RWKV_V7_ON" not in zh and "完整权重" not in zh and "full/<" not in zh
    for attached_only in (
        "rwkv-cli",
        "MiSS",
        "State file",
        "state tuning",
        "Adding a new base",
        "state/<",
        "miss/<",
        "inference server",
    ):
        assert attached_only not in en, attached_only


def test_twins_share_their_source_row_and_results(built):
    root = built["seed001"]
    index = Index.model_validate_json((root / "index.json").read_text())
    twins = [e for e in index.entries if e.derived_from]
    assert len(twins) == 2 and all(not t.scores for t in twins)
    text = card(root)
    for twin in twins:
        assert twin.path.rsplit("/", 1)[-1] not in text.split("### 文件", 1)[1].split("###", 1)[0]  # no row of its own
    assert text.count("| .pth, .safetensors |") == 2
    assert text.count("46.9%") == 1 and text.count("52.2%") == 1  # one result row per weight, not per file
    evaluation = json.loads((root / "evaluation.json").read_text())
    subjects = [r["subject"]["name"] for r in evaluation["results"] if r["benchmark"] == "exam"]
    assert len(subjects) == len(set(subjects)) == 6  # base, unpublished run, State, three MiSS
    recommended = next(
        r for r in evaluation["results"] if r["subject"]["name"].endswith("r16-lr2e-5-e2/adapter-final.pth")
    )
    assert recommended["subject"]["files"][1].endswith("adapter-final.safetensors")
    assert recommended["baseline"] == {"name": "MiSS v2.0 r16 lr3e-5", "value": 46.0}


def test_evaluation_json_is_schema_valid_derived_and_listed(built):
    schema = json.loads((schema_dir() / "evaluation.schema.json").read_text())
    for root in built.values():
        document = json.loads((root / "evaluation.json").read_text())
        assert not list(Draft202012Validator(schema).iter_errors(document))
        assert "evaluation.json" in parse_sums((root / "SHA256SUMS").read_bytes())
        assert validate(root) == []
        subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=root, check=True)
    novel = json.loads((built["seed000"] / "evaluation.json").read_text())
    setups = {s["name"]: s for s in novel["setups"]}
    local = setups["local-heldout"]
    assert (local["runtime"], local["torch"], local["gpu"]) == ("rwkv==0.8.32", "2.7.1+cu128", "NVIDIA A800 80 GB")
    f1 = next(r for r in novel["results"] if r["subject"]["kind"] == "entry" and r["benchmark"] == "scene boundary F1")
    assert f1["baseline"] == {"name": "dataset README (v4-590)", "value": 58.1} and "v4-590" in f1["footnote"]
    # the copied figure keeps its own setup and source: it is not presented as measured in this run
    reference = next(r for r in novel["results"] if r["subject"]["kind"] == "reference")
    assert reference["setup"] == "v4-590" and reference["setup"] != f1["setup"] and "README" in reference["backend"]


def test_publish_uploads_evaluation_json(built):
    plan = publish(
        built["seed000"],
        PublishOptions("xiaol/rwkv-novel-agent-g1h-13b-ctx10240", dry_run=True, assume_empty_remote=True),
    ).plan
    assert "evaluation.json" in {f.path for f in plan.uploads}


def test_a_stale_evaluation_json_is_reported_and_rerendered(built, tmp_path):
    root = Path(shutil.copytree(built["seed000"], tmp_path / "copy"))
    path = root / "evaluation.json"
    path.write_text(path.read_text().replace("58.1", "99.9"))
    assert {f.code for f in validate(root)} == {"evaluation.stale", "sums.mismatch"}
    before = snapshot(root)
    check = CliRunner().invoke(main, ["card", "--check", "-C", str(root), "--json"])
    assert check.exit_code == 1 and json.loads(check.stdout)["problems"][0]["code"] == "evaluation.stale"
    assert snapshot(root) == before
    path.unlink()
    assert "evaluation.missing" in {f.code for f in validate(root)}
    assert CliRunner().invoke(main, ["sums", "-C", str(root)]).exit_code == 0
    assert CliRunner().invoke(main, ["card", "-C", str(root)]).exit_code == 0
    assert validate(root) == [] and "58.1" in path.read_text()
