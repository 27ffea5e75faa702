"""``.pth`` → safetensors, streaming, sharded, verified bit-exact (see :func:`convert_file`)."""

from .pipeline import ConversionResult, ConvertedFile, convert_file
from .shards import ShardIndex, parse_size

__all__ = ["ConvertedFile", "ConversionResult", "convert_file", "ShardIndex", "parse_size"]
