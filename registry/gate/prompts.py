"""The gate's prompts and tokenizer.

The fixed parity prompts are the examples the seed cards give their users (seed 000's
scene-boundary and attribution prompts, in the ``System/User/Assistant`` format with single spaces
after the role labels); the tokenizer is the ``rwkv`` package's own for ``rwkv_vocab_v20230424``.

Besides them, each entry runs a short sample in its own format (:func:`sample_format`): the
prompt its card states (``registry describe --prompt-format/--prompt-example``), else its serving
profile's (``--profile g1k`` or ``g1k-think``), else its method's default profile (seed 001: a
State on g1k, a MiSS adapter on g1k-think; a full fine-tune without a stated format on g1k), with
its stop rules (``--stop-token/--stop-text``, else token 0 and the profile's stop text).  A
Transformers checkpoint states none of these in index.json: it runs in a full fine-tune's default
(:func:`checkpoint_sample_format`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Literal

from ..core.files import atomic_write
from ..core.hashing.digest import sha256_hex
from ..core.models import PROFILES, Entry, Method, PromptFormat, StopRules
from ..core.names import VOCAB_NAME
from ..core.resources import user_cache

STOP_TOKEN = 0
STOP_TEXT = "\n\nUser:"
# The sample's question in a profile's format: short, answerable in a sentence, in the language of
# the seeds' users.  A thinking profile's answer is opened with the RWKV-7 G1 think prompt.
SAMPLE_QUESTION = "用一句话介绍你自己。"
THINK_OPENING = " <think"
DEFAULT_PROFILE: dict[Method, str] = {"state": "g1k", "miss": "g1k-think", "full": "g1k"}

PROMPTS: dict[str, str] = {
    "seed000-scene-boundary": (
        'System: 场景边界检测。仅输出 {"boundaries":[N]}\n\n'
        "User: [P1] 雨停了。\n[P2] 三天后，他回到故乡。\n[P3] 他推开老宅的门。\n\n"
        "Assistant:"
    ),
    "seed000-attribution": (
        "System: 你是一个中文小说归因辅助助手。只能从候选角色中选择，并只输出 JSON。\n\n"
        "User: 候选角色：甲、乙\n上下文：……\n\n"
        "Assistant:"
    ),
}


@dataclass(frozen=True)
class SampleFormat:
    """The prompt an entry's sample runs and the rules it stops by (see the module docstring)."""

    name: str  # g1k, g1k-think, or "prompt" (the entry's own)
    source: Literal["prompt", "profile", "default"]
    prompt: str
    stop_tokens: tuple[int, ...]
    stop_texts: tuple[str, ...]
    unknown_profile: str | None = None  # a recorded profile the gate has no prompt for (the default ran)


def profile_prompt(profile: str) -> str:
    """The sample's prompt in a known profile's format: one user turn, then the assistant's turn
    (opened with ``<think`` where the profile thinks)."""
    opening = THINK_OPENING if PROFILES[profile].thinking == "full" else ""
    return f"User: {SAMPLE_QUESTION}\n\nAssistant:{opening}"


def sample_format(entry: Entry) -> SampleFormat:
    """The format ``entry`` (a source entry: a twin is described through its source) is sampled in."""
    return _format(entry.method, entry.prompt, entry.stop, entry.serving.profile if entry.serving else None)


def checkpoint_sample_format() -> SampleFormat:
    """The format a Transformers checkpoint is sampled in: a full fine-tune's default (its
    generation_config.json's sampling defaults do not apply: the sample is greedy)."""
    return _format("full", None, None, None)


def _format(method: Method, stated: PromptFormat | None, stop: StopRules | None, profile: str | None) -> SampleFormat:
    source: Literal["prompt", "profile", "default"]
    if stated is not None:
        name, source, prompt = "prompt", "prompt", stated.example or stated.format
        stop_text = STOP_TEXT
    else:
        if profile in PROFILES:
            name, source = profile, "profile"
        else:
            name, source = DEFAULT_PROFILE[method], "default"
        prompt, stop_text = profile_prompt(name), PROFILES[name].stop_text
    return SampleFormat(
        name=name,
        source=source,
        prompt=prompt,
        stop_tokens=tuple(stop.tokens) if stop else (STOP_TOKEN,),
        stop_texts=tuple(stop.texts) if stop else (stop_text,),
        unknown_profile=profile if profile and source == "default" else None,
    )


@dataclass(frozen=True)
class Tokenizer:
    """What the gate needs of the world tokenizer: the prompts' ids, encoding a sample's prompt,
    and decoding generated ids."""

    prompt_ids: dict[str, list[int]]
    vocabulary: list[bytes]  # token id -> its bytes

    def decode(self, tokens: list[int]) -> str:
        """The package's decoding: the tokens' bytes as UTF-8, or U+FFFD when they are not (yet) valid."""
        try:
            return b"".join(self.vocabulary[t] for t in tokens).decode("utf-8")
        except UnicodeDecodeError:
            return "\ufffd"

    def shown(self, tokens: list[int]) -> str:
        """The tokens' text for a reader: bytes that are not UTF-8 (a character cut by the end of
        the list, or noise from random weights) each shown as U+FFFD, the rest as they are."""
        return b"".join(self.vocabulary[t] for t in tokens).decode("utf-8", errors="replace")

    def encode(self, text: str) -> list[int]:
        """The package's encoding: from each position, the longest vocabulary entry its bytes
        start with (the rwkv trie tokenizer's rule)."""
        ids = self._ids_by_bytes
        longest = max(map(len, ids))
        data = text.encode("utf-8")
        tokens, at = [], 0
        while at < len(data):
            for width in range(min(longest, len(data) - at), 0, -1):
                token = ids.get(data[at : at + width])
                if token is not None:
                    tokens.append(token)
                    at += width
                    break
            else:
                raise ValueError(f"byte {data[at]:#04x} is in no vocabulary entry")
        return tokens

    @cached_property
    def _ids_by_bytes(self) -> dict[bytes, int]:
        return {token: i for i, token in enumerate(self.vocabulary) if token}


def _vocab_path() -> Path:
    import rwkv  # noqa: PLC0415 optional dependency: rwkv

    return Path(rwkv.__file__).parent / VOCAB_NAME


@cache
def tokenizer() -> Tokenizer:
    """The rwkv package's tokenizer for the gate, read from the user cache when it is current.

    Building the package's trie tokenizer takes seconds per process; what the gate uses of it
    (the fixed prompts' ids and every token's bytes) is cached, keyed by the vocabulary file's and
    the prompts' sha256, and rebuilt from the package whenever either changes.
    """
    vocab_path = _vocab_path()
    vocab = vocab_path.read_bytes()
    key = sha256_hex(vocab + json.dumps(PROMPTS, sort_keys=True).encode())
    cached = user_cache("world-tokenizer.json")
    try:
        data = json.loads(cached.read_text("utf-8"))
        if data.get("key") == key:
            return Tokenizer(data["prompt_ids"], [bytes.fromhex(t) for t in data["vocabulary"]])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # a missing or broken cache only costs a rebuild
    from rwkv.rwkv_tokenizer import TRIE_TOKENIZER  # noqa: PLC0415 optional dependency: rwkv

    trie = TRIE_TOKENIZER(str(vocab_path))
    built = Tokenizer(
        {name: list(trie.encode(text)) for name, text in PROMPTS.items()},
        [trie.idx2token.get(i, b"") for i in range(max(trie.idx2token) + 1)],
    )
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        payload = {"key": key, "prompt_ids": built.prompt_ids, "vocabulary": [t.hex() for t in built.vocabulary]}
        atomic_write(cached, json.dumps(payload).encode())
    except OSError:
        pass  # no cache where the home directory is read-only
    return built
