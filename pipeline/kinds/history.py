"""HISTORY views: every event of a key, one changelog record each, keyed so that byte order
is (key, event_ms, source partition, source offset) order."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame

from pipeline.kinds.events import event_rows
from pipeline.kinds.plan import ChangelogRecord, KindPlan
from schema import View, encode_event, event_record_key

__all__ = ["PLAN", "aggregate", "changelog"]


def aggregate(events: DataFrame, view: View) -> DataFrame:
    """Nothing to aggregate: each event as it arrives (stateless, append mode)."""
    return events.select("key", "event_ms", "partition", "offset", "fields")


def changelog(rows: pa.Table) -> Iterator[ChangelogRecord]:
    """One record per event; a replayed event rewrites the same record key."""
    for event in event_rows(rows):
        yield ChangelogRecord(event.key, event_record_key(event), encode_event(event))


PLAN = KindPlan(aggregate=aggregate, changelog=changelog, appends=lambda view: True)
