"""Hashing engines: sha256 of files, in parallel, with a stat cache for unchanged files."""

from .cache import StatCache
from .engine import hash_file, hash_files

__all__ = ["StatCache", "hash_file", "hash_files"]
