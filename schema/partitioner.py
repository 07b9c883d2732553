"""Which partition a key belongs to: Kafka's Java default partitioner.

`toPositive(murmur2(utf8(key))) % partitions`, exactly what the Java producer and
librdkafka's `murmur2_random` partitioner compute for a non-null key. The partition
count always comes from topic metadata, never from the size of a routing table.
"""

from __future__ import annotations

__all__ = ["murmur2", "partition_for"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of `data`, as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """The partition of `key` among `partitions`, as Kafka's default partitioner picks it."""
    if partitions < 1:
        raise ValueError(f"partition count must be >= 1, got {partitions}")
    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions
