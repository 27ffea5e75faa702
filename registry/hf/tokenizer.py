"""Tokenizer files for the RWKV world vocabulary (``rwkv_vocab_v20230424``) that ``AutoTokenizer``
loads with no remote code and that give exactly the ids of the ``rwkv`` package's TRIE tokenizer.

That tokenizer is greedy longest-match over the UTF-8 bytes: at each position, the longest
vocabulary entry that starts there.  A ``tokenizers`` pipeline that does the same:

1. a ByteLevel pre-tokenizer (no regex, no prefix space) maps each byte to one character of the
   GPT-2 byte alphabet, so the text becomes one string with one character per byte;
2. a Split pre-tokenizer cuts it with one regular expression: the vocabulary as a trie, each
   node ``(?:child|child…)?`` (the ``?`` where a token ends there).  A backtracking regex tries
   the longer continuation first and falls back to the deepest token end it passed, so each match
   is the longest token at that position; every single byte is a token, so the matches tile the
   text, and leftmost matching walks it exactly as the TRIE tokenizer does;
3. a WordPiece model (no continuing-subword prefix) maps each piece, which is a whole token, to
   its id; a ByteLevel decoder turns ids back into bytes.

(WordPiece alone is greedy longest-match too, but it tries every end of a word before the
shorter ones: cubic in the text's length, 7 minutes for 16,000 characters, against a tenth of a
second here.)  Id 0 is the end-of-text token the RWKV runtimes stop on; it is not in the
vocabulary file and is registered as the special token :data:`END_OF_TEXT`.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..core.errors import RegistryError
from ..core.hashing.engine import hash_file
from ..core.models import Base
from ..core.names import INDEX_NAME, VOCAB_NAME

WORLD_VOCAB = "rwkv_vocab_v20230424"
WORLD_VOCAB_SHA256 = "8324476023347dec2964625ccb2075c864d250a9c6d9a74f36daba628de8c008"  # the file in rwkv==0.8.32
END_OF_TEXT = "<|rwkv_tokenizer_end_of_text|>"  # the name fla-hub's RWKV-7 repositories give id 0


def world_vocab_file() -> Path:
    """The world vocabulary the ``rwkv`` package ships, checked to be the known bytes."""
    import rwkv  # noqa: PLC0415 optional dependency: rwkv

    path = Path(rwkv.__file__).parent / VOCAB_NAME
    if not path.is_file() or hash_file(path) != WORLD_VOCAB_SHA256:
        raise RegistryError(
            "export.vocab-file",
            path,
            f"is not the {WORLD_VOCAB} vocabulary this exporter knows",
            "pip install 'rwkv==0.8.32'",
        )
    return path


@cache
def trie_tokenizer() -> Any:
    """The ``rwkv`` package's own tokenizer for the world vocabulary (the reference the tokenizer
    files are checked against); its loader ``eval``s the vocabulary's lines, so it only ever reads
    the file :func:`world_vocab_file` checked by sha256."""
    from rwkv.rwkv_tokenizer import TRIE_TOKENIZER  # noqa: PLC0415 optional dependency: rwkv

    return TRIE_TOKENIZER(str(world_vocab_file()))


def read_vocab(path: Path) -> dict[int, bytes]:
    """id → token bytes from a vocabulary file (``<id> <python literal> <byte length>`` lines).

    The literal is read with :func:`ast.literal_eval`, never ``eval``.
    """
    tokens: dict[int, bytes] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            token_id = int(line[: line.index(" ")])
            value = ast.literal_eval(line[line.index(" ") : line.rindex(" ")].strip())
            data = value.encode("utf-8") if isinstance(value, str) else value
            if not isinstance(data, bytes) or len(data) != int(line[line.rindex(" ") :]):
                raise ValueError("length field disagrees")
        except (ValueError, SyntaxError) as exc:
            raise RegistryError(
                "export.vocab-file",
                path,
                f"line {number} is not `<id> <literal> <length>` ({exc})",
                "pip install 'rwkv==0.8.32'",
            ) from exc
        tokens[token_id] = data
    return tokens


def check_vocab(base: Base, vocab_size: int, source: str | Path) -> None:
    """The base's recorded vocabulary is the world vocabulary and its model has room for every id."""
    recorded = (base.vocab or WORLD_VOCAB).removesuffix(".txt")
    if recorded != WORLD_VOCAB:
        raise RegistryError(
            "export.vocab-mismatch",
            INDEX_NAME,
            f"base {base.name} records vocabulary {base.vocab}, and the exporter writes tokenizer files "
            f"for {WORLD_VOCAB} only",
            f"export a base built on {WORLD_VOCAB} (or correct the base's recorded vocab if it is wrong)",
        )
    if vocab_size < 65536:
        raise RegistryError(
            "export.vocab-mismatch",
            source,
            f"the model has {vocab_size} token embeddings, fewer than {WORLD_VOCAB}'s 65536 ids, so it is "
            "not built on the vocabulary its base records",
            "export the checkpoint trained with the world vocabulary, or correct the base's recorded vocab",
        )


def _byte_alphabet() -> list[str]:
    """GPT-2's byte → character table (what tokenizers' ByteLevel uses), indexed by byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def _escape(char: str) -> str:
    return "\\" + char if char.isascii() and not char.isalnum() else char


def longest_match_pattern(tokens: list[str]) -> str:
    """A regex whose every match is the longest of ``tokens`` starting there (see the module doc)."""
    trie: dict[str, Any] = {}
    for token in tokens:
        node = trie
        for char in token:
            node = node.setdefault(char, {})
        node[""] = {}  # a token ends here ("" is never a character)

    def pattern(node: dict[str, Any]) -> str:
        branches = [_escape(char) + pattern(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = "(?:" + "|".join(branches) + ")" if len(branches) > 1 or "" in node else branches[0]
        return body + "?" if "" in node else body

    return pattern(trie)


def tokenizer_json(vocab: Mapping[int, bytes]) -> bytes:
    """tokenizer.json (the ``tokenizers`` library's format) for this vocabulary."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers  # noqa: PLC0415 optional dependency: tokenizers

    alphabet = _byte_alphabet()
    pieces = {"".join(alphabet[b] for b in data): token_id for token_id, data in sorted(vocab.items())}
    model = models.WordPiece(
        vocab={END_OF_TEXT: 0, **pieces},
        unk_token=END_OF_TEXT,
        continuing_subword_prefix="",
        max_input_chars_per_word=1 << 30,
    )
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            pre_tokenizers.Split(Regex(longest_match_pattern(list(pieces))), behavior="isolated"),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(END_OF_TEXT, special=True, normalized=False)])
    return (tokenizer.to_str(pretty=False) + "\n").encode()


@cache
def world_vocab() -> Mapping[int, bytes]:
    """id → token bytes of the world vocabulary (:func:`world_vocab_file`, checked), read once a process."""
    return MappingProxyType(read_vocab(world_vocab_file()))


@cache
def world_tokenizer_json() -> bytes:
    """tokenizer.json for the world vocabulary, built once a process (about a second each time)."""
    return tokenizer_json(world_vocab())


def tokenizer_config_json() -> bytes:
    """tokenizer_config.json: the fast tokenizer class, id 0 as every special token, no cleanup
    of spaces on decode (it would change the text the ids stand for)."""
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": END_OF_TEXT,
        "eos_token": END_OF_TEXT,
        "unk_token": END_OF_TEXT,
        "pad_token": END_OF_TEXT,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1 << 40,
    }
    return (json.dumps(config, indent=2) + "\n").encode()
