"""The demo's dataset registry, shaped like seed 002 (No-22/rwkv-agent-distill): two versions with
seed 002's row counts, dates, thinking modes, teachers, composition and known issues; the rows are
generated (:mod:`registry.dataset.synthetic`), short, and checked like real ones: with the facts
seed 002's author checked by hand (stop text by profile, context 8128, the vocabulary, families and
v2.1's split rule ``sha256(family) mod 32 == 0``, the 80 rows ``seeded_from_test``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

from ..core.models import Localized
from ..core.names import VOCAB_NAME
from ..dataset.synthetic import VersionSpec, build_version
from .dataset_add import VersionRequest, add_version
from .dataset_init import init_dataset
from .dataset_set import set_dataset_field

AGENT_DATASET = "No-22/rwkv-agent-distill"
SUMMARY = [
    "RWKV-Agent 用来教 RWKV-7 G1k 7.2B 当本地工具 Agent 的训练数据：读写文件、跑 "
    "bash、查网页、算数、查天气，最后用一段话给出答案。数据由更强的模型（老师）在同一套 harness "
    "里实际做题，筛掉做错的、不干净的轨迹，再按 RWKV 推理时的格式逐字节渲染成训练行。",
    "这是存档，不是精修过的公开数据集。已知问题都原样保留，见「已知问题」。对应的权重在模型仓库 "
    "No-22/rwkv-agent-weights。",
]
VERSIONS = (  # spec, date, profile, teachers, summary, composition, known issues
    (
        VersionSpec(
            "v1.41",
            "off",
            train_rows=3662,
            validation_rows=118,
            trained_name="segments-1-41.jsonl",
            seed=141,
            row_chars=160,
            dropped_rows=0,
            flagged=80,
        ),
        date(2026, 10, 13),
        "g1k",
        ["DeepSeek v4 Flash"],
        "v1.41 不带思考包（原目录 final-20261013 原样）",
        [
            "来源批次：b05–b08（v1.3 留存）、b09、b10-pilot、b10a–e、b11（机械构造的收尾恢复）、b12a–t（bash "
            "与天气）、b13、base700（80 行）",
            "中文 47.6%，多轮对话 18.4%，零调用直接回答 16.5%，最长 8121 token",
            "训练参数：ctx 8192、bs 8、3 epoch，lr 0.01→0.00167（见模型仓库 state/v1.41/train.json）",
        ],
        [
            'v1.41 里有 80 行由测试题改编：meta.source == "base700" 的 80 行来自早期 700 条种子语料，种子是 '
            "workbank 考题。用 v141b-s1224 在 workbank 上的分数因此不完全干净。",
            "首步 list_files 偏多（52.4%）、data_query 用得少（5.6%）；部分旧行写文件后没有读回核对。",
        ],
    ),
    (
        VersionSpec(
            "v2.1",
            "full",
            train_rows=5512,
            validation_rows=148,
            trained_name="segments-shuffled.jsonl",
            seed=21,
            row_chars=160,
            dropped_rows=263,
        ),
        date(2026, 10, 18),
        "g1k-think",
        ["Qwen3.7-Flash"],
        "v2.1 带思考包（原目录 final-20261018 原样）",
        [
            "1545 道题、1909 条轨迹；v2.1 新题（主批次 + b21i–p）+ v2.0 重新渲染 + 错误恢复 + 被拒作答构造",
            "按 family 哈希切验证集（sha256(family) mod 32 == 0），打乱种子 20261017",
            "超过 8128 token 的 526 行在打包时丢掉了，同目录下 16k 版本未上传（从未训练过）",
            "训练参数：MiSS r16 alpha16、ctx 8192、bs 8、2 epoch，lr 2e-5→2e-6（见模型仓库 miss/v2.1/train.json）",
        ],
        [
            "老师身份没有过滤：模型输出里直接写「我是 Qwen」的只有 1 行，但思考风格整体继承自千问。",
            "思考内容不少是继承老师的套话；本地搜空后倾向继续搜本地而不上网；没有注入防御样本；少量纯数学题首"
            "步就调计算器；「删改前先确认」类题目只入包了 20 题。",
        ],
    ),
)


def build_dataset_registry(directory: Path, step: Callable[[str, str], None]) -> tuple[Path, dict[str, str]]:
    """The dataset registry and, by version, the data sha256 weights trained on it cite."""
    root = init_dataset(directory / "dataset-registry", title="RWKV-Agent 蒸馏训练集").root
    set_dataset_field(root, "languages", ["zh"])
    set_dataset_field(root, "repo-id", [AGENT_DATASET])
    set_dataset_field(root, "summary", SUMMARY, "zh")
    set_dataset_field(root, "attribution", ["数据由第三方模型生成，使用时请自行确认各家服务条款。"], "zh")
    step("dataset init", f"{root} (zh dataset card)")
    data: dict[str, str] = {}
    for spec, day, profile, teachers, summary, composition, issues in VERSIONS:
        built = build_version(directory / "inputs-dataset" / f"final-{day:%Y%m%d}", spec)
        version = add_version(
            root,
            VersionRequest(
                source=built.folder,
                version=spec.version,
                date=day,
                thinking=spec.thinking,
                profile=profile,
                teachers=teachers,
                trained_file=built.trained_path,
                trained_sha256=built.trained_sha256,
                train_rows=spec.train_rows,
                validation_rows=spec.validation_rows,
                wire_canonical=spec.wire_canonical,
                wire_hash=built.wire_hash,
                vocabulary=VOCAB_NAME,
                context=spec.context,
                split_rule=spec.split_rule if spec.version == "v2.1" else None,
                family_key=spec.family_key,  # seed 002 states v2.1's rule
                flag_key="seeded_from_test" if spec.flagged else None,
                flagged_rows=spec.flagged or None,
                summary=Localized(zh=[summary]),
                composition=Localized(zh=composition),
                known_issues=Localized(zh=issues),
            ),
        )
        data[version.version] = version.trained_file.sha256
        step(
            "dataset add",
            f"{version.version}: {version.train_rows} / {version.validation_rows} rows, trained file "
            f"sha256 {version.trained_file.sha256[:12]}…",
        )
    return root, data
