"""COUNT views: the number of events per key and the newest event time among them."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.kinds.json import count_value
from pipeline.kinds.plan import ChangelogRecord, KindPlan
from schema import CountRow, View, encode_count

__all__ = ["PLAN", "aggregate", "changelog", "records"]


def aggregate(events: DataFrame, view: View) -> DataFrame:
    """Per key: `count` of events and `last_event_ms`, the newest event time."""
    return events.groupBy("key").agg(
        F.count(F.lit(1)).alias("count"), F.max("event_ms").alias("last_event_ms")
    )


def changelog(rows: pa.Table) -> Iterator[ChangelogRecord]:
    """One absolute record per updated key."""
    keys = rows.column("key").to_pylist()
    counts = rows.column("count").to_pylist()
    lasts = rows.column("last_event_ms").to_pylist()
    for key, count, last in zip(keys, counts, lasts, strict=True):
        value = encode_count(CountRow(key=key, count=count, last_event_ms=last))
        yield ChangelogRecord(entity_key=key, key=key.encode("utf-8"), value=value)


def records(rows: DataFrame) -> DataFrame:
    """`changelog`'s records as the Kafka sink's columns (Real-Time Mode)."""
    value = count_value(F.col("key"), F.col("count"), F.col("last_event_ms"))
    return rows.select(F.col("key"), value.alias("value"))


PLAN = KindPlan(aggregate=aggregate, changelog=changelog, records=records)
