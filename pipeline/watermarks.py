"""End offsets of a topic's partitions, taken from what a fetch reports.

ListOffsets LATEST cannot be trusted on the embedded broker (it answers "start of the
newest batch + 1"), so the end of each partition is the high watermark of a real fetch
response: assign every partition at its last known end, wait until each one returned a
message or reached end-of-partition, then read the cached watermark. Against Apache
Kafka this gives the same answer as ListOffsets.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from pipeline.errors import SourceError
from runtime.kafka import KafkaSettings

__all__ = ["WatermarkProbe", "consumer_config"]


def consumer_config(kafka: str | KafkaSettings, topic: str, **extra: Any) -> dict[str, Any]:
    """Settings of a consumer that only ever uses assign(): never joins or commits a group;
    `extra` replaces defaults."""
    return KafkaSettings.of(kafka).client(
        fixed={
            # librdkafka insists on a group id even without subscribe(); nothing is committed
            "group.id": f"statefed-pipeline-{topic}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        },
        defaults={"log_level": 3, **extra},
    )


class WatermarkProbe:
    """A consumer that answers "where does each partition of `topic` end right now"."""

    def __init__(self, kafka: str | KafkaSettings, topic: str, timeout_s: float = 10.0) -> None:
        self.kafka = KafkaSettings.of(kafka)
        self.topic = topic
        self.timeout_s = timeout_s
        # a short fetch wait: an idle partition answers end-of-partition quickly
        self._consumer = Consumer(consumer_config(self.kafka, topic, **{"fetch.wait.max.ms": 10}))

    def partitions(self) -> list[int]:
        """The topic's partitions, from metadata."""
        metadata = self._consumer.list_topics(self.topic, timeout=self.timeout_s)
        topic = metadata.topics.get(self.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise SourceError(
                f"topic {self.topic} has no partitions on {self.kafka.bootstrap}: create it first"
            )
        return sorted(topic.partitions)

    def earliest(self) -> dict[int, int]:
        """The first offset still held by each partition (ListOffsets EARLIEST is sound)."""
        low: dict[int, int] = {}
        for p in self.partitions():
            tp = TopicPartition(self.topic, p)
            low[p] = self._consumer.get_watermark_offsets(tp, timeout=self.timeout_s)[0]
        return low

    def latest(self, known: Mapping[int, int]) -> dict[int, int]:
        """The fetched high watermark of every partition; a partition that does not answer
        in time keeps its `known` end (a missing one: 0), so the result is never behind."""
        parts = self.partitions()
        self._consumer.assign(
            [TopicPartition(self.topic, p, known.get(p, OFFSET_BEGINNING)) for p in parts]
        )
        try:
            answered = self._await_fetches(set(parts))
            ends = {}
            for p in parts:
                high = -1
                if p in answered:
                    tp = TopicPartition(self.topic, p)
                    high = self._consumer.get_watermark_offsets(tp, cached=True)[1]
                ends[p] = max(high, known.get(p, 0))
            return ends
        finally:
            self._consumer.unassign()

    def _await_fetches(self, pending: set[int]) -> set[int]:
        answered: set[int] = set()
        deadline = time.monotonic() + self.timeout_s
        while pending - answered and time.monotonic() < deadline:
            for message in self._consumer.consume(len(pending - answered), timeout=0.05):
                error = message.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise SourceError(
                        f"topic {self.topic} partition {message.partition()}: fetch failed "
                        f"on {self.kafka.bootstrap}: {error}"
                    )
                partition = message.partition()
                if partition is not None:
                    answered.add(partition)
        return answered

    def close(self) -> None:
        self._consumer.close()
