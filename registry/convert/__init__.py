"""``.pth`` → safetensors, streaming, sharded, verified bit-exact (:mod:`.pipeline`); shard planning and
the shard index format (:mod:`.shards`, which needs no torch)."""
