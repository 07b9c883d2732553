"""The query data set: `size` keys with known counts, written straight to the changelog.

Key i is `bk` + i in 7 digits and its count is a fixed pseudo-random function of i, so
every measurement knows the right answer of any lookup and of the global top-N without
storing the set. Records are what the pipeline writes: absolute counts, explicit
partition = partition_for(key, P).
"""

from __future__ import annotations

import heapq
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from confluent_kafka import Producer

from schema import WORD_COUNTS, CountRow, View, encode_count, partition_for

__all__ = ["Dataset", "bulk_producer", "produce_dataset"]


@dataclass(frozen=True)
class Dataset:
    """`size` keys of `view` spread over `partitions` partitions."""

    size: int
    partitions: int
    view: View = WORD_COUNTS

    def key(self, index: int) -> str:
        return f"bk{index:07d}"

    def count(self, index: int) -> int:
        return 1 + (index * 2_654_435_761) % 1_000_003

    def partition(self, index: int) -> int:
        return partition_for(self.key(index), self.partitions)

    def sample(self, n: int, seed: int, partitions: Iterable[int] | None = None) -> list[int]:
        """`n` distinct key indexes, only from `partitions` when given."""
        wanted = None if partitions is None else set(partitions)
        rng = random.Random(seed)
        chosen: dict[int, None] = {}
        for _ in range(n * 50):
            index = rng.randrange(self.size)
            if wanted is None or self.partition(index) in wanted:
                chosen[index] = None
                if len(chosen) == n:
                    break
        return list(chosen)

    def one_per_partition(self, per_partition: int = 1) -> list[int]:
        """Key indexes covering every partition `per_partition` times."""
        need = {p: per_partition for p in range(self.partitions)}
        found: list[int] = []
        for index in range(self.size):
            p = self.partition(index)
            if need[p]:
                need[p] -= 1
                found.append(index)
                if not any(need.values()):
                    break
        return found

    @cached_property
    def top_keys(self) -> list[str]:
        """The global top 100 keys: count descending, then key ascending."""
        best = heapq.nsmallest(100, range(self.size), key=lambda i: (-self.count(i), i))
        return [self.key(i) for i in best]


def bulk_producer(bootstrap: str) -> Producer:
    """A producer tuned for throughput: large batches, a deep local queue."""
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": False,
        }
    )


def produce_dataset(bootstrap: str, dataset: Dataset, timeout_s: float = 120.0) -> float:
    """Write every record of `dataset` to the view's changelog; returns the seconds it took."""
    producer = bulk_producer(bootstrap)
    topic = dataset.view.changelog_topic
    now_ms = int(time.time() * 1000)
    began = time.monotonic()
    for index in range(dataset.size):
        key = dataset.key(index)
        value = encode_count(CountRow(key, dataset.count(index), now_ms))
        partition = partition_for(key, dataset.partitions)
        while True:
            try:
                producer.produce(topic, value, key.encode(), partition)
                break
            except BufferError:
                producer.poll(0.05)  # local queue full: let librdkafka send
        if time.monotonic() - began > timeout_s:
            raise TimeoutError(f"producing the data set took over {timeout_s} s")
    left = producer.flush(max(1.0, timeout_s - (time.monotonic() - began)))
    if left:
        raise TimeoutError(f"{left} data set records undelivered to {topic}")
    return time.monotonic() - began
