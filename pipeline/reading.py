"""Reading planned offset ranges of one topic into Arrow record batches (runs in a task).

`consume(n, timeout)` blocks until it has n messages or the timeout passed, so every call
asks for exactly the offsets still missing: a range is read without waiting out a timeout.
A range ends at its end offset, at the first message past it (offsets may have gaps in
compacted or transactional topics), or at end-of-partition at or past it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)

from pipeline.errors import SourceError
from pipeline.offsets import OffsetRange
from pipeline.watermarks import consumer_config
from runtime.kafka import KafkaSettings

__all__ = ["ARROW_SCHEMA", "read_ranges"]

# The official Kafka connector's columns, so the job runs unchanged on either source.
ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32(), nullable=False),
    ]
)
# Kafka's Java TimestampType ids: -1 none, 0 create time, 1 log append time.
_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: 0, TIMESTAMP_LOG_APPEND_TIME: 1}
_MAX_CONSUME = 10_000
_POLL_S = 0.5


class _Columns:
    """Column buffers for one Arrow batch."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.partitions: list[int] = []
        self.offsets: list[int] = []
        self.timestamps: list[int | None] = []
        self.types: list[int] = []

    def add(self, partition: int, offset: int, message: Message) -> None:
        kind, ms = message.timestamp()
        ts_type = _TIMESTAMP_TYPES.get(kind, -1)
        self.keys.append(message.key())
        self.values.append(message.value())
        self.partitions.append(partition)
        self.offsets.append(offset)
        self.timestamps.append(ms * 1000 if ts_type >= 0 and ms >= 0 else None)
        self.types.append(ts_type)

    def batch(self) -> pa.RecordBatch:
        arrays: list[Any] = [
            self.keys,
            self.values,
            [self.topic] * len(self.offsets),
            self.partitions,
            self.offsets,
            self.timestamps,
            self.types,
        ]
        return pa.RecordBatch.from_arrays(
            [pa.array(a, type=f.type) for a, f in zip(arrays, ARROW_SCHEMA, strict=True)],
            schema=ARROW_SCHEMA,
        )


def read_ranges(
    kafka: str | KafkaSettings, topic: str, ranges: Sequence[OffsetRange], timeout_s: float
) -> Iterator[pa.RecordBatch]:
    """Every message of `ranges` of `topic`, in offset order per partition."""
    consumer = Consumer(consumer_config(kafka, topic))
    try:
        consumer.assign([TopicPartition(topic, r.partition, r.start) for r in ranges if r.size])
        yield from _consume_ranges(consumer, topic, ranges, time.monotonic() + timeout_s)
    finally:
        consumer.close()


def _consume_ranges(
    consumer: Consumer, topic: str, ranges: Sequence[OffsetRange], deadline: float
) -> Iterator[pa.RecordBatch]:
    ends = {r.partition: r.end for r in ranges if r.size}
    positions = {r.partition: r.start for r in ranges if r.size}
    while ends:
        missing = sum(ends[p] - positions[p] for p in ends)
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            raise SourceError(_describe_stall(topic, positions, ends))
        messages = consumer.consume(min(missing, _MAX_CONSUME), min(remaining_s, _POLL_S))
        columns = _Columns(topic)
        done: list[int] = []
        for message in messages:
            error = message.error()
            p, at = message.partition(), message.offset()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise SourceError(f"topic {topic} partition {p}: read failed: {error}")
            if p is None or at is None or p not in ends or p in done:
                continue
            if error is not None:
                _check_end_of_partition(topic, p, at, ends[p])
                done.append(p)
            elif at >= ends[p]:
                done.append(p)
            else:
                columns.add(p, at, message)
                positions[p] = at + 1
                if positions[p] >= ends[p]:
                    done.append(p)
        if done:
            consumer.pause([TopicPartition(topic, p) for p in done])
            for p in done:
                del ends[p]
        if columns.offsets:
            yield columns.batch()


def _check_end_of_partition(topic: str, partition: int, at: int, end: int) -> None:
    if at < end:
        raise SourceError(
            f"topic {topic} partition {partition} ends at offset {at} but the micro-batch "
            f"was planned up to {end}: records were lost (broker restarted or truncated?)"
        )


def _describe_stall(topic: str, positions: dict[int, int], ends: dict[int, int]) -> str:
    waiting = ", ".join(f"partition {p} at {positions[p]} of {ends[p]}" for p in sorted(ends))
    return f"topic {topic}: timed out reading the micro-batch ({waiting})"
