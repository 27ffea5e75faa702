"""What a version's rows hold against what the version states: the checks seed 002's author ran
by hand, each driven by one of the version's facts (:class:`~.models.DataVersion`).

* ``stop_text`` (or the profile's): every row's text ends with it (``content.no-stop``);
* ``vocabulary``: every row tokenized with the rwkv package's World tokenizer
  (``rwkv.rwkv_tokenizer``, the package's own file of that name), and
  - the **segment check**: tokenizing the row piece by piece (its loss spans cut it, as the
    segments files hold it) gives the tokens of the whole text: no piece boundary falls inside a
    token (``content.segment-splits-token``, what the ``*-segcheck.log`` files record);
  - ``context``: no row holds more tokens (``content.over-context``);
  - each split's ``manifest.json``, where it states ``max_tokens`` or ``token_quantiles``
    (``{"p50": n, "p99": n, …}``, nearest rank), agrees (``content.manifest-tokens``);
* ``family_key``: no family has rows in both splits (``content.family-in-both-splits``), and
  ``split_rule`` (``sha256(<key>) mod M == R`` picks the validation rows) holds for every row
  (``content.split-rule``);
* ``flag_key`` / ``flagged_rows``: the rows whose meta flag is true are counted (``content.flag-count``).

The checks see each row in the pass that reads rows.jsonl (:func:`.rows.read_rows`), so memory is
one row, a token-count histogram and the set of family names, never the file.  The tokenizer is a
pure-Python trie: the token results of a file are remembered in ``.registry/`` by the file's sha256
(the one the registry computed), bound to this user's installation by an HMAC (:class:`TokenCache`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import Problem
from ..core.hashing.digest import sha256_hex
from ..core.names import SPLIT_PARENT
from ..core.userkey import read_sealed, save_sealed
from .models import SPLIT_RULE, VOCABULARY_FILE, DataVersion
from .rows import MAX_FINDINGS, FileReport, Layout, Observer

TOKEN_RULES = 1  # bump when what TokenStats holds, or how it is computed, changes
MAX_CACHE_BYTES = 64 << 20
NEEDS_TORCH_EXTRA = "install the torch extra, which brings the rwkv package: pip install 'rwkv-registry[torch]'"
QUANTILE = r"^p(100|[1-9]?[0-9](\.[0-9]+)?)$"


class Tokenizer(Protocol):
    def count(self, text: str, pieces: Layout) -> tuple[int, int | None]: ...


class WorldTokenizer:
    """The rwkv package's TRIE_TOKENIZER over one of the vocabularies it ships."""

    def __init__(self, trie: Any):
        self._find = trie.root.find_longest

    def count(self, text: str, pieces: Layout) -> tuple[int, int | None]:
        """The row's token count, and the character offset of the first piece boundary that falls
        inside a token (None: tokenizing piece by piece gives the whole text's tokens).

        The tokenizer takes the longest vocabulary match at each position, so a prefix ending at a
        token boundary of the whole text tokenizes to the same tokens, and so does what follows it;
        a boundary inside a token makes the piece before it end in another token.  So the pieces
        tokenize to the whole text's tokens exactly when every boundary is a token boundary of
        the whole text (tests/test_dataset_content.py checks this against tokenizing the pieces)."""
        data = text.encode("utf-8", "surrogatepass")
        boundaries: list[tuple[int, int]] = []  # (byte offset, character offset) inside the text
        chars = byte = 0
        for length, _ in pieces[:-1]:
            byte += len(text[chars : chars + length].encode("utf-8", "surrogatepass"))
            chars += length
            boundaries.append((byte, chars))
        position, tokens, at, bad = 0, 0, 0, None
        while position < len(data):
            end = self._find(data, position)[0]
            while at < len(boundaries) and boundaries[at][0] <= position:
                at += 1
            if bad is None and at < len(boundaries) and boundaries[at][0] < end:
                bad = boundaries[at][1]
            position, tokens = end, tokens + 1
        return tokens, bad


@lru_cache(maxsize=4)
def world_tokenizer(vocabulary: str) -> WorldTokenizer | Problem:
    """The tokenizer of ``vocabulary`` (a file the rwkv package ships), or why there is none."""
    try:
        from rwkv import rwkv_tokenizer  # the torch extra's package; its tokenizer imports nothing heavy  # noqa: PLC0415 optional dependency: rwkv
    except ImportError:
        return Problem(
            "content.no-tokenizer",
            vocabulary,
            "the token checks (context, manifest token counts, segment boundaries) need the rwkv package's "
            "World tokenizer, which is not installed; they were not run",
            NEEDS_TORCH_EXTRA,
        )
    name = vocabulary if vocabulary.endswith(".txt") else f"{vocabulary}.txt"
    path = Path(rwkv_tokenizer.__file__).parent / name
    if not re.fullmatch(VOCABULARY_FILE, name) or not path.is_file():
        return Problem(
            "content.unknown-vocabulary",
            vocabulary,
            "the rwkv package ships no vocabulary of that name",
            "state the vocabulary the rows were checked against (--vocab rwkv_vocab_v20230424.txt)",
        )
    return WorldTokenizer(rwkv_tokenizer.TRIE_TOKENIZER(str(path)))


@dataclass
class TokenStats:
    """What tokenizing one rows file found (what :class:`TokenCache` remembers)."""

    histogram: dict[int, int] = field(default_factory=dict)  # tokens -> rows
    over: list[list[int]] = field(default_factory=list)  # [line, tokens] of the first rows over the context
    over_total: int = 0
    splits: list[list[int]] = field(
        default_factory=list
    )  # [line, character offset] of the first rows whose boundary splits a token
    splits_total: int = 0

    @classmethod
    def from_json(cls, data: Any) -> TokenStats | None:
        try:
            stats = cls(
                histogram={int(k): int(v) for k, v in data["histogram"].items()},
                over=[[int(a), int(b)] for a, b in data["over"]],
                over_total=int(data["over_total"]),
                splits=[[int(a), int(b)] for a, b in data["splits"]],
                splits_total=int(data["splits_total"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return stats

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "histogram": {str(k): v for k, v in sorted(self.histogram.items())}}

    @property
    def rows(self) -> int:
        return sum(self.histogram.values())

    @property
    def maximum(self) -> int:
        return max(self.histogram, default=0)

    def quantile(self, percent: float) -> int:
        """The nearest-rank quantile: the smallest count at least ``percent``% of the rows do not exceed."""
        rank, seen = max(1, math.ceil(percent / 100 * self.rows)), 0
        for tokens in sorted(self.histogram):
            seen += self.histogram[tokens]
            if seen >= rank:
                return tokens
        return 0

    def add(self, line: int, tokens: int, bad: int | None, context: int | None) -> None:
        self.histogram[tokens] = self.histogram.get(tokens, 0) + 1
        if context is not None and tokens > context:
            self.over_total += 1
            if len(self.over) < MAX_FINDINGS:
                self.over.append([line, tokens])
        if bad is not None:
            self.splits_total += 1
            if len(self.splits) < MAX_FINDINGS:
                self.splits.append([line, bad])


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


class TokenCache:
    """Token results by what determines them (the file's sha256 as the registry computed it, the
    vocabulary, the context, the rules), in ``.registry/dataset-tokens.json``.

    Everything in ``.registry/`` is untrusted, so the file is sealed with this user's key
    (:func:`registry.core.userkey.save_sealed`): one written by hand, edited or copied from another
    machine counts as absent and the rows are tokenized again.  A read-only registry or a dry run
    remembers nothing; nothing else changes."""

    PURPOSE = "dataset tokens"

    def __init__(self, path: Path | None):
        self.path = path
        data = read_sealed(path, self.PURPOSE, MAX_CACHE_BYTES) if path is not None else None
        self._entries: dict[str, Any] = data if isinstance(data, dict) else {}
        self._dirty = False

    @staticmethod
    def facts(sha256: str, vocabulary: str, context: int | None) -> dict[str, Any]:
        return {"rules": TOKEN_RULES, "sha256": sha256, "vocabulary": vocabulary, "context": context}

    def get(self, facts: dict[str, Any]) -> TokenStats | None:
        entry = self._entries.get(sha256_hex(_canonical(facts)))
        return TokenStats.from_json(entry) if entry is not None else None

    def put(self, facts: dict[str, Any], stats: TokenStats) -> None:
        self._entries[sha256_hex(_canonical(facts))] = stats.to_json()
        self._dirty = True

    def save(self) -> None:
        if self._dirty and self.path is not None:
            save_sealed(self.path, self.PURPOSE, self._entries)


class VersionContent:
    """The content checks of one version: :meth:`split` gives the observer of a split's rows.jsonl
    (in the pass :func:`.rows.read_rows` makes), :meth:`findings` what they found."""

    def __init__(self, version: DataVersion, cache: TokenCache):
        self.version = version
        self.cache = cache
        self.tokens: dict[
            str, tuple[str, TokenStats | None]
        ] = {}  # split -> (its rows file, its token stats; None: not counted)
        self._remember: list[tuple[dict[str, Any], TokenStats]] = []
        self.reports: list[FileReport] = []
        self.families: dict[str, dict[str, int]] = {}  # split -> family -> its first line
        self.flagged = 0
        self.problems: list[Problem] = []
        rule = SPLIT_RULE.match(version.split_rule or "")
        self.rule = (int(rule["modulus"]), int(rule["remainder"])) if rule else None

    def _tokenizer(self) -> Tokenizer | None:
        found = world_tokenizer(self.version.vocabulary)
        if isinstance(found, Problem):
            if not any(p.code == found.code for p in self.problems):
                self.problems.append(replace(found, file=self.version.version))
            return None
        return found

    def split(self, split: str, display: str, sha256: str) -> Observer:
        version = self.version
        report = FileReport(display)
        self.reports.append(report)
        families = self.families.setdefault(split, {})
        facts = TokenCache.facts(sha256, version.vocabulary, version.context)
        cached = self.cache.get(facts)
        tokenizer = None if cached is not None else self._tokenizer()
        stats = cached if cached is not None else (TokenStats() if tokenizer is not None else None)
        self.tokens[split] = (display, stats)
        if stats is not None and cached is None:
            self._remember.append((facts, stats))
        stop, family_key, flag_key = version.stop, version.family_key, version.flag_key

        def observe(number: int, text: str, pieces: Layout, meta: dict[str, Any]) -> None:
            if stop is not None and not text.endswith(stop):
                report.add(
                    "content.no-stop",
                    number,
                    f"the text does not end with the stop text {stop!r} (it ends {text[-24:]!r})",
                    "render the row ending in its profile's stop text, or state the text the rows end with "
                    "(--stop-text)",
                )
            if tokenizer is not None and stats is not None:
                tokens, bad = tokenizer.count(text, pieces)
                stats.add(number, tokens, bad, version.context)
            if family_key is not None:
                self._family(report, split, families, number, meta.get(family_key))
            if flag_key is not None and meta.get(flag_key) is True:
                self.flagged += 1

        return observe

    def _family(self, report: FileReport, split: str, families: dict[str, int], number: int, family: Any) -> None:
        key = self.version.family_key
        if not isinstance(family, str):
            report.add(
                "content.no-family",
                number,
                f"meta.{key} is not a string: the family of the row is unknown",
                f"give every row its meta.{key}, or state the family key the rows carry (--family-key)",
            )
            return
        families.setdefault(family, number)
        if self.rule is not None:
            modulus, remainder = self.rule
            residue = int(sha256_hex(family.encode("utf-8", "surrogatepass")), 16) % modulus
            belongs = "validation" if residue == remainder else "train"
            if belongs != split:
                report.add(
                    "content.split-rule",
                    number,
                    f"meta.{key} {family[:60]!r} hashes to {residue} mod {modulus}: by the split "
                    f"rule {self.version.split_rule} the row belongs to {belongs}",
                    "state the rule the split was made by (--split-rule), or split the rows again by it",
                )

    def manifest_problems(self, split: str, manifest: Any, display: str) -> list[Problem]:
        """A split manifest's ``max_tokens`` and ``token_quantiles`` against the rows' token counts."""
        stats = self.tokens.get(split, ("", None))[1]
        if stats is None or not isinstance(manifest, dict):
            return []
        stated: list[tuple[str, Any, int]] = []
        if "max_tokens" in manifest:
            stated.append(("max_tokens", manifest["max_tokens"], stats.maximum))
        quantiles = manifest.get("token_quantiles")
        if isinstance(quantiles, dict):
            stated += [
                (f"token_quantiles.{name}", value, stats.quantile(float(name[1:])))
                for name, value in sorted(quantiles.items())
                if re.fullmatch(QUANTILE, name)
            ]
        fix = (
            "write the manifest from the rows' token counts (nearest-rank quantiles, the rwkv World tokenizer), "
            "or restore the rows"
        )
        return [
            Problem(
                "content.manifest-tokens",
                display,
                f"says {name} {value!r} but the rows tokenize to {actual} ({self.version.vocabulary})",
                fix,
            )
            for name, value, actual in stated
            if value != actual
        ]

    def findings(self) -> list[Problem]:
        """What the observers found, once every split was read."""
        version = self.version
        problems = list(self.problems)
        for report in self.reports:
            problems += report.findings()
        for display, stats in self.tokens.values():
            if stats is None:
                continue
            over = [
                Problem(
                    "content.over-context",
                    f"{display}:{line}",
                    f"the row holds {tokens} tokens, over the version's context of {version.context}",
                    "drop rows over the context at packing, or state the context the rows were packed for (--context)",
                )
                for line, tokens in stats.over
            ]
            splits = [
                Problem(
                    "content.segment-splits-token",
                    f"{display}:{line}",
                    f"the loss-span boundary at character {offset} falls inside a token: the segments "
                    f"tokenize differently one by one than the whole text ({version.vocabulary})",
                    "move the boundary to a token boundary (render the row again), or state the vocabulary "
                    "the rows were checked against (--vocab)",
                )
                for line, offset in stats.splits
            ]
            problems += _with_rest(over, stats.over_total - len(over), "row(s) over the context")
            problems += _with_rest(splits, stats.splits_total - len(splits), "row(s) with a boundary inside a token")
        train, validation = self.families.get("train", {}), self.families.get("validation", {})
        shared = sorted(set(train) & set(validation))
        if shared:
            family = shared[0]
            problems.append(
                Problem(
                    "content.family-in-both-splits",
                    f"{version.version}/{SPLIT_PARENT}",
                    f"{len(shared)} famil{'y has' if len(shared) == 1 else 'ies have'} rows in both splits, "
                    f"e.g. meta.{version.family_key} {family[:60]!r} (train line {train[family]}, validation "
                    f"line {validation[family]})",
                    "split by family (every row of a family in one split), e.g. by the stated --split-rule",
                )
            )
        if version.flag_key is not None and version.flagged_rows is not None and self.flagged != version.flagged_rows:
            problems.append(
                Problem(
                    "content.flag-count",
                    version.version,
                    f"{self.flagged} row(s) have meta.{version.flag_key} true but the version "
                    f"states {version.flagged_rows}",
                    f"pass --flagged-rows {self.flagged} (the card's known issues show the count), or restore the rows",
                )
            )
        return problems

    def remember(self) -> None:
        """Keep the token results of the files tokenized this time (a speed-up only: see TokenCache)."""
        for facts, stats in self._remember:
            self.cache.put(facts, stats)
        self.cache.save()


def _with_rest(listed: list[Problem], rest: int, what: str) -> list[Problem]:
    """``listed`` with the ``rest`` not listed said on the last line (one line per problem listed, no count line)."""
    if not rest:
        return listed
    *first, last = listed
    return [*first, replace(last, message=f"{last.message} (and {rest} more {what} in this file after it)")]
