"""Which partition a key belongs to: Kafka's Java default partitioner.

`toPositive(murmur2(utf8(key))) % partitions`, exactly what the Java producer and
librdkafka's `murmur2_random` partitioner compute for a non-null key. The partition
count always comes from topic metadata, never from the size of a routing table.
"""

from __future__ import annotations

import struct

__all__ = ["murmur2", "partition_for"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORD = struct.Struct("<I")  # a little-endian 4-byte word


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of `data`, as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    if whole:
        for (k,) in _WORD.iter_unpack(data[:whole]):  # the whole words, read in one call
            k = (k * _M) & _MASK
            # h = h * m ^ (k ^ k >> 24) * m, masked once: the mask of an xor is the xor of
            # the masks
            h = ((h * _M) ^ ((k ^ (k >> 24)) * _M)) & _MASK
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h = ((h ^ data[whole]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """The partition of `key` among `partitions`, as Kafka's default partitioner picks it."""
    if partitions < 1:
        raise ValueError(f"partition count must be >= 1, got {partitions}")
    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions
