"""The gate's fixed prompts and tokenizer.

The prompts are the examples the seed cards give their users (seed 000's scene-boundary and
attribution prompts, in the ``System/User/Assistant`` format with single spaces after the role
labels); the tokenizer is the ``rwkv`` package's own for ``rwkv_vocab_v20230424``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..core.files import atomic_write
from ..core.hashing.digest import sha256_hex
from ..core.names import VOCAB_NAME
from ..core.resources import user_cache

STOP_TOKEN = 0
STOP_TEXT = "\n\nUser:"

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
class Tokenizer:
    """What the gate needs of the world tokenizer: the prompts' ids, and decoding generated ids."""

    prompt_ids: dict[str, list[int]]
    vocabulary: list[bytes]  # token id -> its bytes

    def decode(self, tokens: list[int]) -> str:
        """The package's decoding: the tokens' bytes as UTF-8, or U+FFFD when they are not (yet) valid."""
        try:
            return b"".join(self.vocabulary[t] for t in tokens).decode("utf-8")
        except UnicodeDecodeError:
            return "\ufffd"


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
