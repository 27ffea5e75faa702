"""Hashing engines: sha256 of files, in parallel, with a stat cache for unchanged files; sha256 of
bytes in memory (:mod:`.digest`).  Every sha256 the registry takes goes through this package.
``__all__`` names the functions below and the modules other packages import."""

from .cache import StatCache
from .digest import sha256, sha256_hex
from .engine import hash_file, hash_files

__all__ = [
    # functions
    "StatCache",
    "hash_file",
    "hash_files",
    "sha256",
    "sha256_hex",
    # the modules other packages import
    "cache",
    "digest",
    "engine",
    "tree",
    "xet",
]
