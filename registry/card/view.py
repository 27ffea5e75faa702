"""What the card shows, computed from the index before any template sees it.

Templates only lay text out; every decision (which languages, which sections apply, ordering,
grouping scores into comparable tables, which file a usage example names, how a value is
printed) is made here, in plain Python, so it is tested once and the output is deterministic.
Bases come by name; within a base, weights by method (State, MiSS, full), the recommended one
first, then by path; a safetensors twin is shown on its source's row, never as a row of its own.
Entries whose base is missing from ``bases`` still get a section (``validate`` reports them) so a
broken index never makes the card lose a file.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field

from ..core.author_evaluation import AuthorEvaluation, declarations, root_is_authors
from ..core.evaluation import base_name, evaluation, short_sha, source_of, twins_by_source
from ..core.layout import export_path, modelfile_path
from ..core.models import (
    METHODS,
    Base,
    Checkpoint,
    Entry,
    EvalResult,
    EvalSetup,
    GgufFile,
    HfExport,
    Index,
    Localized,
    Note,
    StopRules,
    TrainingStage,
)
from ..core.names import STATE_WEIGHTS_NAME, TRAIN_JSON
from ..core.train import RunFacts, TrainFacts
from ..gguf.modelfile import ollama_name
from .facts import TreeFacts, version_dir
from .markdown import escaped, md_code, md_text

METHOD_LABELS = {"state": "State", "miss": "MiSS", "full": "Full"}
FORMAT_LABELS = {"pth": ".pth", "safetensors": ".safetensors", "safetensors-sharded": ".safetensors (shards)"}
# The rwkv package's PIPELINE takes the vocab by name; shown when a base records none, as it
# is the vocab of the RWKV-7 G1 bases (seeds 000 and 001).
DEFAULT_VOCAB = "rwkv_vocab_v20230424"
DEFAULT_STOP_TEXT = "\n\nUser:"
BYTES_PER_PARAMETER = {"bf16": 2, "fp16": 2, "fp32": 4}
# Weights plus the recurrent state, activations and the CUDA context: seed 000's 13.3B model in
# BF16 (24.8 GiB of weights) is "about 30 GiB".
VRAM_OVERHEAD = 1.2


def format_value(value: float, unit: str) -> str:
    """``46.0%``, ``296.5 题``, ``41.0/60``: the number's shortest exact form, as seed 001 writes them."""
    number = repr(value)
    if unit == "%" or unit.startswith("/"):
        return f"{number}{unit}"
    return f"{number} {unit}".rstrip()


def vram_gib(parameters: int, dtype: str) -> int:
    """The VRAM to recommend for inference, in whole GiB, from the parameter count and dtype."""
    return math.ceil(parameters * BYTES_PER_PARAMETER[dtype] * VRAM_OVERHEAD / 2**30)


@dataclass(frozen=True)
class Languages:
    """The card's languages and how it picks text for them."""

    order: tuple[str, ...]

    @property
    def zh(self) -> bool:
        return "zh" in self.order

    @property
    def en(self) -> bool:
        return "en" in self.order

    def t(self, zh: str, en: str, sep: str = " · ") -> str:
        """The card's words for one thing: ``基模 · Bases``, ``Bases`` or ``基模`` (headings;
        table heads use sep=" ")."""
        return sep.join({"zh": zh, "en": en}[lang] for lang in self.order)

    @property
    def colon(self) -> str:
        return "：" if self.order[0] == "zh" else ": "

    def paren(self, text: str) -> str:
        """``（text）`` after Chinese, `` (text)`` after English."""
        return f"（{text}）" if self.order[0] == "zh" else f" ({text})"

    def _chosen(self, text: Localized) -> list[str]:
        chosen = [item for lang in self.order for item in getattr(text, lang)]
        return chosen or [*text.zh, *text.en]

    def items(self, text: Localized) -> list[str]:
        """The items in the card's languages (in its order), another language's when those have
        none, as Markdown paragraphs or list items: this is where users' text enters the card, so
        it is escaped here (:func:`~registry.card.markdown.md_text`: no raw HTML, no heading or fence)."""
        return [md_text(item) for item in self._chosen(text)]

    def note(self, note: Note) -> str:
        """A note for one table cell (escaped there, by ``md_cell``) or a footnote (``md_text``):
        a plain note as it is, a localized one per language."""
        return note if isinstance(note, str) else "\n".join(self._chosen(note))


@dataclass(frozen=True)
class EntryView:
    entry: Entry
    rel_path: str  # relative to the base directory when the entry lives under it
    twins: list[Entry] = field(default_factory=list)  # safetensors twins converted from it
    manifest: str | None = None  # the .pth's miss.json member, e.g. adapter-final/miss.json

    @property
    def method_label(self) -> str:
        return METHOD_LABELS[self.entry.method]

    @property
    def data_sha(self) -> str:
        """The data's sha256, or where none is recorded its dataset repo and revision."""
        data = self.entry.data
        return short_sha(data.sha256) if data.sha256 else f"{data.dataset_repo}@{str(data.dataset_revision)[:12]}"

    @property
    def formats(self) -> list[str]:
        return [FORMAT_LABELS[e.format] for e in (self.entry, *self.twins)]

    @property
    def model_path(self) -> str:
        """What the rwkv package's ``RWKV(model=...)`` wants: the path without ``.pth``."""
        return self.entry.path.removesuffix(".pth")

    @property
    def run(self) -> str | None:
        """The run directory (``miss/<version>/<run>/adapter.pth``), if the file sits in one."""
        parts = self.entry.path.split("/")
        return parts[3] if len(parts) >= 5 else None

    @property
    def adapter_id(self) -> str:
        """The id for ``rwkv-cli adapter register``: the recorded one, else data version and run,
        ``v21-r16-lr2e-5-e2``."""
        serving = self.entry.serving
        if serving and serving.adapter_id:
            return serving.adapter_id
        return (
            f"{self.entry.data.version.replace('.', '')}"
            f"-{self.run or self.entry.path.rsplit('/', 1)[-1].rsplit('.', 1)[0]}"
        )

    @property
    def serving_flags(self) -> str:
        """``--profile g1k --sampling g1k-agent``: the serving options recorded for this weight."""
        serving = self.entry.serving
        flags = [
            f"--profile {serving.profile}" if serving and serving.profile else "",
            f"--sampling {serving.sampling}" if serving and serving.sampling else "",
        ]
        return " ".join(filter(None, flags))

    @property
    def vram_gib(self) -> int | None:
        e = self.entry
        return vram_gib(e.parameters, e.inference_dtype) if e.parameters and e.inference_dtype else None

    @property
    def parameters_billions(self) -> str | None:
        return f"{self.entry.parameters / 1e9:.1f}B" if self.entry.parameters else None

    @property
    def prompt_example(self) -> str | None:
        prompt = self.entry.prompt
        return (prompt.example or prompt.format) if prompt else None

    @property
    def has_details(self) -> bool:
        """Whether the entry has a per-weight section (prompt, stop rules, VRAM, training, data revision)."""
        e = self.entry
        return bool(e.prompt or e.stop or self.vram_gib or e.training or e.data.dataset_revision)


@dataclass(frozen=True)
class ScoreRow:
    result: EvalResult
    who: str  # Markdown: the weight's path (relative to its base), the base alone, or a reference
    method: str  # the method's label, or "—" for the base alone
    score: str  # the value, and the count of items scored when recorded: 52.2%（296.5 题）
    baseline: str | None  # the baseline's value and name: 57.81%（step36）
    footnote: int | None  # the number of its comparability footnote


@dataclass(frozen=True)
class ScoreGroup:
    """Results measured on one day with one backend and setup: the only ones that compare directly."""

    date: str
    backend: str
    setup: str | None
    rows: list[ScoreRow]
    footnotes: list[str]

    @property
    def has_baseline(self) -> bool:
        return any(r.result.baseline for r in self.rows)


@dataclass(frozen=True)
class TrainView:
    """One data-version directory's train.json, with the entries trained by it."""

    directory: str  # relative to the base directory ("/" for the root)
    train: TrainFacts
    runs: list[tuple[str, RunFacts]]

    @property
    def path(self) -> str:
        return f"{self.directory.rstrip('/')}/{TRAIN_JSON}"


@dataclass(frozen=True)
class AuthorEvaluationView:
    """An author's evaluation.json (seed 004), shown as written and attributed to its file."""

    path: str  # in the registry
    evaluation: AuthorEvaluation
    weights: list[str]  # the paths of the weights that declare it

    @property
    def grouped(self) -> bool:
        return any(m.benchmark for m in self.evaluation.metrics)

    def table(self, languages: Languages) -> tuple[list[str], list[list[str]]]:
        """The head and rows of its results: benchmark (where the file groups them), metric, the
        initialization's value and the change from it (where given), this checkpoint's, items."""
        evaluation, t = self.evaluation, languages.t
        initialized = evaluation.has_initialization
        init_head = t("初始化", "Initialization", " ") + (
            f" ({evaluation.initialization})" if evaluation.initialization else ""
        )
        head = [t("基准", "Benchmark", " ")] if self.grouped else []
        head += [t("指标", "Metric", " ")] + ([init_head] if initialized else [])
        head += [t("本权重", "This checkpoint", " ")] + ([t("变化", "Change", " ")] if initialized else [])
        head += [t("题数", "Items", " ")]
        rows = []
        for metric in evaluation.metrics:
            count = evaluation.count_of(metric)
            row = [metric.benchmark or "—"] if self.grouped else []
            row += [metric.name]
            if initialized:
                row += [metric.initialization.written if metric.initialization else "—"]
            row += [metric.value.written] + ([metric.change or "—"] if initialized else [])
            row += [format_value(count, "") if count is not None else "—"]
            rows.append(row)
        return head, rows


@dataclass(frozen=True)
class BaseView:
    name: str
    base: Base | None  # None when entries name a base sha256 that ``bases`` lacks
    sha256: str
    entries: list[EntryView]
    score_groups: list[ScoreGroup]
    trains: list[TrainView]

    @property
    def vocab_name(self) -> str:
        vocab = self.base.vocab if self.base and self.base.vocab else DEFAULT_VOCAB
        return vocab.removesuffix(".txt")

    def of_method(self, method: str) -> list[EntryView]:
        return [e for e in self.entries if e.entry.method == method]

    def examples(self, method: str) -> list[EntryView]:
        """The files a usage example names: the recommended ones, else the first.

        Only .pth files count: rwkv-cli and the rwkv package load those, and a safetensors twin
        made by ``registry convert`` always sits next to its .pth.
        """
        candidates = [e for e in self.of_method(method) if e.entry.format == "pth"]
        return [e for e in candidates if e.entry.recommended] or candidates[:1]

    @property
    def with_details(self) -> list[EntryView]:
        return [e for e in self.entries if e.has_details]

    @property
    def gated(self) -> list[EntryView]:
        """The weights whose gate ran, for the smoke-sample table; none when no gate recorded a
        sample (every receipt predates the samples: the card stays as it was)."""
        gated = [e for e in self.entries if e.entry.gate is not None]
        return gated if any(e.entry.gate and e.entry.gate.sample for e in gated) else []

    def known_issues(self, languages: Languages) -> list[str]:
        """The base's known issues, then each weight's, prefixed with its path."""
        own = languages.items(self.base.known_issues) if self.base else []
        return own + [
            f"{md_code(e.rel_path)}{languages.colon}{item}"
            for e in self.entries
            for item in languages.items(e.entry.known_issues)
        ]


@dataclass(frozen=True)
class CardView:
    """Everything the templates may use (StrictUndefined makes any other name an error)."""

    index: Index
    bases: list[BaseView]
    handwritten: str
    languages: Languages
    author_evaluations: list[AuthorEvaluationView] = field(default_factory=list)  # each declared one that reads
    # results recorded on a checkpoint at the root (one under a base is in its base's score tables)
    checkpoint_score_groups: list[ScoreGroup] = field(default_factory=list)

    @property
    def zh(self) -> bool:
        return self.languages.zh

    @property
    def en(self) -> bool:
        return self.languages.en

    def t(self, zh: str, en: str, sep: str = " · ") -> str:
        return self.languages.t(zh, en, sep)

    def items(self, text: Localized) -> list[str]:
        return self.languages.items(text)

    @property
    def colon(self) -> str:
        return self.languages.colon

    def note(self, note: Note) -> str:
        return self.languages.note(note)

    @property
    def kept_facts(self) -> list[tuple[str, str]]:
        """What the hand-written index.json stated that no field holds: (its JSON path, the value as JSON)."""
        return [
            (where, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True))
            for where, value in self.index.kept_facts.items()
        ]

    def stage_rows(self, stage: TrainingStage) -> list[list[str]]:
        """(setting, value) rows for the facts a training stage records, in seed 000's order."""
        batch = None
        if stage.global_batch:
            per_update = f" ({stage.tokens_per_update:,} tokens/update)" if stage.tokens_per_update else ""
            batch = self.t(f"{stage.global_batch} 条序列", f"{stage.global_batch} sequences", " / ") + per_update
        elif stage.tokens_per_update:
            batch = f"{stage.tokens_per_update:,} tokens/update"
        rows = [
            (("GPU 数", "GPUs"), stage.gpus),
            (("精度", "Precision"), stage.precision),
            (("DeepSpeed", "DeepSpeed"), None if stage.deepspeed_stage is None else f"ZeRO-{stage.deepspeed_stage}"),
            (("全局 batch", "Global batch"), batch),
            (("loss 掩码", "Loss masking"), stage.loss_masking),
            (("学习率", "Learning rate"), stage.lr_schedule),
            (("权重衰减", "Weight decay"), stage.weight_decay),
            (("梯度裁剪", "Gradient clipping"), stage.grad_clip),
            (("对话数", "Conversations"), None if stage.conversations is None else f"{stage.conversations:,}"),
            (("token 数", "Tokens"), None if stage.tokens is None else f"{stage.tokens:,}"),
            (
                ("计 loss 的 token", "Supervised tokens"),
                None if stage.supervised_tokens is None else f"{stage.supervised_tokens:,}",
            ),
        ]
        return [[self.t(zh, en, " ") if zh != en else zh, str(value)] for (zh, en), value in rows if value is not None]

    @property
    def known_bases(self) -> list[Base]:
        return [b.base for b in self.bases if b.base is not None]

    @property
    def methods(self) -> list[str]:
        """Methods with at least one entry, in the fixed order state, miss, full."""
        present = {e.entry.method for b in self.bases for e in b.entries}
        return [m for m in METHODS if m in present]

    @property
    def attached(self) -> bool:
        """Whether the registry holds weights that attach to a base (State, MiSS) rather than replace it."""
        return bool({"state", "miss"} & set(self.methods))

    def count(self, method: str) -> int:
        return sum(len(b.of_method(method)) for b in self.bases)

    @property
    def rendered_evaluation(self) -> bool:
        """Whether the root's evaluation.json is the registry's (else an author's: see ``registry.card.sync``)."""
        return not root_is_authors(self.index)

    @property
    def dataset_repos(self) -> list[str]:
        return sorted({e.data.dataset_repo for e in self.index.entries if e.data.dataset_repo})

    @property
    def setups(self) -> list[EvalSetup]:
        return sorted(self.index.registry.setups, key=lambda s: s.name)

    def first_example(self, method: str) -> tuple[BaseView, EntryView] | None:
        """The (base, file) of the one example a long snippet (the full-checkpoint code) shows;
        None when the method has no .pth file to show."""
        return next(((b, e) for b in self.bases for e in b.examples(method)), None)

    def manifest_location(self, e: EntryView) -> str:
        """Where each file of a MiSS weight keeps miss.json: a zip member of the .pth, the header of a twin."""
        places = [md_code(e.manifest) if e.manifest else "—"]
        places += [f"`{t.path.rsplit('/', 1)[-1]}`: `__metadata__` `miss.*`" for t in e.twins]
        return "; ".join(places)

    def stop_sentence(self, stop: StopRules) -> str:
        """When generation stops, in the card's languages (seed 000's wording in English)."""
        tokens = [f"token {t}" + (" (EOD)" if t == 0 else "") for t in stop.tokens]
        texts = [md_code(escaped(s)) for s in stop.texts]
        zh = f"遇到 {'、'.join(tokens)}" + (f" 或文本 {'、'.join(texts)}" if texts else "") + " 时停止生成"
        en = (
            f"Generation should stop on {' or '.join(tokens)}"
            + (f" or the text {' or '.join(texts)}" if texts else "")
            + "."
        )
        if texts:
            zh += "；停止文本要吞掉，不要显示" if stop.consume else "；停止文本是输出的一部分"
            en += (
                " Consume the stop sequence instead of displaying it."
                if stop.consume
                else " The stop text is part of the output."
            )
        return self.t(zh + "。", en, "\n\n")

    def stop_rules(self, e: EntryView | None) -> StopRules:
        """The entry's stop rules, else the RWKV chat default: token 0 (EOD) or the next user turn."""
        return (e and e.entry.stop) or StopRules(tokens=[0], texts=[DEFAULT_STOP_TEXT])

    def sample_row(self, e: EntryView | Checkpoint) -> list[str]:
        """A smoke-sample table row: path, format, the first tokens' text (escaped: newlines shown
        as ``\\n``), whether a stop text came, the tokens before the stop, where and when it ran;
        a Transformers checkpoint's by its weight index from the root."""
        gate, rel_path = (e.gate, f"/{e.path}") if isinstance(e, Checkpoint) else (e.entry.gate, e.rel_path)
        assert gate is not None  # BaseView.gated (and the checkpoints' table) list gated weights only
        where = f"{gate.date}, {gate.gpu or gate.device}"
        sample = gate.sample
        if sample is None:
            missing = self.t(
                "未记录（样例出现前跑的 gate，请再跑 `registry smoke`）",
                "not recorded (gated before samples: run `registry smoke` again)",
                " / ",
            )
            return [md_code(rel_path), missing, "—", "—", "—", where]
        label = (
            self.t("卡片上的提示格式", "the card's prompt format", " / ")
            if sample.format == "prompt"
            else sample.format
        )
        if sample.format_from == "default":
            label += self.languages.paren(self.t("按方法的默认", "default for the method", " / "))
        ended = {
            "stop_text": self.t("停止文本", "stop text", " / "),
            "stop_token": self.t("停止 token", "stop token", " / "),
            "max_new_tokens": self.t("到上限", "budget", " / "),
        }[sample.stop_reason]
        seen = self.t("是", "yes", " / ") if sample.stop_text_seen else self.t("否", "no", " / ")
        tokens = f"{sample.tokens} / {sample.max_new_tokens}{self.languages.paren(ended)}"
        return [md_code(rel_path), label, escaped(sample.text) or "—", seen, tokens, where]

    def hf_exports(self) -> list[tuple[HfExport, EntryView | None]]:
        """Each export (``registry export-hf``) with the entry it was made from: a full weight, a
        MiSS adapter (a PEFT folder), a State (its initial state), or None for a base's own export."""
        views = {e.entry.path: e for b in self.bases for e in b.entries}
        return [(export, views.get(export.source)) for export in self.index.exports]

    state_weights_name = STATE_WEIGHTS_NAME

    def base_export_path(self, export: HfExport) -> str | None:
        """The folder of the base export that ``export`` (a PEFT adapter, a State) is used with, when there is one."""
        base = self.index.base_by_sha(export.base_sha256)
        folder = export_path(base.name) if base else None
        return folder if any(e.path == folder for e in self.index.exports) else None

    def gguf_groups(self) -> list[tuple[str, list[GgufFile]]]:
        """The GGUF files (``registry export-gguf``), grouped by the source they were made from."""
        groups: dict[str, list[GgufFile]] = {}
        for gguf in self.index.ggufs:
            groups.setdefault(gguf.source, []).append(gguf)
        return list(groups.items())

    @staticmethod
    def modelfile(gguf: GgufFile) -> str:
        """The Ollama Modelfile beside a GGUF file (:mod:`registry.gguf.modelfile`)."""
        return modelfile_path(gguf.path)

    @staticmethod
    def ollama_name(gguf: GgufFile) -> str:
        return ollama_name(gguf.path)

    @staticmethod
    def file_size(size: int) -> str:
        return f"{size / 2**30:.2f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"

    def has_hf_export(self, e: EntryView) -> bool:
        return any(export.source == e.entry.path for export in self.index.exports)

    def snippet_prompt(self, e: EntryView | None) -> str:
        """The prompt a usage snippet sends: the entry's example, else a greeting in the card's first language."""
        return (e and e.prompt_example) or (
            "User: 你好\n\nAssistant:" if self.languages.order[0] == "zh" else "User: Hello\n\nAssistant:"
        )

    def setup_rows(self, setup: EvalSetup) -> list[list[str]]:
        """(setting, value) rows for what an evaluation setup records."""
        rows = [
            (("题数", "Items"), setup.items),
            (("推理运行时", "Runtime"), setup.runtime),
            (("PyTorch", "PyTorch"), setup.torch),
            (("精度", "Precision"), setup.precision),
            (("解码", "Decoding"), setup.decoding),
            (("GPU", "GPU"), setup.gpu),
        ]
        return [[self.t(zh, en, " ") if zh != en else zh, str(value)] for (zh, en), value in rows if value is not None]


def _entry_order(view: EntryView) -> tuple:
    """State, then MiSS, then full; the recommended file first within each; then by path."""
    return (METHODS.index(view.entry.method), not view.entry.recommended, view.entry.path)


def _score_groups(index: Index, results: list[EvalResult], base: str, languages: Languages) -> list[ScoreGroup]:
    groups: dict[tuple[str, str, str], list[EvalResult]] = defaultdict(list)
    for result in results:
        if result.subject.base == base:
            groups[(result.date.isoformat(), result.backend, result.setup or "")].append(result)
    return [_score_group(index, key, groups[key], languages) for key in sorted(groups)]


def _score_group(
    index: Index, key: tuple[str, str, str], results: list[EvalResult], languages: Languages
) -> ScoreGroup:
    footnotes: list[str] = []
    rows = []
    for result in results:
        text = languages.note(result.footnote)
        if text and text not in footnotes:
            footnotes.append(text)
        who, method = _subject_label(index, result, languages)
        value = format_value(result.value, result.unit)
        if result.count is not None:
            value += languages.paren(
                languages.t(
                    f"{format_value(result.count, '')} 题", f"{format_value(result.count, '')} questions", " / "
                )
            )
        baseline = result.baseline
        compared = None
        if baseline is not None:
            compared = (
                format_value(baseline.value, result.unit) if baseline.value is not None else "—"
            ) + languages.paren(baseline.name)
        rows.append(ScoreRow(result, who, method, value, compared, footnotes.index(text) + 1 if text else None))
    day, backend, setup = key
    return ScoreGroup(day, backend, setup or None, rows, footnotes)


def _subject_label(index: Index, result: EvalResult, languages: Languages) -> tuple[str, str]:
    """How a result's subject is shown in a score table (Markdown), and its method's label."""
    subject = result.subject
    if subject.kind == "entry":
        entry = index.entry_by_path(subject.name)
        path = _relative(subject.name, subject.base if index.base_by_name(subject.base) else None)
        return md_code(path), METHOD_LABELS[entry.method] if entry else "—"
    if subject.kind == "checkpoint":
        return md_code(
            _relative(subject.name, subject.base if index.base_by_name(subject.base) else None)
        ), "Transformers"
    if subject.kind == "reference":
        base = index.base_by_name(subject.base)
        ref = next((r for r in base.references if r.name == subject.name), None) if base else None
        where = subject.location or languages.t("未上传", "not uploaded", " · ")
        return subject.name + languages.paren(where), METHOD_LABELS[ref.method] if ref and ref.method else "—"
    return languages.t("基模（不挂任何权重）", "base alone (no weights attached)"), "—"


def _relative(path: str, base_name: str | None) -> str:
    """A path as a base's section shows it: relative to the base directory; a root weight's (or
    the root train.json's) from the root, ``/rwkv-final.pth``."""
    if "/" not in path:
        return f"/{path}"
    return path.removeprefix(f"{base_name}/") if base_name else path


def _trains(facts: TreeFacts, entries: list[EntryView], base: str | None) -> list[TrainView]:
    directories = sorted({version_dir(e.entry.path) for e in entries} & set(facts.trains))
    views = []
    for directory in directories:
        train = facts.trains[directory]
        runs = {e.run for e in entries if version_dir(e.entry.path) == directory and e.run}
        views.append(
            TrainView(
                _relative(directory, base),
                train,
                [(name, run) for name, run in sorted(train.runs.items()) if name in runs],
            )
        )
    return views


def base_views(index: Index, facts: TreeFacts, languages: Languages) -> list[BaseView]:
    """One view per base (sorted by name), then one per unknown base sha256 (sorted)."""
    twins = twins_by_source(index)
    results = evaluation(index).results
    by_base: dict[str, list[Entry]] = defaultdict(list)
    for entry in index.entries:
        if source_of(index, entry) is entry:
            by_base[base_name(index, entry.base_sha256)].append(entry)
    views = []
    known = sorted(index.bases, key=lambda b: (b.name, b.sha256))
    unknown = sorted(set(by_base) - {b.name for b in index.bases})
    for name, base in [*((b.name, b) for b in known), *((n, None) for n in unknown)]:
        entries = sorted(
            (
                EntryView(
                    e,
                    _relative(e.path, base.name if base else None),
                    twins.get(e.path, []),
                    facts.manifests.get(e.path),
                )
                for e in by_base.get(name, [])
            ),
            key=_entry_order,
        )
        sha = base.sha256 if base else next(e.entry.base_sha256 for e in entries)
        views.append(
            BaseView(
                name,
                base,
                sha,
                entries,
                _score_groups(index, results, name, languages),
                _trains(facts, entries, base.name if base else None),
            )
        )
        by_base.pop(name, None)  # a base listed twice (validate reports it) shows its entries once
    return views


def build_view(index: Index, handwritten: str, facts: TreeFacts | None = None) -> CardView:
    languages = Languages(tuple(index.registry.languages))
    facts = facts or TreeFacts()
    return CardView(
        index=index,
        bases=base_views(index, facts, languages),
        handwritten=handwritten,
        languages=languages,
        author_evaluations=[
            AuthorEvaluationView(path, facts.evaluations[path], weights)
            for path, weights in declarations(index).items()
            if path in facts.evaluations
        ],
        checkpoint_score_groups=[
            group
            for checkpoint in sorted(index.checkpoints, key=lambda c: c.path)
            if checkpoint.base_sha256 is None
            for group in _score_groups(index, evaluation(index).results, checkpoint.path, languages)
        ],
    )
