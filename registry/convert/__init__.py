"""``.pth`` → safetensors, streaming, sharded, verified bit-exact (:mod:`.pipeline`); shard planning and
the shard index format (:mod:`.shards`, which needs no torch).

``__all__`` names the modules other packages import; importing the package imports none of them.
"""

__all__ = ["pipeline", "shards", "source", "writer"]
