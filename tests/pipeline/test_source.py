"""The `statefed_kafka` source's Kafka side against the real broker, without Spark."""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pipeline import PipelineConfigError, SourceError
from pipeline.offsets import OffsetRange
from pipeline.reading import ARROW_SCHEMA, read_ranges
from pipeline.source import KAFKA_SCHEMA, KafkaInputPartition, KafkaStreamReader, SourceOptions
from pipeline.watermarks import WatermarkProbe
from runtime.topics import ensure_topics
from tooling.broker import KafkaBroker

PER_PARTITION = {0: 8, 1: 3, 2: 0}


@pytest.fixture
def topic(broker: KafkaBroker) -> str:
    """A fresh 3-partition topic holding PER_PARTITION records, sent one by one."""
    name = f"test.source.{uuid.uuid4().hex[:10]}"
    ensure_topics(broker.bootstrap, {name: 3})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for partition, n in PER_PARTITION.items():
        for i in range(n):
            key = None if (partition, i) == (1, 1) else f"k{partition}-{i}".encode()
            producer.produce(name, f"v{i}".encode(), key, partition=partition)
            producer.flush(10)  # one batch per record: where ListOffsets LATEST goes wrong
    return name


def _read(broker: KafkaBroker, topic: str, ranges: list[OffsetRange]) -> pa.Table:
    return pa.Table.from_batches(
        list(read_ranges(broker.bootstrap, topic, ranges, timeout_s=20)), schema=ARROW_SCHEMA
    )


def test_the_arrow_schema_is_what_spark_expects_of_the_spark_schema() -> None:
    assert to_arrow_schema(KAFKA_SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)


def test_end_offsets_come_from_a_fetch_and_are_exact(broker: KafkaBroker, topic: str) -> None:
    probe = WatermarkProbe(broker.bootstrap, topic)
    try:
        assert probe.partitions() == [0, 1, 2]
        assert probe.earliest() == {0: 0, 1: 0, 2: 0}
        assert probe.latest({}) == PER_PARTITION
        # asked again with nothing new (from the known ends): the same, and quickly
        started = time.monotonic()
        assert probe.latest(PER_PARTITION) == PER_PARTITION
        assert time.monotonic() - started < 3
    finally:
        probe.close()


def test_ranges_are_read_exactly(broker: KafkaBroker, topic: str) -> None:
    started = time.monotonic()
    table = _read(broker, topic, [OffsetRange(0, 2, 7), OffsetRange(1, 0, 3)])
    assert time.monotonic() - started < 10  # no full read timeout was waited out
    rows = sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))
    assert rows == [(0, o) for o in range(2, 7)] + [(1, o) for o in range(3)]
    by_offset = {(r["partition"], r["offset"]): r for r in table.to_pylist()}
    assert by_offset[(0, 2)]["key"] == b"k0-2"
    assert by_offset[(0, 2)]["value"] == b"v2"
    assert by_offset[(1, 1)]["key"] is None
    assert by_offset[(0, 2)]["topic"] == topic
    assert by_offset[(0, 2)]["timestampType"] == 0  # create time
    assert by_offset[(0, 2)]["timestamp"].year >= 2024


def test_a_range_past_the_end_of_the_partition_fails_fast(broker: KafkaBroker, topic: str) -> None:
    started = time.monotonic()
    with pytest.raises(SourceError, match=f"topic {topic} partition 1 ends at offset 3"):
        _read(broker, topic, [OffsetRange(1, 0, 5)])
    assert time.monotonic() - started < 10


def test_the_stream_reader_plans_and_reads_micro_batches(broker: KafkaBroker, topic: str) -> None:
    reader = KafkaStreamReader(SourceOptions(broker.bootstrap, topic, read_tasks=2))
    try:
        start = reader.initialOffset()
        assert start == {"0": 0, "1": 0, "2": 0}
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {"0": 8, "1": 3, "2": 0}
        assert reader.latestOffset(start, ReadMaxRows(4)) == {"0": 2, "1": 2, "2": 0}
        tasks = reader.partitions(start, end)
        assert [[r.partition for r in t.ranges] for t in tasks] == [[0], [1]]
        assert reader.partitions(end, end) == []
        rows = 0
        for task in tasks:
            assert isinstance(task, KafkaInputPartition)
            rows += sum(b.num_rows for b in reader.read(task))
        assert rows == 11
    finally:
        reader.stop()


def test_latest_starting_offsets_skip_what_is_there(broker: KafkaBroker, topic: str) -> None:
    reader = KafkaStreamReader(SourceOptions(broker.bootstrap, topic, starting_offsets="latest"))
    try:
        assert reader.initialOffset() == {"0": 8, "1": 3, "2": 0}
    finally:
        reader.stop()


def test_a_missing_topic_is_named(broker: KafkaBroker) -> None:
    reader = KafkaStreamReader(SourceOptions(broker.bootstrap, "test.source.no-such-topic"))
    try:
        with pytest.raises(SourceError, match="no-such-topic"):
            reader.initialOffset()
    finally:
        reader.stop()


def test_source_options_are_validated() -> None:
    assert SourceOptions.from_options({"bootstrap": "b:1", "topic": "t"}).read_tasks == 2
    with pytest.raises(PipelineConfigError, match="topic"):
        SourceOptions.from_options({"bootstrap": "b:1"})
    with pytest.raises(PipelineConfigError, match="readTasks"):
        SourceOptions.from_options({"bootstrap": "b:1", "topic": "t", "readTasks": "0"})
    with pytest.raises(PipelineConfigError, match="startingOffsets"):
        SourceOptions.from_options({"bootstrap": "b:1", "topic": "t", "startingOffsets": "x"})
