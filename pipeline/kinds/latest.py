"""LATEST views: per key the event with the greatest (event_ms, source partition, offset).

The maximum of a struct compares its fields in order, so an older event that arrives
late never replaces a newer one, and equal event times go to the later record. A
tombstone (a record with a null value) is an event at its Kafka timestamp that deletes the
key: when it is the newest, the changelog gets a tombstone for the key; a newer event
brings the key back.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.kinds.events import event_rows
from pipeline.kinds.json import event_value
from pipeline.kinds.plan import ChangelogRecord, KindPlan
from schema import View, encode_event

__all__ = ["PLAN", "aggregate", "changelog", "records"]


def aggregate(events: DataFrame, view: View) -> DataFrame:
    """Per key: the newest event's `event_ms`, `partition`, `offset`, `deleted` and
    `fields`."""
    newest = F.max(F.struct("event_ms", "partition", "offset", "deleted", "fields"))
    return events.groupBy("key").agg(newest.alias("newest")).select("key", "newest.*")


def changelog(rows: pa.Table) -> Iterator[ChangelogRecord]:
    """One record per updated key, keyed by the entity key (the newest event wins): the
    event, or a tombstone when the newest is a deletion."""
    deleted = rows.column("deleted").to_pylist()
    for event, gone in zip(event_rows(rows), deleted, strict=True):
        value = None if gone else encode_event(event)
        yield ChangelogRecord(event.key, event.key.encode("utf-8"), value)


def records(rows: DataFrame) -> DataFrame:
    """`changelog`'s records as the Kafka sink's columns (Real-Time Mode): the event, or a
    null value (a tombstone) when the newest is a deletion."""
    event = event_value(F.col("partition"), F.col("offset"))
    return rows.select(F.col("key"), F.when(~F.col("deleted"), event).alias("value"))


PLAN = KindPlan(aggregate=aggregate, changelog=changelog, deletes=True, records=records)
