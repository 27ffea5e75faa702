"""The gate's fixed prompts and tokenizer.

The prompts are the examples the seed cards give their users (seed 000's scene-boundary and
attribution prompts, in the ``System/User/Assistant`` format with single spaces after the role
labels); the tokenizer is the ``rwkv`` package's own for ``rwkv_vocab_v20230424``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

STOP_TOKEN = 0
STOP_TEXT = "\n\nUser:"
VOCAB = "rwkv_vocab_v20230424.txt"

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
    encode_fn: Callable[[str], Iterable[int]]
    decode_fn: Callable[[list[int]], str]

    def encode(self, text: str) -> list[int]:
        return list(self.encode_fn(text))

    def decode(self, tokens: list[int]) -> str:
        try:
            return self.decode_fn(tokens)
        except UnicodeDecodeError:  # a multi-byte character split across tokens, mid-generation
            return self.decode_fn(tokens[:-1]) if len(tokens) > 1 else ""


@cache
def tokenizer() -> Tokenizer:
    """The rwkv package's TRIE tokenizer (importing it loads no model code)."""
    import rwkv  # noqa: PLC0415
    from rwkv.rwkv_tokenizer import TRIE_TOKENIZER  # noqa: PLC0415

    trie = TRIE_TOKENIZER(str(Path(rwkv.__file__).parent / VOCAB))
    return Tokenizer(trie.encode, trie.decode)
