"""Real-Time Mode against micro-batches, in a real Spark session: the same input topic read
by twin views, one of each twin in each mode, writes the same changelog rows (count,
latest with tombstones, aggregates with and without `where`), a Real-Time Mode status
names changelog offsets that hold every row of the input it names, and a view that cannot
run in Real-Time Mode runs in micro-batches or is refused by name."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pipeline import PipelineConfig, start_queries
from pipeline.errors import PipelineConfigError
from pipeline.job import realtime_intervals, realtime_views
from runtime.topics import ensure_topics, statefed_topics
from schema import PipelineMode, View
from tests.aggregates import Event, orders
from tests.orders import CUSTOMER_ORDERS, HOURLY_BASKETS, PAID_ORDERS, STATUS_LINES
from tests.pipeline.realtime_views import LAST_ORDER, ORDER_COUNTS, decoded, differences, twins
from tests.pipeline.support import (
    PARTITIONS,
    Record,
    StatusReader,
    end_offsets,
    pipeline_config,
    produce_records,
)
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

TWINNED = (ORDER_COUNTS, LAST_ORDER, CUSTOMER_ORDERS, PAID_ORDERS)
CUSTOMERS = ["c1", "c2", "c3", "ü", "c5"]

Rows = dict[bytes, Any]  # a changelog's newest value per record key, decoded (None: deleted)


def _records(events: list[Event], deleted: list[str]) -> list[Record]:
    values = [
        Record(e.key.encode(), orjson.dumps({**e.value, "timestamp": e.event_ms})) for e in events
    ]
    return values + [Record(key.encode(), None) for key in deleted]


def rows_up_to(broker: KafkaBroker, view: View, offsets: dict[int, int]) -> Rows:
    """`view`'s changelog rows from the records before `offsets` only; every record read
    is on its key's partition (the one lookups ask)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    consumer.assign([TopicPartition(view.changelog_topic, p, 0) for p in offsets])
    rows: Rows = {}
    read = {p: 0 for p in offsets}

    def reached() -> bool:
        for message in consumer.consume(1000, 0.2):
            assert message.error() is None, message.error()
            partition, offset = message.partition() or 0, message.offset() or 0
            read[partition] = offset + 1
            key, value = message.key() or b"", message.value()
            # these kinds' record key is the entity key, also of a tombstone
            assert partition == view.partition_of(key.decode(), PARTITIONS), (key, partition)
            if offset < offsets[partition]:
                rows[key] = None if not value else decoded(view, value)
        return all(read[p] >= o for p, o in offsets.items())

    try:
        wait_until(reached, 60, f"{view.changelog_topic} up to {offsets}", interval_s=0)
    finally:
        consumer.close()
    return {k: v for k, v in rows.items() if v is not None}


@settings(
    max_examples=1,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.generate],  # a Spark run per example: no shrinking
)
@given(
    rounds=st.lists(orders(CUSTOMERS), min_size=2, max_size=2),
    deleted=st.lists(st.sampled_from(CUSTOMERS), max_size=2, unique=True),
)
def test_real_time_and_micro_batch_twins_write_the_same_rows(
    spark: SparkSession,
    broker: KafkaBroker,
    tmp_path: Path,
    rounds: list[list[Event]],
    deleted: list[str],
) -> None:
    suffix = uuid.uuid4().hex[:10]
    pairs = twins(TWINNED, f"test.{suffix}.orders", f"_{suffix}")
    views = [v for pair in pairs for v in pair]
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, views))
    config = pipeline_config(broker, tmp_path / f"checkpoints-{suffix}")
    assert realtime_views(config, views) == {rt.name for rt, _mb in pairs}
    statuses = StatusReader(broker.bootstrap, [v.name for v in views])
    topic = views[0].topic
    try:
        with start_queries(spark, config, views) as running:
            placed = produce_records(broker.bootstrap, topic, _records(rounds[0], deleted))
            compared = _compare_at(broker, pairs, statuses, end_offsets(placed))
            assert compared[ORDER_COUNTS.name], "the count twins hold every customer"
            placed += produce_records(broker.bootstrap, topic, _records(rounds[1], []))
            _compare_at(broker, pairs, statuses, end_offsets(placed))
            running.check()
    finally:
        statuses.close()


def _compare_at(
    broker: KafkaBroker,
    pairs: list[tuple[View, View]],
    statuses: StatusReader,
    ends: dict[int, int],
) -> dict[str, Rows]:
    """Each twin's rows up to the changelog offsets of its status naming the input's
    `ends` (what `atLeast` waits for) are equal; returns them by the views' base names."""
    compared = {}
    for rt, mb in pairs:
        got, want = (
            rows_up_to(broker, v, statuses.wait_for_offsets(v.name, ends, 90).changelog_offsets)
            for v in (rt, mb)
        )
        assert differences(got, want) == {}, f"{rt.name} vs {mb.name}"
        compared[mb.name.split("_mb_")[0]] = want
    return compared


def test_views_spark_cannot_run_in_real_time_mode_run_in_micro_batches(tmp_path: Path) -> None:
    config = PipelineConfig(checkpoint_dir=tmp_path / "checkpoints", pipeline_mode="real_time")
    windowed, recordkeyed = HOURLY_BASKETS, STATUS_LINES
    assert realtime_views(config, [CUSTOMER_ORDERS, windowed, recordkeyed]) == {
        CUSTOMER_ORDERS.name
    }
    micro = dataclasses.replace(config, pipeline_mode=PipelineMode.MICRO_BATCH.value)
    assert realtime_views(micro, [CUSTOMER_ORDERS]) == frozenset()
    asked = dataclasses.replace(CUSTOMER_ORDERS, pipeline_mode=PipelineMode.REAL_TIME)
    assert realtime_views(micro, [asked]) == {asked.name}
    with pytest.raises(PipelineConfigError) as raised:
        realtime_views(
            config, [dataclasses.replace(windowed, pipeline_mode=PipelineMode.REAL_TIME)]
        )
    assert str(raised.value).startswith(f"view {windowed.name}: asks for pipeline_mode real_time")
    assert "pack more than the entity key" in str(raised.value)


def test_real_time_mode_queries_checkpoint_at_spread_intervals(tmp_path: Path) -> None:
    """Queries on one interval, started together, stall together at every checkpoint: the
    first keeps STATEFED_REALTIME_CHECKPOINT_MS, the others checkpoint a little less often,
    each its own interval, none past 1.5x the setting."""
    config = PipelineConfig(checkpoint_dir=tmp_path, realtime_checkpoint_ms=5000)
    names = ["word_counts", "host_access", "last_booking", "host_pages"]
    assert realtime_intervals(config, names) == {
        "word_counts": 5000,
        "host_access": 5625,
        "last_booking": 6250,
        "host_pages": 6875,
    }
    assert realtime_intervals(config, ["alone"]) == {"alone": 5000}
    assert realtime_intervals(config, []) == {}
