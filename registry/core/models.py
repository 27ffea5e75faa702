"""Typed models of the registry's JSON files.

index.json is the one machine-readable truth of a registry: the card, the checksums and the
publish plan are all derived from it.  These models are the single definition of its shape;
``schemas/*.schema.json`` are generated from them (see :mod:`registry.core.schemas`) so that other
tools can validate a registry without importing this package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from .collisions import invisible_character

SHA256_PATTERN = r"^[0-9a-f]{64}$"
GIT_COMMIT_PATTERN = r"^[0-9a-f]{40}$"
DATA_VERSION_PATTERN = r"^v[0-9]+(\.[0-9]+)*$"
# A path component: no separators, no leading dot, no control characters or backslashes.
# Match it with re.fullmatch: re.match lets ``$`` match before a final newline.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+\-]*$"
# Control characters (C0, DEL, C1) and the Unicode line separators: in a name or path they would
# split a SHA256SUMS line or a card row.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Free text the card shows (notes): far above any real note, far below what would bloat index.json.
MAX_NOTES_CHARS = 64 * 1024

Sha256 = str
METHODS: tuple[str, ...] = ("state", "miss", "full")
Method = Literal["state", "miss", "full"]
LANGUAGES: tuple[str, ...] = ("zh", "en")
Language = Literal["zh", "en"]
# Who may see a repo on the Hub: anyone; its owners only; or anyone whose access request is
# approved (automatically, or by the owners by hand), as `publish --private / --gated` creates it.
Access = Literal["public", "private", "gated-auto", "gated-manual"]
ACCESS_DESCRIPTION = (
    "Who may see the repo, as publish made it: public, private (its owners), gated-auto / gated-manual (anyone "
    "whose access request is approved automatically / by the owners); null: not set by publish"
)
BILINGUAL: tuple[Language, ...] = ("zh", "en")  # the card's default languages
ASSISTANT_TURN = "Assistant:"

INDEX_FORMAT_VERSION: Final = (
    2  # docs/formats.md, "index.json's format versions"; `registry migrate` upgrades older ones
)


# index.json's "kind" of a dataset registry (registry/dataset/); a model registry has none
DATASET_KIND: Final = "dataset"


class _Strict(BaseModel):
    # No NaN or Infinity in any float field: JSON has no such numbers (see docs/formats.md).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


class Architecture(_Strict):
    """Shape facts read from a checkpoint's tensors; they decide what State/MiSS files fit."""

    n_layer: int = Field(ge=1)
    n_embd: int = Field(ge=1)
    head_size: int = Field(ge=1)
    vocab_size: int = Field(ge=1)
    n_head: int | None = Field(default=None, ge=1)
    dim_ffn: int | None = Field(default=None, ge=1)


# Free text the card shows, bounded like notes.
ShortText = Annotated[str, Field(max_length=MAX_NOTES_CHARS)]


class Localized(_Strict):
    """Text in the card's languages: paragraphs (or list items) per language.

    A card in one language shows that language's items; a bilingual card shows both.  When one
    language has none, the other's are shown (better than a missing section).
    """

    zh: list[ShortText] = Field(default_factory=list)
    en: list[ShortText] = Field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.zh or self.en)


# A note: a plain string is shown as it is in every language; a Localized note per language.
Note = ShortText | Localized


def prompt_problem(text: str) -> str | None:
    """Why ``text`` cannot be a prompt for an RWKV chat model, or None when it can.

    The model writes the answer after the last turn, so the prompt must end with an
    ``Assistant:`` turn at the start of a line, with nothing after the colon (a trailing space
    changes the tokens the model was trained on).
    """
    last = text.rsplit("\n", 1)[-1]
    if last != ASSISTANT_TURN:
        return f"does not end with an `{ASSISTANT_TURN}` turn on its own line (the last line is {last[-40:]!r})"
    return None


class PromptFormat(_Strict):
    """The exact prompt layout the weights were trained on (seed 000's "Prompt format")."""

    format: str = Field(
        min_length=1,
        max_length=MAX_NOTES_CHARS,
        description="The prompt as the model sees it, role labels and spacing exact, ending with the Assistant: turn",
    )
    example: str | None = Field(
        default=None,
        max_length=MAX_NOTES_CHARS,
        description="A complete prompt for the usage snippet (default: format)",
    )

    @field_validator("format", "example")
    @classmethod
    def _ends_with_assistant_turn(cls, value: str | None) -> str | None:
        problem = None if value is None else prompt_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class StopRules(_Strict):
    """When generation stops: a token id (0 is EOD) or a text, and whether the text is consumed."""

    tokens: list[int] = Field(default_factory=lambda: [0])
    texts: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    consume: bool = Field(default=True, description="The stop text is dropped from the output rather than shown")

    @field_validator("tokens")
    @classmethod
    def _token_ids(cls, value: list[int]) -> list[int]:
        if any(token < 0 for token in value):
            raise ValueError("token ids are non-negative")
        return value


@dataclass(frozen=True)
class Profile:
    """A chat format profile (seed 001: rwkv-cli's ``--profile``): its thinking mode and the text a turn stops at."""

    thinking: str
    stop_text: str


STOP_USER = "\n\nUser:"
# The profiles seeds 001 and 002 name: State on g1k (no thinking), MiSS on g1k-think; rows end in
# \n\nUser:.  A dataset version's profile (registry/dataset/) and the gate's sample of a weight in
# its serving profile (registry/gate/prompts.py) read them here.
PROFILES = {"g1k": Profile("off", STOP_USER), "g1k-think": Profile("full", STOP_USER)}


class Serving(_Strict):
    """How the weights are served (seed 001: rwkv-cli's --profile and --sampling)."""

    profile: str | None = Field(default=None, description="Chat format profile, e.g. g1k or g1k-think")
    sampling: str | None = Field(default=None, description="Sampling preset, e.g. g1k-agent")
    adapter_id: str | None = Field(
        default=None, description="The id a MiSS adapter is registered under, e.g. v21-lr2e-5-e2"
    )


class TrainingStage(_Strict):
    """One stage of how a weight was trained (seed 000's "Training")."""

    name: str = Field(min_length=1)
    description: Localized = Field(default_factory=Localized)
    gpus: int | None = Field(default=None, ge=1)
    precision: str | None = None
    deepspeed_stage: int | None = Field(default=None, ge=0, le=3)
    global_batch: int | None = Field(default=None, ge=1, description="Sequences per optimizer update")
    tokens_per_update: int | None = Field(default=None, ge=1)
    loss_masking: str | None = None
    lr_schedule: str | None = None
    weight_decay: float | None = None
    grad_clip: float | None = None
    conversations: int | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)
    supervised_tokens: int | None = Field(default=None, ge=0)
    caveats: Localized = Field(default_factory=Localized)


class EvalSetup(_Strict):
    """How results were measured; scores name it (seed 000's evaluation setup, seed 004's definitions)."""

    name: str = Field(pattern=NAME_PATTERN)
    description: Localized = Field(default_factory=Localized)
    items: int | None = Field(default=None, ge=1, description="Questions or examples in the evaluation set")
    runtime: str | None = None
    torch: str | None = None
    precision: str | None = None
    decoding: str | None = None
    gpu: str | None = None
    definitions: dict[str, str] = Field(default_factory=dict, description="Metric name -> exact definition")


class Base(_Strict):
    """A base checkpoint that State/MiSS/full weights were trained on.

    The base file itself never lives in the registry (it is published upstream); its sha256 is
    the fingerprint every derived weight is checked against.
    """

    name: str = Field(pattern=NAME_PATTERN, description="Directory name: the file name without .pth")
    filename: str = Field(pattern=NAME_PATTERN)
    source: str | None = Field(default=None, description="Hub repo the base file comes from, e.g. BlinkDL/rwkv7-g1")
    sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    vocab: str | None = None
    architecture: Architecture | None = Field(
        default=None, description="Null when the base was declared by hash only (--metadata-only)"
    )
    size: int | None = Field(default=None, ge=0)
    known_issues: Localized = Field(default_factory=Localized)
    scores: list[Score] = Field(default_factory=list, description="The base's own results, with no weights attached")
    references: list[Reference] = Field(
        default_factory=list, description="Weights on this base compared against but not in this repository"
    )


class DataRef(_Strict):
    """The training data an entry was trained on (seed 002's dataset versions): the sha256 of the
    file the trainer read, or, where the author has no such hash (seed 000), the dataset repo and
    the commit the data was taken at."""

    version: str = Field(pattern=DATA_VERSION_PATTERN)
    sha256: Sha256 | None = Field(
        default=None,
        pattern=SHA256_PATTERN,
        description="The file the trainer read; null only where dataset_repo and dataset_revision name the data",
    )
    dataset_repo: str | None = None
    dataset_revision: str | None = Field(
        default=None, pattern=GIT_COMMIT_PATTERN, description="The dataset repo's commit the data was taken at"
    )

    @property
    def identity(self) -> str:
        """The data as messages name it: ``sha256 1a2b3c4d5e6f…`` or ``<dataset repo>@<revision>``."""
        return f"sha256 {self.sha256[:12]}…" if self.sha256 else f"{self.dataset_repo}@{self.dataset_revision}"

    @model_validator(mode="after")
    def _identified(self) -> DataRef:
        if self.sha256 is None and not (self.dataset_repo and self.dataset_revision):
            raise ValueError("names no training data: give sha256, or dataset_repo with dataset_revision")
        return self


class Score(_Strict):
    """One evaluation result; only results with the same date and backend are comparable."""

    benchmark: str = Field(min_length=1)
    value: float
    unit: str = "%"
    date: date
    backend: str = Field(min_length=1)
    runs: int = Field(default=1, ge=1)
    notes: Note = ""
    count: float | None = Field(default=None, ge=0, description="Items scored correct (seed 001: 296.5 题)")
    setup: str | None = Field(default=None, description="Name of an evaluation setup in registry.setups")
    baseline: str | None = Field(
        default=None,
        description="What this result is compared with: the base's name, a reference's name or an entry's path",
    )
    footnote: Note = Field(default="", description="Why the comparison is only indicative")


class Reference(_Strict):
    """Weights compared against that this repository does not hold (seed 001: an unpublished run)."""

    name: str = Field(min_length=1)
    method: Method | None = None
    location: str | None = Field(default=None, description="Where it is published; null: never uploaded")
    scores: list[Score] = Field(default_factory=list)


class FileRef(_Strict):
    """A file that belongs to an entry without being its main path (e.g. a safetensors shard)."""

    path: str
    sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    size: int = Field(ge=0)


class GateCheck(_Strict):
    """One check of a gate run: its verdict and measured figures."""

    name: str
    passed: bool
    figures: dict[str, float | int | str | bool | None] = Field(default_factory=dict)


class FormatSample(_Strict):
    """A short greedy continuation the gate ran in the weight's own prompt format, with its stop
    rules: a smoke sample (the weight runs in its format and how it ends its turn), not a benchmark
    and not part of the gate's verdict (docs/gpu-gate.md, "Each weight in its own format")."""

    format: str = Field(
        min_length=1, description="g1k or g1k-think (the profile's prompt), or prompt (the entry's own prompt format)"
    )
    format_from: Literal["prompt", "profile", "default"] = Field(
        description="prompt: the entry's prompt; profile: its serving.profile; default: the method's default profile"
    )
    prompt_sha256: Sha256 = Field(pattern=SHA256_PATTERN, description="sha256 of the prompt's UTF-8 text")
    prompt_tokens: int = Field(ge=1)
    stop_tokens: list[int] = Field(default_factory=list)
    stop_texts: list[str] = Field(default_factory=list)
    max_new_tokens: int = Field(ge=1)
    first_tokens: list[int] = Field(description="The first generated token ids (a stop token is never one of them)")
    text: str = Field(
        description="The first tokens decoded (bytes that are not UTF-8 shown as U+FFFD), cut before a stop text"
    )
    tokens: int = Field(ge=0, description="Tokens generated before the stop (the budget when none came)")
    stop_reason: Literal["stop_token", "stop_text", "max_new_tokens"]
    stop_text_seen: bool = Field(description="One of the stop texts appeared within the budget")


class GateSummary(_Strict):
    """What a reader needs to know of the gate run on exactly these bytes: when, where, with which
    versions, the verdict and its figures.  The receipt publish trusts stays in the gating
    machine's .registry/gates/ (never named here: a clone does not have it)."""

    passed: bool
    device: Literal["cuda", "cpu"]
    file_sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    gpu: str | None = None
    date: str
    versions: dict[str, str] = Field(
        default_factory=dict, description="torch, cuda, rwkv, python, registry, kernel_source_hash, driver"
    )
    checks: list[GateCheck] = Field(default_factory=list)
    sample: FormatSample | None = Field(
        default=None, description="The smoke sample in the weight's own format; null: gated before samples were run"
    )


class Entry(_Strict):
    """One weight file (or one sharded checkpoint) in the registry."""

    path: str = Field(description="POSIX path relative to the registry root")
    method: Method
    base_sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    data: DataRef
    sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    size: int = Field(ge=0)
    format: Literal["pth", "safetensors", "safetensors-sharded"] = "pth"
    content_version: Sha256 | None = Field(default=None, pattern=SHA256_PATTERN)
    recommended: bool = False
    notes: Note = ""
    scores: list[Score] = Field(default_factory=list)
    derived_from: str | None = Field(default=None, description="Path of the entry this one was converted from")
    shards: list[FileRef] = Field(default_factory=list)
    gate: GateSummary | None = None
    known_issues: Localized = Field(default_factory=Localized)
    prompt: PromptFormat | None = None
    stop: StopRules | None = None
    serving: Serving | None = None
    parameters: int | None = Field(default=None, ge=1, description="Parameter count, for the VRAM hint")
    inference_dtype: Literal["bf16", "fp16", "fp32"] | None = None
    training: list[TrainingStage] = Field(default_factory=list)
    evaluation: str | None = Field(
        default=None,
        description="The author's evaluation.json about this weight, kept byte for byte: beside it, in its "
        "data-version folder, or at the root for a root entry (read for the card, never rewritten)",
    )

    @field_validator("path")
    @classmethod
    def _relative_posix(cls, value: str) -> str:
        problem = path_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class HfExport(_Strict):
    """A folder exported by ``registry export-hf``: from a base or a full entry, one Transformers
    loads (flash-linear-attention's RWKV-7: fla-named safetensors shards, config.json,
    generation_config.json, the world tokenizer); from a MiSS adapter, a PEFT adapter folder; from a
    State, its initial recurrent state in fla's layout."""

    path: Annotated[str, AfterValidator(lambda value: _registry_path(value))] = Field(
        description="The folder: <base>/hf for a base, hf/ beside a full entry or a MiSS adapter, hf/<state-stem> "
        "beside a State"
    )
    source: str = Field(description="The full entry's path, or the base's name")
    source_sha256: Sha256 = Field(pattern=SHA256_PATTERN, description="The .pth the folder was exported from")
    base_sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    vocab: str = Field(description="The tokenizer files' vocabulary, e.g. rwkv_vocab_v20230424")
    files: list[FileRef] = Field(min_length=1, description="Every file in the folder")


RWKV7_MODEL_TYPE: Final = "rwkv7"  # config.json's model_type of fla's RWKV-7: the gate applies


class Checkpoint(_Strict):
    """A Transformers-format checkpoint held as its author made it (seed 004): safetensors shards
    with ``model.safetensors.index.json``, config.json, a generation config and tokenizer files,
    optionally ``checkpoint_manifest.json`` (every file's sha256) and the author's evaluation.json,
    at the root or in ``<base>/full/<data-version>/``.  Its files stay byte for byte as written;
    the RWKV-7 gate runs it (mapped back to the runtime's names in memory) when ``model_type`` is
    ``rwkv7``, and does not apply to any other architecture."""

    path: Annotated[str, AfterValidator(lambda value: _registry_path(value))] = Field(
        description="Its weight index, model.safetensors.index.json (at the root, or in <base>/full/<data-version>/)"
    )
    sha256: Sha256 = Field(pattern=SHA256_PATTERN, description="The weight index's sha256")
    size: int = Field(ge=0)
    library_name: Literal["transformers"] = "transformers"
    architecture: str = Field(min_length=1, description="config.json's architectures[0] (else its model_type)")
    model_type: str = Field(min_length=1, description="config.json's model_type; rwkv7: the RWKV-7 gate applies")
    initialized_from: str | None = Field(
        default=None, description="The Hub repo training started from, where the card says so (base_model)"
    )
    base_sha256: Sha256 | None = Field(
        default=None, pattern=SHA256_PATTERN, description="The base, for a checkpoint under <base>/full/<v>/"
    )
    data: DataRef | None = None
    shards: list[FileRef] = Field(min_length=1, description="The safetensors shards its weight_map names")
    files: list[FileRef] = Field(
        default_factory=list, description="Its other files: config.json, generation_config.json, tokenizer files"
    )
    manifest: Annotated[str, AfterValidator(lambda value: _registry_path(value))] | None = Field(
        default=None,
        description="The author's checkpoint_manifest.json (every file's sha256): checked against the files, "
        "and its line of a file a registry command rewrites (README.md) kept in step in the same commit",
    )
    evaluation: str | None = Field(
        default=None,
        description="The author's evaluation.json beside it (read, shown on the card, never rewritten)",
    )
    scores: list[Score] = Field(
        default_factory=list, description="Results recorded with `registry score` (the author's file is not written)"
    )
    gate: GateSummary | None = None

    @property
    def folder(self) -> str:
        """The folder it lies in ("" at the root)."""
        return self.path.rsplit("/", 1)[0] if "/" in self.path else ""

    @property
    def rwkv7(self) -> bool:
        return self.model_type == RWKV7_MODEL_TYPE

    def weight_files(self) -> dict[str, str]:
        """What the gate reads and its receipt lists: the weight index and its shards, by sha256."""
        return {self.path: self.sha256, **{s.path: s.sha256 for s in self.shards}}

    def all_files(self) -> list[FileRef]:
        return [FileRef(path=self.path, sha256=self.sha256, size=self.size), *self.shards, *self.files]


GGUF_TYPES = ("f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m")
GgufType = Literal["f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m"]


class GgufFile(_Strict):
    """A GGUF file (llama.cpp, Ollama) made by ``registry export-gguf`` from a base, a full entry,
    or a MiSS adapter merged into its base: its lineage, its bytes and its gate."""

    path: Annotated[str, AfterValidator(lambda value: _registry_path(value))] = Field(
        description="<base>/gguf/<name>.gguf, or gguf/<name>.gguf beside the entry"
    )
    source: str = Field(description="The full entry's or MiSS adapter's path, or the base's name")
    source_sha256: Sha256 = Field(
        pattern=SHA256_PATTERN, description="The .pth the file was made from (the adapter's, for a merged MiSS)"
    )
    base_sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    merged: bool = Field(
        default=False, description="A MiSS adapter merged into its base (bit-exact, as the gate merges it)"
    )
    type: GgufType
    tools: dict[str, str] = Field(
        description="The tools and versions that made the file (rwkv-registry, gguf, llama-cpp-python)"
    )
    sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    size: int = Field(ge=0)
    gate: GateSummary | None = None
    nmse: float | None = Field(
        default=None,
        ge=0,
        description="The gate's NMSE of llama.cpp's logits against our fp32 reference (worst prompt)",
    )
    top1_agreement: float | None = Field(
        default=None, ge=0, le=1, description="The gate's top-1 agreement with the reference (worst prompt)"
    )


class Rewrite(_Strict):
    """A recorded, deliberate change to a file that had already been published."""

    path: str
    old_sha256: Sha256 | None = Field(default=None, pattern=SHA256_PATTERN)
    new_sha256: Sha256 | None = Field(default=None, pattern=SHA256_PATTERN)
    reason: str = Field(min_length=1)
    date: str


class Signer(_Strict):
    """Who signs the registry's releases (``model.sig``, OpenSSF Model Signing; ``registry sign``)."""

    method: Literal["key"] = Field(default="key", description="key: a local elliptic-curve private key")
    fingerprint: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="sha256 of the signer's PEM public key (SubjectPublicKeyInfo): the bundle's key hint",
    )


class RegistryInfo(_Strict):
    """Registry-wide settings that the card needs."""

    title: str = "RWKV-7 weights"
    license: str | None = None
    tags: list[str] = Field(default_factory=lambda: ["rwkv", "rwkv-7"])
    repo_id: str | None = None
    access: Access | None = Field(default=None, description=ACCESS_DESCRIPTION)
    languages: list[Language] = Field(
        default_factory=lambda: list(BILINGUAL),
        min_length=1,
        max_length=2,
        description="The card's languages, in order",
    )
    summary: Localized = Field(default_factory=Localized)
    intended_use: Localized = Field(default_factory=Localized)
    limitations: Localized = Field(default_factory=Localized)
    attribution: Localized = Field(default_factory=Localized)
    setups: list[EvalSetup] = Field(default_factory=list)
    signer: Signer | None = Field(
        default=None, description="The key that signs model.sig; null: releases are not signed"
    )
    front_matter: dict[str, Any] = Field(
        default_factory=dict,
        description="The author's own card metadata (a hand-written README's front matter, as written): every key "
        "stays in the card's; the author's values stand, lists the registry writes are merged in; model-index and "
        "base_model_relation are the registry's",
    )

    @field_validator("languages")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        return distinct_languages(value)


def distinct_languages(value: list[str]) -> list[str]:
    """The card's languages, refused when one is listed twice (a model or a dataset card)."""
    if len(set(value)) != len(value):
        raise ValueError("a language is listed twice")
    return value


class Index(_Strict):
    """index.json: bases and one entry per weight file."""

    SCHEMA_KIND: ClassVar[str] = "index"  # its checked-in schema: schemas/index.schema.json
    FORMAT_VERSION: ClassVar[int] = (
        INDEX_FORMAT_VERSION  # an older one is refused with "run registry migrate" (core/schemas.py)
    )

    format_version: Literal[2] = INDEX_FORMAT_VERSION
    registry: RegistryInfo = Field(default_factory=RegistryInfo)
    bases: list[Base] = Field(default_factory=list)
    entries: list[Entry] = Field(default_factory=list)
    exports: list[HfExport] = Field(
        default_factory=list,
        description="Transformers/fla folders exported from bases and entries (registry export-hf)",
    )
    ggufs: list[GgufFile] = Field(
        default_factory=list, description="GGUF files made from bases and entries (registry export-gguf)"
    )
    checkpoints: list[Checkpoint] = Field(
        default_factory=list,
        description="Transformers-format checkpoints held as their authors made them (seed 004; docs/formats.md)",
    )
    rewrites: list[Rewrite] = Field(default_factory=list)
    kept_facts: dict[str, Any] = Field(
        default_factory=dict,
        description="What a hand-written index.json stated that no field above holds, by its JSON path there, as "
        "written (registry adopt): published with the registry and shown on the card",
    )

    def base_by_name(self, name: str) -> Base | None:
        return next((b for b in self.bases if b.name == name), None)

    def base_by_sha(self, sha256: str) -> Base | None:
        return next((b for b in self.bases if b.sha256 == sha256), None)

    def entry_by_path(self, path: str) -> Entry | None:
        return next((e for e in self.entries if e.path == path), None)

    def checkpoint_by_path(self, path: str) -> Checkpoint | None:
        """The checkpoint whose weight index or folder is ``path``."""
        return next((c for c in self.checkpoints if path in (c.path, c.folder, f"{c.folder}/")), None)

    def derived_from(self, base_sha256: str, source: str) -> tuple[Base, Entry | None] | str:
        """The base and the entry (None: the base itself) a derived file (an export, a GGUF) names,
        or why they are not there."""
        base = self.base_by_sha(base_sha256)
        if base is None:
            return f"names base sha256 {base_sha256[:12]}…, which is not in bases"
        entry = self.entry_by_path(source)
        if entry is None and source != base.name:
            return f"its source {source} is neither an entry nor its base"
        return base, entry


class Trainer(_Strict):
    name: str = Field(min_length=1, description="e.g. rwkv_state_tune, rwkv_miss_tune")
    version: str = Field(min_length=1)
    commit: str | None = Field(default=None, description="The exact build commit; null: not recorded")
    package: str | None = Field(default=None, description="What ships the trainer, e.g. rwkv_lightning_cuda")
    requires: str | None = Field(
        default=None,
        description="What any build used to retrain must have, e.g. the segments mask (commit 47df608): "
        "v1.8.1 or later",
    )


class TrainRun(_Strict):
    """Per-run overrides inside one data-version directory (seed 001: three MiSS learning rates)."""

    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    command: str | None = None
    started: str | None = None
    finished: str | None = None


class TrainJson(_Strict):
    """train.json next to the weights: how they were trained, reproducibly."""

    SCHEMA_KIND: ClassVar[str] = "train"  # its checked-in schema: schemas/train.schema.json

    trainer: Trainer
    hyperparameters: dict[str, Any]
    command: str = Field(min_length=1, description="Equivalent command line")
    data_sha256: Sha256 = Field(pattern=SHA256_PATTERN)
    runs: dict[str, TrainRun] = Field(default_factory=dict)
    notes: str = Field(default="", max_length=MAX_NOTES_CHARS)


def _registry_path(path: str) -> str:
    problem = path_problem(path)
    if problem:
        raise ValueError(problem)
    return path


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a registry path, or None when it can.

    Registry paths are relative POSIX paths that stay under the root; they end up in
    SHA256SUMS and on the Hub, where a newline or backslash would corrupt the line format.
    """
    if not path:
        return "empty path"
    if "\\" in path:
        return f"path {path!r} contains a backslash"
    if CONTROL_CHARACTERS.search(path):
        return f"path {path!r} contains a control character (newline?)"
    invisible = invisible_character(path)
    if invisible:
        return (
            f"path {path!r} contains {invisible}, a bidi control or zero-width character that makes it read as "
            "another name"
        )
    if path.startswith("/"):
        return f"path {path!r} is absolute"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return f"path {path!r} has an empty, '.' or '..' component"
    if any(p != p.strip() for p in parts):
        return f"path {path!r} has a name that starts or ends with white space"
    return None


class EvalSubject(_Strict):
    """What a result was measured on: an entry (with its safetensors twins), a base alone, or a reference."""

    kind: Literal["entry", "base", "reference", "checkpoint"]
    name: str = Field(
        description="The entry's path, the base's name, the reference's name or the checkpoint's weight index"
    )
    base: str = Field(description="Name of the base it runs on (a checkpoint at the root: its weight index)")
    sha256: Sha256 | None = Field(
        default=None, pattern=SHA256_PATTERN, description="The file's sha256 (entry: the .pth; base: the base file)"
    )
    files: list[str] = Field(
        default_factory=list, description="Every file holding these weights: the entry and its twins"
    )
    location: str | None = Field(default=None, description="A reference's location; null: never uploaded")


class EvalBaseline(_Strict):
    name: str
    value: float | None = Field(
        description="The baseline's result on the same benchmark and setup; null: none recorded"
    )


class EvalResult(_Strict):
    subject: EvalSubject
    benchmark: str
    value: float
    unit: str
    count: float | None = None
    date: date
    backend: str
    runs: int
    setup: str | None = None
    baseline: EvalBaseline | None = None
    notes: Note = ""
    footnote: Note = ""


class Evaluation(_Strict):
    """evaluation.json: every recorded result with its setup, derived from index.json like the card."""

    SCHEMA_KIND: ClassVar[str] = "evaluation"  # its checked-in schema: schemas/evaluation.schema.json

    format_version: Literal[1] = 1
    setups: list[EvalSetup] = Field(default_factory=list)
    results: list[EvalResult] = Field(default_factory=list)


MODELS: dict[str, type[BaseModel]] = {model.SCHEMA_KIND: model for model in (Index, TrainJson, Evaluation)}
