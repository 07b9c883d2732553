"""LATEST views: per key the event with the greatest (event_ms, source partition, offset).

The maximum of a struct compares its fields in order, so an older event that arrives
late never replaces a newer one, and equal event times go to the later record.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.kinds.events import event_rows
from pipeline.kinds.plan import ChangelogRecord, KindPlan
from schema import View, encode_event

__all__ = ["PLAN", "aggregate", "changelog"]


def aggregate(events: DataFrame, view: View) -> DataFrame:
    """Per key: the newest event's `event_ms`, `partition`, `offset` and `fields`."""
    newest = F.max(F.struct("event_ms", "partition", "offset", "fields")).alias("newest")
    return events.groupBy("key").agg(newest).select("key", "newest.*")


def changelog(rows: pa.Table) -> Iterator[ChangelogRecord]:
    """One record per updated key, keyed by the entity key (the newest event wins)."""
    for event in event_rows(rows):
        yield ChangelogRecord(event.key, event.key.encode("utf-8"), encode_event(event))


PLAN = KindPlan(aggregate=aggregate, changelog=changelog)
