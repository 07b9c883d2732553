"""Which input rows are usable, on static DataFrames in the shared Spark session."""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession

from node.pipeline.records import (
    REASON_BAD_UTF8,
    REASON_EMPTY_KEY,
    REASON_NO_KEY,
    REASON_NO_TIMESTAMP,
    keyed_events,
    rejected_records,
)
from node.pipeline.source import KAFKA_SCHEMA

WHEN = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def _raw(spark: SparkSession, key: bytes | None, when: datetime | None = WHEN) -> DataFrame:
    row = (key, b"v", "words", 0, 7, when, 0 if when else -1)
    return spark.createDataFrame([row], KAFKA_SCHEMA)


def test_each_unusable_row_gets_its_reason(spark: SparkSession) -> None:
    cases = {
        REASON_NO_KEY: _raw(spark, None),
        REASON_BAD_UTF8: _raw(spark, b"\xc3\x28"),
        REASON_EMPTY_KEY: _raw(spark, b""),
        REASON_NO_TIMESTAMP: _raw(spark, b"kafka", None),
    }
    for reason, raw in cases.items():
        assert [r["reason"] for r in rejected_records(raw).collect()] == [reason]
        assert keyed_events(raw).count() == 0


def test_a_usable_row_becomes_a_keyed_event_in_milliseconds(spark: SparkSession) -> None:
    raw = _raw(spark, "straße".encode())
    assert rejected_records(raw).count() == 0
    (event,) = keyed_events(raw).collect()
    assert event["key"] == "straße"
    assert event["event_ms"] == int(WHEN.timestamp() * 1000)
    assert event["value"] == b"v"
