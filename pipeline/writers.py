"""The foreachBatch functions: one micro-batch of view rows or rejected records to Kafka.

They run on the driver (Spark calls foreachBatch there), collect the batch as Arrow and
produce through a long-lived `BatchProducer`; a batch returns only once every record is
acknowledged, so a checkpointed batch is never lost.

Why a Python producer and not Spark's Kafka sink (`writeStream.format("kafka")`): the
pipeline status of a batch names the changelog offsets it was delivered up to (nodes
and the gateway compare them with what a node applied), and only the producer's delivery
reports say that; Spark's sink reports no offsets, and reading the topic's end after
the batch would also count records of a batch still being written elsewhere.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.deadletter import dead_letters, encode_dead_letter
from pipeline.errors import RecordTooLargeError
from pipeline.kinds import KindPlan
from pipeline.sink import BatchProducer
from schema import DEADLETTER_TOPIC, View

__all__ = ["ChangelogWriter", "DeadLetterWriter"]

log = logging.getLogger(__name__)


class ChangelogWriter:
    """Writes a view's updated rows to its changelog topic, partitioned by entity key."""

    def __init__(self, view: View, plan: KindPlan, producer: BatchProducer, partitions: int):
        self.view = view
        self.plan = plan
        self.producer = producer
        self.partitions = partitions
        # the same keys come back batch after batch; murmur2 in Python is not free
        self._partition_of: Callable[[str], int] = functools.lru_cache(maxsize=1 << 16)(
            functools.partial(view.partition_of, partitions=partitions)
        )

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        rows = batch.toArrow()
        what = f"view {self.view.name} batch {batch_id}"
        for record in self.plan.changelog(rows):
            partition = self._partition_of(record.entity_key)
            try:
                self.producer.send(self.view.changelog_topic, record.key, record.value, partition)
            except RecordTooLargeError as exc:  # e.g. a history or aggregate row grown large
                raise RecordTooLargeError(
                    f"{what}, key {record.entity_key[:100]!r}: {exc}"
                ) from exc
        sent = self.producer.flush_or_raise(what)
        log.debug(
            "view %s batch %d: %d rows to %s",
            self.view.name,
            batch_id,
            sent,
            self.view.changelog_topic,
        )


class DeadLetterWriter:
    """Writes the rejected records of one input topic to the dead-letter topic."""

    def __init__(
        self,
        topic: str,
        producer: BatchProducer,
        on_sent: Callable[[str, int], None] | None = None,
    ):
        self.topic = topic
        self.producer = producer
        self.on_sent = on_sent  # told how many dead letters each batch wrote (metrics)
        if on_sent is not None:
            # 0 before any batch: the topic's counter is exported from the start, so its first
            # dead letter is an increase Prometheus sees (it takes a series' first sample as
            # where the series began)
            on_sent(topic, 0)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        rows = batch.select(
            "key",
            "value",
            "topic",
            "partition",
            "offset",
            F.unix_millis("timestamp").alias("timestamp_ms"),
            "reason",
        ).toArrow()
        for letter in dead_letters(rows):
            self.producer.send(DEADLETTER_TOPIC, letter.key, encode_dead_letter(letter))
        sent = self.producer.flush_or_raise(f"dead letters of topic {self.topic} batch {batch_id}")
        if sent:
            log.warning("topic %s: %d records rejected to %s", self.topic, sent, DEADLETTER_TOPIC)
            if self.on_sent is not None:
                self.on_sent(self.topic, sent)
