"""Every file and folder name a registry holds, written once, and the sets derived from them.

The ground floor: this module imports nothing of the package (``tests/test_names.py`` fails if it
does), and no other module spells one of these names as a constant of its own.  Paths are
relative POSIX paths; a name inside a folder is relative to that folder.

Left where they are, because a registry does not hold them: ``miss.json`` (a member inside a MiSS
adapter's ``.pth`` zip, :mod:`registry.artifacts.miss`), a gate receipt's ``<sha256>.json`` (named
by its hash, :mod:`registry.gate.receipt`), the shard names ``model-00001-of-00002.safetensors``
(a pattern, :mod:`registry.convert.shards`), and files kept outside any registry (the receipt key,
:mod:`registry.gate.seal`; the kernel's build log, :mod:`registry.gate.kernel`; the demo's marker).
"""

from __future__ import annotations

# --- a model registry's root ---------------------------------------------------------------
INDEX_NAME = "index.json"  # the one machine-readable truth
CARD_NAME = "README.md"  # the model card, rendered from index.json
EVALUATION_NAME = "evaluation.json"  # results and setups, rendered from index.json beside the card
SUMS_NAME = "SHA256SUMS"  # coreutils format, `sha256sum -c` checks it
SIGNATURE_NAME = "model.sig"  # OpenSSF Model Signing bundle over every published file
GITATTRIBUTES_NAME = ".gitattributes"  # content: listed in SHA256SUMS, sends weights through LFS
DOCS_DIR = "docs"  # any files under docs/ (evaluation reports, figures) are kept like KEPT_ROOT_FILES
# Files Hub repos carry beside the card, kept at the root, listed in SHA256SUMS and published.
KEPT_ROOT_FILES = frozenset({"LICENSE", "LICENSE.md", "LICENSE.txt", "NOTICE", "NOTICE.md", "CITATION.cff"})
ROOT_FILES = frozenset({INDEX_NAME, CARD_NAME, EVALUATION_NAME, GITATTRIBUTES_NAME, *KEPT_ROOT_FILES})

# --- kept beside a registry, no part of its content ----------------------------------------
GIT_DIR = ".git"
GITIGNORE_NAME = ".gitignore"  # `registry init` writes or extends it to ignore PRIVATE_DIR
GIT_FILES = frozenset(
    {GIT_DIR, GITIGNORE_NAME, ".gitmodules", ".github"}
)  # any other hidden name is checked like every file
PRE_COMMIT_CONFIG = ".pre-commit-config.yaml"  # the configuration that runs our hooks
NOT_COVERED = (*sorted(GIT_FILES - {GIT_DIR}), PRE_COMMIT_CONFIG)  # never checked nor published; validate names them
# huggingface_hub's metadata folder in a `--local-dir` download (`hf download`, `registry pull`).
HUB_DOWNLOAD_CACHE = ".cache"

# --- the tool's private folder: never listed, never published ------------------------------
PRIVATE_DIR = ".registry"
LOCK_NAME = "lock"
JOURNAL_NAME = "journal.json"  # the renames of a commit in flight (registry.core.atomic)
STAGING_NAME = "staging"  # new bytes before a commit, and debris after a crash
STAT_CACHE_NAME = "statcache.json"
XET_CACHE_NAME = "xetcache.json"
VERDICT_NAME = "verdict.json"  # the last clean validate (and list, card --check, sums --check) and the tree it saw
PUBLISHED_DIR = "published"  # SUMS_NAME of the last publish or pull, and REMOTE_NAME
REMOTE_NAME = "remote.json"  # the repo, revision and commit the published SHA256SUMS describes
RELEASES_DIR = "releases"  # in PUBLISHED_DIR: <commit>/ of every release published or pulled here
RELEASE_RECORD_NAME = "release.json"  # in a release's folder: its repo, revision, commit and when (written last)
PUBLISHED_SEAL_NAME = "seal"  # this user's seal over the published SHA256SUMS (registry.core.userkey)
GATES_DIR = "gates"  # one receipt per gated file, named by its sha256
ADOPTED_DIR = "adopted"  # the originals `registry adopt` replaced
SAVED_DIR = f"{PRIVATE_DIR}/{ADOPTED_DIR}"  # the originals adopt replaced, never published
DATASET_CHECKED_NAME = "dataset-checked.json"  # a dataset registry's versions whose row check passed
DATASET_TOKENS_NAME = "dataset-tokens.json"  # token counts of a dataset's rows files, by sha256 (HMAC-bound)

# --- a model registry's weights and what lies beside them ----------------------------------
WEIGHT_SUFFIXES = (".pth", ".safetensors")
TRAIN_JSON = "train.json"  # one per data-version folder
SINGLE_SAFETENSORS = "model.safetensors"  # an unsharded checkpoint's safetensors twin, and an export's weights
SHARD_INDEX = "model.safetensors.index.json"  # a sharded checkpoint's (and export's) index
# A Transformers export: <base>/hf/, hf/ beside a full entry or a MiSS adapter, hf/<state-stem>/ beside a State.
HF_DIR = "hf"
CONFIG_NAME = "config.json"
GENERATION_CONFIG_NAME = "generation_config.json"
TOKENIZER_NAME = "tokenizer.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
VOCAB_NAME = "rwkv_vocab_v20230424.txt"  # the world vocabulary's file (the rwkv package's): llama.cpp's converter reads it from the folder
ADAPTER_CONFIG_NAME = "adapter_config.json"  # a MiSS adapter's PEFT folder
ADAPTER_WEIGHTS_NAME = "adapter_model.safetensors"
STATE_WEIGHTS_NAME = "initial_state.safetensors"  # a State's initial recurrent state in fla's layout
# GGUF files: <base>/gguf/, gguf/ beside a full entry or a MiSS adapter; <stem>[-merged]-<TYPE>.gguf.
GGUF_DIR = "gguf"
GGUF_SUFFIX = ".gguf"
MODELFILE_SUFFIX = ".Modelfile"  # beside each GGUF: <stem>-<TYPE>.Modelfile, Ollama's import file for it
# Every binary kind a model registry writes: .gitattributes sends each through Git LFS.
LFS_SUFFIXES = (*WEIGHT_SUFFIXES, GGUF_SUFFIX)

# --- a dataset registry (seed 002) ---------------------------------------------------------
DATASET_ROOT_FILES = frozenset({INDEX_NAME, CARD_NAME, GITATTRIBUTES_NAME})
SPLITS = ("train", "validation")  # <version>/dataset/<split>/
SPLIT_PARENT = "dataset"  # the folder of the splits inside a version folder
ROWS_NAME = "rows.jsonl"  # in a split folder: the rows; segments*.jsonl: the same rows cut by the packer
TEXT_NAME = "train.jsonl"  # in a split folder: the rows as the trainer's text
SPLIT_MANIFEST = "manifest.json"
RELEASE_MANIFEST = "release-manifest.json"  # at a version's top level
FINAL_STATS = "final-stats.json"
PACKING_INPUTS = ("train-rows.jsonl", "validation-rows.jsonl")
VERSION_REQUIRED = (*(f"{SPLIT_PARENT}/{split}/{ROWS_NAME}" for split in SPLITS), RELEASE_MANIFEST, FINAL_STATS)

# --- sets derived from the names -----------------------------------------------------------
# Paths SHA256SUMS and the layout ignore: these files, and anything under these top-level names.
EXCLUDED_FILES = frozenset({SUMS_NAME, PRE_COMMIT_CONFIG, SIGNATURE_NAME})
EXCLUDED_TOPS = frozenset({*GIT_FILES, PRIVATE_DIR})
# Derived files are re-rendered by the tool on every change; immutability is about the rest ...
DERIVED = frozenset({INDEX_NAME, CARD_NAME, EVALUATION_NAME, SUMS_NAME})
# ... and, with .gitattributes (git's settings for the repo) and model.sig (a new signature over the
# release), the published files that may change.
MUTABLE = frozenset({*DERIVED, GITATTRIBUTES_NAME, SIGNATURE_NAME})
# Files a command builds from their own bytes on disk: index.json (read, changed, rendered again)
# and README.md (its hand-written section is carried over).
CARRIED = frozenset({INDEX_NAME, CARD_NAME})
# Published beside what SHA256SUMS lists, so a repo on the Hub may hold them unlisted
# (.gitattributes is listed like every other file).
UNLISTED_OK = frozenset({SUMS_NAME, SIGNATURE_NAME})
# What signature verification must not hash: the tool's folder, the hooks' configuration, the
# signature, and the folder that `hf download --local-dir` (the card's download command) leaves.
UNSIGNED = (PRIVATE_DIR, PRE_COMMIT_CONFIG, SIGNATURE_NAME, HUB_DOWNLOAD_CACHE)
# What `registry init` accepts in a folder it makes a registry: a model registry, a dataset registry.
INIT_KEPT = frozenset({CARD_NAME, PRE_COMMIT_CONFIG, PRIVATE_DIR, *KEPT_ROOT_FILES})
DATASET_INIT_KEPT = frozenset({PRE_COMMIT_CONFIG, PRIVATE_DIR})
