"""Aggregate views and `where` in a real Spark session, against the pure-Python reference
(`tests.aggregates`): on hypothesis-generated events (keys few, so that they repeat; event
times out of order; fields missing or of the wrong type), and streaming from Kafka across
a restart that replays from the checkpoint, views re-keyed by value fields included. A
windowed aggregate view's windows (hopping) equal the reference's per key and window."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pipeline import start_queries
from pipeline.errors import PipelineError
from pipeline.kinds import aggregate as aggregate_kind
from pipeline.kinds import windowed_count as windowed_kind
from pipeline.where import where_applied
from runtime.topics import ensure_topics, statefed_topics
from schema import (
    Aggregate,
    AggregateFunction,
    EnumOf,
    EventRow,
    FieldType,
    ValueField,
    View,
    WindowRow,
    decode_event,
    decode_window,
)
from tests.aggregates import (
    T0,
    Event,
    Expected,
    orders,
    reference,
    same_results,
    windowed_reference,
)
from tests.orders import CUSTOMER_ORDERS, HOURLY_BASKETS, ORDER_VIEWS, PAID_ORDERS, paid
from tests.pipeline.support import (
    PARTITIONS,
    DeadLetterReader,
    Record,
    TopicReader,
    pipeline_config,
    produce_records,
)
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

F = AggregateFunction
FIELDS = "struct<amount: double, quantity: bigint, product: string, status: string>"
EVENTS = f"key string, event_ms long, partition int, offset long, fields {FIELDS}"

_events = orders(["c1", "c2", "c3", "ü"])


def _fields(event: Event) -> tuple[Any, ...]:
    """The event's fields as `keyed_events` stores them (see tests.aggregates._read)."""
    amount, quantity = event.value.get("amount"), event.value.get("quantity")
    return (
        float(amount) if isinstance(amount, int | float) else None,
        quantity if isinstance(quantity, int) else None,
        event.value.get("product"),
        event.value.get("status"),
    )


def _rows(spark: SparkSession, view: View, events: list[Event]) -> dict[str, EventRow]:
    frame = spark.createDataFrame(
        [(e.key, e.event_ms, 0, i, _fields(e)) for i, e in enumerate(events)], EVENTS
    )
    rows = aggregate_kind.aggregate(where_applied(frame, view), view).toArrow()
    records = list(aggregate_kind.changelog(rows))
    assert all(r.key == r.entity_key.encode() and r.value is not None for r in records)
    return {r.entity_key: decode_event(r.value or b"") for r in records}


def _differences(got: dict[str, EventRow], expected: dict[str, Expected]) -> dict[str, Any]:
    """The keys whose row differs from the reference's, with both."""
    wrong = {}
    for key in set(got) | set(expected):
        row, want = got.get(key), expected.get(key)
        if row is None or want is None or not _equal(row, want):
            wrong[key] = (row, want)
    return wrong


def _equal(row: EventRow, want: Expected) -> bool:
    position = (row.event_ms, row.source_offset)
    return position == (want.event_ms, want.events) and same_results(row.fields, want.results)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(events=_events)
def test_every_aggregate_and_where_equal_the_reference(
    spark: SparkSession, events: list[Event]
) -> None:
    for view, where in ((CUSTOMER_ORDERS, None), (PAID_ORDERS, paid)):
        assert _differences(_rows(spark, view, events), reference(view, events, where)) == {}


def _windows(spark: SparkSession, view: View, events: list[Event]) -> dict[Any, WindowRow]:
    frame = spark.createDataFrame(
        [(e.key, e.event_ms, 0, i, _fields(e)) for i, e in enumerate(events)], EVENTS
    )
    rows = windowed_kind.aggregate(where_applied(frame, view), view).toArrow()
    windows = [decode_window(r.value or b"") for r in windowed_kind.changelog(rows)]
    return {(w.key, w.start_ms): w for w in windows}


def _window_differences(
    got: dict[Any, WindowRow], expected: dict[Any, Expected], size_ms: int
) -> dict[Any, Any]:
    wrong = {}
    for at in set(got) | set(expected):
        row, want = got.get(at), expected.get(at)
        if (
            row is None
            or want is None
            or (row.count, row.last_event_ms, row.end_ms)
            != (want.events, want.event_ms, row.start_ms + size_ms)
            or not same_results(row.fields, want.results)
        ):
            wrong[at] = (row, want)
    return wrong


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(events=orders(["c1", "c2", "ü"], span_ms=4 * 3_600_000))
def test_windowed_aggregates_equal_the_reference_per_window(
    spark: SparkSession, events: list[Event]
) -> None:
    assert HOURLY_BASKETS.window is not None
    got, want = _windows(spark, HOURLY_BASKETS, events), windowed_reference(HOURLY_BASKETS, events)
    assert _window_differences(got, want, HOURLY_BASKETS.window.size_ms) == {}


def test_results_may_be_named_like_the_kinds_own_columns(spark: SparkSession) -> None:
    named = (
        Aggregate("events", F.COUNT),
        Aggregate("key", F.SUM, "amount"),
        Aggregate("fields", F.MAX, "quantity"),
        Aggregate("lastEventMs", F.MIN, "amount"),
    )
    events = [
        Event("c1", T0 + 5, {"amount": 2.5, "quantity": 3}),
        Event("c1", T0 + 1, {"amount": 1.0}),
        Event("c2", T0 + 2, {"quantity": -1}),
    ]
    view = dataclasses.replace(CUSTOMER_ORDERS, aggregates=named)
    assert _differences(_rows(spark, view, events), reference(view, events)) == {}
    windowed = dataclasses.replace(HOURLY_BASKETS, aggregates=named)
    assert windowed.window is not None
    got, want = _windows(spark, windowed, events), windowed_reference(windowed, events)
    assert want and _window_differences(got, want, windowed.window.size_ms) == {}


def test_a_where_that_cannot_be_evaluated_names_the_view_and_its_fields(
    spark: SparkSession,
) -> None:
    frame = spark.createDataFrame([], EVENTS)
    for where, detail in (
        ("status = ", "PARSE_SYNTAX_ERROR"),
        ("colour = 'red'", "colour"),
        ("amount + 1", "boolean"),
    ):
        view = dataclasses.replace(PAID_ORDERS, where=where)
        with pytest.raises(PipelineError) as raised:
            where_applied(frame, view)
        message = str(raised.value)
        assert message.startswith(f"view paid_orders: where {where!r} cannot be evaluated")
        assert detail.lower() in message.lower()
        assert "declared: amount, quantity, product, status" in message


# PAID_ORDERS's fields (amount: Float, quantity: Int, product and status: String) and one
# of each other type whose stored form differs, as keyed_events stores them
_TYPED_FIELDS = (
    *PAID_ORDERS.value_fields,
    ValueField("paid", FieldType.BOOLEAN),
    ValueField("price", FieldType.DECIMAL),
    ValueField("day", FieldType.DATE),
    ValueField("at", FieldType.TIMESTAMP),
    ValueField("channel", EnumOf("Channel", ("WEB", "SHOP"))),
)
_TYPED_EVENTS = (
    "key string, event_ms long, partition int, offset long, fields struct<amount: double, "
    "quantity: bigint, product: string, status: string, paid: boolean, price: string, "
    "day: string, at: bigint, channel: string>"
)


def _typed_where(spark: SparkSession, where: str) -> None:
    """`where_applied` of a view of `_TYPED_FIELDS` with `where`: the query is built only."""
    view = dataclasses.replace(PAID_ORDERS, value_fields=_TYPED_FIELDS, where=where)
    where_applied(spark.createDataFrame([], _TYPED_EVENTS), view)


def test_a_where_casting_text_is_refused_before_any_event(spark: SparkSession) -> None:
    """Spark's analysis lets `product > 5` through as `CAST(product AS BIGINT) > 5`; every
    value not a number would fail the query (CAST_INVALID_INPUT) at every replay."""
    where = "status = 'PAID' AND product > 5"
    with pytest.raises(PipelineError) as raised:
        _typed_where(spark, where)
    assert str(raised.value) == (
        f"view paid_orders: where {where!r} makes Spark cast product (string) to bigint at "
        f"every event, which fails the query at the first value that does not cast "
        f"(CAST_INVALID_INPUT), at every replay: compare text with a quoted string (a Date "
        f"with DATE '2026-01-31') and a number with a number, write try_cast(product AS "
        f"BIGINT) (null where it does not cast: the event is left out; try_to_timestamp "
        f"for a parse with a format), or declare the field's type a number (FieldType.INT, "
        f"LONG or FLOAT)"
    )


@pytest.mark.parametrize(
    ("where", "casts"),
    [
        ("5 < product", "product (string) to bigint"),
        ("product IN (1, 2)", "product (string) to bigint"),
        ("product BETWEEN 1 AND 9", "product (string) to bigint"),
        ("product + 1 > 5", "product (string) to bigint"),
        ("abs(product) > 1", "product (string) to double"),
        ("CAST(product AS INT) > 1", "product (string) to int"),
        ("to_date(product) < DATE '2026-01-01'", "product (string) to date"),
        ("year(product) = 2026", "product (string) to date"),
        ("product = true", "product (string) to boolean"),
        ("product = 1 OR 2 < product OR status = 3", "product (string) to bigint, status "),
        ("paid = 'maybe'", "'maybe' (string) to boolean"),  # a constant is tried
        ("quantity > 'abc'", "'abc' (string) to bigint"),
        ("amount > 'x' AND quantity = '5'", "'x' (string) to double at"),
        ("channel = 1", "channel (string) to bigint"),  # an enum's text is unchecked
        ("price > 10", "price (string) to bigint"),  # so is a Decimal's
        ("CAST(price AS DECIMAL(10, 2)) > 1", "price (string) to decimal(10,2)"),
        ("day > 20260101", "day (string) to bigint"),
        # a date past year 294247 is no timestamp
        ("day < TIMESTAMP '2026-02-01 00:00:00'", "day (string) to timestamp"),
        # parses of text with a format fail in ANSI mode as casts do
        ("to_timestamp(product, 'yyyy-MM-dd') IS NULL", "product (string) to timestamp"),
        ("to_date(status, 'yyyy-MM-dd') IS NULL", "status (string) to timestamp"),
        ("unix_timestamp(product, 'yyyy') > 5", "product (string) to bigint"),
        ("day = '1' OR " * 300 + "product > 5", "product (string) to bigint"),  # deep
    ],
)
def test_a_where_casting_text_that_may_not_cast_names_each_cast_once(
    spark: SparkSession, where: str, casts: str
) -> None:
    with pytest.raises(PipelineError) as raised:
        _typed_where(spark, where)
    assert str(raised.value).startswith(
        f"view paid_orders: where {where!r} makes Spark cast {casts}"
    )


@pytest.mark.parametrize(
    ("where", "divisions"),
    [
        ("amount / quantity > 10", "(amount / CAST(quantity AS DOUBLE))"),
        ("quantity div quantity = 1", "(quantity div quantity)"),
        ("quantity % quantity = 0 OR pmod(quantity, 0) = 1", "(quantity % quantity), pmod("),
        ("amount / 0 > 1", "(amount / CAST(0 AS DOUBLE))"),  # a constant zero
        ("amount / quantity BETWEEN 1 AND 2", "(amount / CAST(quantity AS DOUBLE))"),
        ("quantity BETWEEN 1 / quantity AND 2", "(CAST(1 AS DOUBLE) / CAST(quantity AS "),
        # a constant divisor that does not evaluate is no constant other than zero
        ("amount / (1 / 0) > 1", "(amount / ("),
        ("quantity / nullif(quantity, 1) > 1", "(CAST(quantity AS DOUBLE) / CAST(nullif("),
    ],
)
def test_a_where_that_may_divide_by_zero_is_refused_before_any_event(
    spark: SparkSession, where: str, divisions: str
) -> None:
    """In ANSI mode an event whose divisor is 0 fails the query (DIVIDE_BY_ZERO), at every
    replay."""
    with pytest.raises(PipelineError) as raised:
        _typed_where(spark, where)
    assert str(raised.value).startswith(
        f"view paid_orders: where {where!r} divides at every event ({divisions}"
    )
    assert "try_divide(a, b)" in str(raised.value)


@pytest.mark.parametrize(
    "where",
    [
        "product = 'x'",
        "quantity > 5",
        "try_cast(product AS INT) > 5",
        "amount > 10 AND status IN ('PAID', 'SHIPPED')",
        "quantity > '5' AND paid = 'true' AND amount < '1e3'",  # constants that cast
        "day > DATE '2026-01-01' AND day BETWEEN DATE '2026-01-01' AND DATE '2026-12-31'",
        "day >= '2026-01-01' AND year(day) = 2026 AND to_date(day) IS NOT NULL",
        "try_cast(price AS DECIMAL(38, 18)) > 10 AND price = '12.50' AND channel = 'WEB'",
        "at > 1767225600000 AND paid AND NOT paid = false AND length(product) > 3",
        "crc32(product) % 10 = 0 AND md5(status) <> 'x'",  # text to bytes cannot fail
        "try_to_timestamp(product, 'yyyy-MM-dd') IS NOT NULL",
        "try_divide(amount, quantity) > 10 AND try_mod(quantity, quantity) = 0",
        "amount / 2.5 > 1 AND quantity div 2 = 1 AND quantity % -3 = 0",  # constant divisors
        "amount / nullif(quantity, 0) > 10 AND quantity % nullif(quantity, 0.0) = 0",
        "try_divide(amount, product) > 1 AND try_mod(product, quantity) = 0",  # TryEval
    ],
)
def test_a_where_whose_casts_cannot_fail_is_applied(spark: SparkSession, where: str) -> None:
    _typed_where(spark, where)


class _Rows:
    """An aggregate view's changelog: per key the row of greatest position, the most events
    a row of the key ever counted, and rows on another partition than the key's."""

    def __init__(self, broker: KafkaBroker, view: View) -> None:
        self.view = view
        self.reader = TopicReader(broker.bootstrap, view.changelog_topic)
        self.rows: dict[str, EventRow] = {}
        self.most_events: dict[str, int] = {}
        self.misplaced: list[tuple[str, int]] = []  # rows off the partition lookups ask

    def poll(self) -> dict[str, EventRow]:
        for partition, _key, value in self.reader.read():
            row = decode_event(value)
            if partition != self.view.partition_of(row.key, PARTITIONS):
                self.misplaced.append((row.key, partition))
            known = self.rows.get(row.key)
            if known is None or (row.event_ms, row.source_offset) > (
                known.event_ms,
                known.source_offset,
            ):
                self.rows[row.key] = row
            self.most_events[row.key] = max(self.most_events.get(row.key, 0), row.source_offset)
        return self.rows


def _records(events: list[Event]) -> list[Record]:
    return [
        Record(e.key.encode(), orjson.dumps({**e.value, "timestamp": e.event_ms})) for e in events
    ]


@settings(
    max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rounds=st.lists(_events, min_size=3, max_size=3))
def test_streamed_aggregates_equal_the_reference_across_a_restart(
    spark: SparkSession, broker: KafkaBroker, tmp_path: Path, rounds: list[list[Event]]
) -> None:
    suffix = uuid.uuid4().hex[:10]
    views = [
        dataclasses.replace(v, name=f"{v.name}_{suffix}", topic=f"test.{suffix}.orders")
        for v in ORDER_VIEWS
    ]
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, views))
    config = pipeline_config(broker, tmp_path / f"checkpoints-{suffix}")
    readers = {v.name: _Rows(broker, v) for v in views}
    produced: list[Event] = []

    def caught_up(view: View, where: Callable[[dict[str, Any]], bool] | None) -> None:
        want, rows = reference(view, produced, where), readers[view.name]
        wait_until(
            lambda: not _differences(rows.poll(), want),
            90,
            lambda: f"view {view.name}: {_differences(rows.rows, want)}",
            interval_s=0,
        )

    wheres = {v.name: paid if v.where else None for v in views}

    def all_caught_up() -> None:
        for view in views:
            caught_up(view, wheres[view.name])

    try:
        with start_queries(spark, config, views) as running:
            for events in rounds[:2]:
                produce_records(broker.bootstrap, views[0].topic, _records(events))
                produced.extend(events)
                all_caught_up()
            running.check()
        # stopped: the last round is read after a restart from the same checkpoints
        produce_records(broker.bootstrap, views[0].topic, _records(rounds[2]))
        produced.extend(rounds[2])
        with start_queries(spark, config, views) as running:
            all_caught_up()
            # an event without a usable group key is a dead letter, saying so
            grouped = [v for v in views if v.group_by]
            unplaced = [e for e in produced if any(reference(v, [e]) == {} for v in grouped)]
            letters = DeadLetterReader(broker.bootstrap, views[0].topic)

            def all_written() -> bool:
                letters.poll()
                return len(letters.letters) >= len(unplaced)

            try:
                wait_until(
                    all_written,
                    60,
                    lambda: f"{len(unplaced)} dead letters, got {len(letters.letters)}",
                    interval_s=0,
                )
                assert len(letters.letters) == len(unplaced)
                assert all(x.reason.startswith("group field(s) ") for x in letters.letters)
            finally:
                letters.close()
            running.check()
        for view in views:
            truth = reference(view, produced, wheres[view.name])
            counted = {k: e.events for k, e in truth.items()}
            assert readers[view.name].most_events == counted, "a replay counted twice"
            assert readers[view.name].misplaced == []
    finally:
        for reader in readers.values():
            reader.reader.close()
