"""WINDOWED_COUNT views: events per key and window, with a watermark for late events;
and WINDOWED_AGGREGATE views, which add the view's aggregates per key and window
(`pipeline.kinds.aggregate.results`) as the window row's `fields`.

Windows are Spark's `window()` over the event time, tumbling or hopping (`WindowSpec`):
they start at whole multiples of the slide since the epoch, and an event counts in every
window holding it. Session windows are Spark's `session_window()`, which Spark computes
in append mode only (SPARK-36463: a session's range changes as events join it, so there
is no key to update): a session is written once, when the watermark passes its end.

The watermark is the newest event time seen minus the grace period, and an event whose
window ends at or before the watermark in force for its micro-batch is dropped from that
window (a hopping window's later neighbours may still count it; an event's own session
is [t, t + gap)) and counted in Spark's `numRowsDroppedByWatermark` (published as
`late_dropped`). Spark counts rows after its partial aggregation: late events of the same
(key, window) read by one task of one micro-batch count as one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.errors import PipelineError
from pipeline.kinds.aggregate import fields, results
from pipeline.kinds.plan import ChangelogRecord, KindPlan
from schema import View, WindowRow, WindowSpec, encode_window, window_record_key

__all__ = ["PLAN", "aggregate", "changelog"]


def _window(spec: WindowSpec) -> Column:
    """The window column of an event: a session, or a window of a size."""
    if spec.gap_ms is not None:
        return F.session_window("event_time", f"{spec.gap_ms} milliseconds").alias("window")
    size, hop = f"{spec.size_ms} milliseconds", f"{spec.hop_ms} milliseconds"
    return F.window("event_time", size, hop)


def aggregate(events: DataFrame, view: View) -> DataFrame:
    """Per (key, window): `count`, `last_event_ms`, the window's `start_ms`/`end_ms`, and
    the view's aggregates as `fields` when it has any."""
    if view.window is None:
        raise PipelineError(f"view {view.name}: a {view.kind.value} view needs a window")
    windows = (
        events.withColumn("event_time", F.timestamp_millis("event_ms"))
        .withWatermark("event_time", f"{view.window.grace_ms} milliseconds")
        .groupBy("key", _window(view.window))
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.max("event_ms").alias("last_event_ms"),
            *results(view),
        )
    )
    results_of = [fields(view)] if view.aggregates else []
    return windows.select(
        "key",
        F.unix_millis(F.col("window.start")).alias("start_ms"),
        F.unix_millis(F.col("window.end")).alias("end_ms"),
        "count",
        "last_event_ms",
        *results_of,
    )


def changelog(rows: pa.Table) -> Iterator[ChangelogRecord]:
    """One absolute record per updated (key, window)."""
    for row in rows.to_pylist():
        window = WindowRow(
            key=row["key"],
            start_ms=row["start_ms"],
            end_ms=row["end_ms"],
            count=row["count"],
            last_event_ms=row["last_event_ms"],
            fields=row.get("fields") or {},
        )
        yield ChangelogRecord(window.key, window_record_key(window), encode_window(window))


PLAN = KindPlan(
    aggregate=aggregate,
    changelog=changelog,
    drops_late=True,
    appends=lambda view: view.window is not None and view.window.session,
)
