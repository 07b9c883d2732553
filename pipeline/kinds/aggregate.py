"""AGGREGATE views: per key, the view's aggregates over its events (`schema.aggregates`).

A row is stored as a latest view's event is (`schema.EventRow`): its fields are the
aggregates' results, its event time the newest among the key's events, and its position
(partition 0, offset: the number of events aggregated) grows with every update of the key,
since Spark's update mode writes a key only when an event of it arrived. A node keeps a
key's row of greatest position, so a replayed batch, which writes the same rows again,
changes nothing.

Spark keeps the state: a sum and a count per average, a set of the values per distinct
count (exact, and as large as the values are many).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.kinds.json import event_value
from pipeline.kinds.plan import ChangelogRecord, KindPlan
from schema import Aggregate, AggregateFunction, EventRow, View, encode_event

__all__ = ["PLAN", "aggregate", "changelog", "fields", "records", "results"]

_EVENTS = "events"  # the column of the number of events aggregated

# each function over the column of its value field (None: COUNT of the events)
_COMPUTE: dict[AggregateFunction, Callable[[Column], Column]] = {
    AggregateFunction.COUNT: F.count,
    AggregateFunction.SUM: F.try_sum,  # null past Long's range, not a failed batch
    AggregateFunction.MIN: F.min,
    AggregateFunction.MAX: F.max,
    AggregateFunction.AVG: F.avg,
    AggregateFunction.COUNT_DISTINCT: lambda value: F.size(F.collect_set(value)),
}


def _column(name: str) -> str:
    """The column of the result `name` while aggregating: apart from the kinds' own
    columns (`key`, `count`, `events`...), whatever the result is called."""
    return f"r_{name}"


def _result(aggregate: Aggregate) -> Column:
    value = F.lit(1) if aggregate.of is None else F.col("fields").getField(aggregate.of)
    return _COMPUTE[aggregate.function](value).alias(_column(aggregate.name))


def results(view: View) -> list[Column]:
    """The aggregation columns of `view`'s aggregates (see `fields`)."""
    return [_result(a) for a in view.aggregates]


def fields(view: View) -> Column:
    """`fields`: the struct of `view`'s results by name, after `results` aggregated them."""
    named = (F.col(_column(a.name)).alias(a.name) for a in view.aggregates)
    return F.struct(*named).alias("fields")


def aggregate(events: DataFrame, view: View) -> DataFrame:
    """Per key: `event_ms` (the newest), `events` (how many) and `fields`, the results."""
    grouped = events.groupBy("key").agg(
        F.max("event_ms").alias("event_ms"),
        F.count(F.lit(1)).alias(_EVENTS),
        *results(view),
    )
    return grouped.select("key", "event_ms", _EVENTS, fields(view))


def changelog(rows: pa.Table) -> Iterator[ChangelogRecord]:
    """One absolute record per updated key, keyed by the entity key."""
    for row in rows.to_pylist():
        event = EventRow(
            key=row["key"],
            event_ms=row["event_ms"],
            source_partition=0,
            source_offset=row[_EVENTS],
            fields=row["fields"],
        )
        yield ChangelogRecord(event.key, event.key.encode("utf-8"), encode_event(event))


def records(rows: DataFrame) -> DataFrame:
    """`changelog`'s records as the Kafka sink's columns (Real-Time Mode)."""
    return rows.select(F.col("key"), event_value(F.lit(0), F.col(_EVENTS)).alias("value"))


PLAN = KindPlan(aggregate=aggregate, changelog=changelog, records=records)
