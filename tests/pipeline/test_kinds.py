"""Each kind's computation on a static batch of keyed events, and its changelog records."""

from __future__ import annotations

import dataclasses

import pytest
from pyspark.sql import DataFrame, SparkSession

from pipeline.errors import PipelineError
from pipeline.kinds import PLANS, ChangelogRecord, history, latest, plan_for, windowed_count
from schema import (
    DEMO_DOMAIN,
    WORD_COUNTS,
    EventRow,
    View,
    ViewKind,
    WindowRow,
    WindowSpec,
    decode_event,
    decode_window,
    event_record_key,
    view_by_name,
    window_record_key,
)

T0 = 1_767_225_600_000
EVENTS = "key string, event_ms long, partition int, offset long, fields struct<trip: string>"
DELETABLE = f"{EVENTS}, deleted boolean"  # the events of a kind that deletes (latest)


def _view(kind: ViewKind) -> View:
    return next(v for v in DEMO_DOMAIN if v.kind is kind)


def _events(spark: SparkSession, rows: list[tuple[str, int, int, int, str]]) -> DataFrame:
    return spark.createDataFrame([(k, t, p, o, (trip,)) for k, t, p, o, trip in rows], EVENTS)


def _deletable(spark: SparkSession, rows: list[tuple[str, int, int, int, str | None]]) -> DataFrame:
    """Events of a latest view: a trip of None is a tombstone."""
    return spark.createDataFrame(
        [(k, t, p, o, (trip,), trip is None) for k, t, p, o, trip in rows], DELETABLE
    )


def _value(record: ChangelogRecord) -> bytes:
    assert record.value is not None, f"a tombstone for {record.entity_key}"
    return record.value


def test_every_kind_of_the_catalogues_has_a_plan() -> None:
    assert set(PLANS) == set(ViewKind)
    for view in (WORD_COUNTS, *DEMO_DOMAIN):
        assert plan_for(view) is PLANS[view.kind]
    modes = {view.name: plan_for(view).output_mode(view) for view in (WORD_COUNTS, *DEMO_DOMAIN)}
    assert [name for name, mode in modes.items() if mode == "append"] == ["booking_history"]
    session = dataclasses.replace(
        view_by_name("host_access_per_minute"),
        window=WindowSpec(gap_ms=30_000, grace_ms=0, retention_ms=3_600_000),
    )
    assert plan_for(session).output_mode(session) == "append"  # Spark's only mode for them
    # only a watermark drops late events, so only windowed views resume a late_dropped total
    assert [kind for kind, plan in PLANS.items() if plan.drops_late] == [
        ViewKind.WINDOWED_COUNT,
        ViewKind.WINDOWED_AGGREGATE,
    ]


def test_an_unknown_kind_is_named() -> None:
    saved = PLANS.pop(ViewKind.HISTORY)
    try:
        with pytest.raises(PipelineError, match="view booking_history: kind history is not"):
            plan_for(_view(ViewKind.HISTORY))
    finally:
        PLANS[ViewKind.HISTORY] = saved


def test_latest_is_the_greatest_event_time_then_partition_then_offset(spark: SparkSession) -> None:
    events = _deletable(
        spark,
        [
            ("c1", T0 + 5, 0, 9, "newest"),
            ("c1", T0 + 1, 3, 99, "older, read later"),
            ("c2", T0, 1, 4, "same time, lower partition"),
            ("c2", T0, 2, 1, "same time, higher partition"),
            ("c2", T0, 2, 0, "same time and partition, lower offset"),
        ],
    )
    rows = latest.aggregate(events, _view(ViewKind.LATEST)).toArrow()
    records = {r.entity_key: r for r in latest.changelog(rows)}
    assert {k: r.key for k, r in records.items()} == {"c1": b"c1", "c2": b"c2"}
    assert decode_event(_value(records["c1"])) == EventRow("c1", T0 + 5, 0, 9, {"trip": "newest"})
    assert decode_event(_value(records["c2"])).fields == {"trip": "same time, higher partition"}


def test_latest_writes_a_tombstone_when_the_newest_event_deletes(spark: SparkSession) -> None:
    events = _deletable(
        spark,
        [("c1", T0, 0, 1, "booked"), ("c1", T0 + 1, 0, 2, None), ("c2", T0 + 1, 1, 1, None),
         ("c2", T0 + 2, 1, 2, "after its deletion")],
    )  # fmt: skip
    rows = latest.aggregate(events, _view(ViewKind.LATEST)).toArrow()
    records = {r.entity_key: r for r in latest.changelog(rows)}
    assert records["c1"].value is None and records["c1"].key == b"c1"
    assert decode_event(_value(records["c2"])).fields == {"trip": "after its deletion"}
    assert [k for k, p in PLANS.items() if p.deletes] == [ViewKind.LATEST]


def test_windows_are_aligned_to_the_epoch(spark: SparkSession) -> None:
    view = _view(ViewKind.WINDOWED_COUNT)
    minute = 60_000
    events = _events(
        spark,
        [("h", T0, 0, 0, ""), ("h", T0 + minute - 1, 0, 1, ""), ("h", T0 + minute, 0, 2, "")],
    )
    rows = windowed_count.aggregate(events, view).toArrow()
    records = sorted(windowed_count.changelog(rows), key=lambda r: r.key)
    windows = [decode_window(_value(r)) for r in records]
    assert windows == [
        WindowRow("h", T0, T0 + minute, 2, T0 + minute - 1),
        WindowRow("h", T0 + minute, T0 + 2 * minute, 1, T0 + minute),
    ]
    assert [r.key for r in records] == [window_record_key(w) for w in windows]
    assert {r.entity_key for r in records} == {"h"}


def test_hopping_windows_count_an_event_in_each_window_holding_it(spark: SparkSession) -> None:
    minute = 60_000
    hopping = WindowSpec(size_ms=minute, slide_ms=minute // 2, retention_ms=minute)
    view = dataclasses.replace(_view(ViewKind.WINDOWED_COUNT), window=hopping)
    events = _events(spark, [("h", T0 + 10_000, 0, 0, ""), ("h", T0 + 40_000, 0, 1, "")])
    rows = windowed_count.aggregate(events, view).toArrow()
    windows = sorted(
        (decode_window(_value(r)) for r in windowed_count.changelog(rows)),
        key=lambda w: w.start_ms,
    )
    half = minute // 2
    assert windows == [
        WindowRow("h", T0 - half, T0 + half, 1, T0 + 10_000),
        WindowRow("h", T0, T0 + minute, 2, T0 + 40_000),
        WindowRow("h", T0 + half, T0 + minute + half, 1, T0 + 40_000),
    ]


def test_sessions_end_a_gap_after_their_last_event(spark: SparkSession) -> None:
    gap = 30_000
    sessions = WindowSpec(gap_ms=gap, retention_ms=3_600_000)
    view = dataclasses.replace(_view(ViewKind.WINDOWED_COUNT), window=sessions)
    # gaps of 20 s, exactly the gap (still one session), then 30.001 s (a new one)
    at = [T0, T0 + 20_000, T0 + 50_000, T0 + 80_001, T0 + 200_000]
    events = _events(spark, [("v", t, 0, i, "") for i, t in enumerate(at)])
    rows = windowed_count.aggregate(events, view).toArrow()
    windows = sorted(
        (decode_window(_value(r)) for r in windowed_count.changelog(rows)),
        key=lambda w: w.start_ms,
    )
    assert windows == [
        WindowRow("v", T0, T0 + 50_000 + gap, 3, T0 + 50_000),
        WindowRow("v", T0 + 80_001, T0 + 80_001 + gap, 1, T0 + 80_001),
        WindowRow("v", T0 + 200_000, T0 + 200_000 + gap, 1, T0 + 200_000),
    ]


def test_history_writes_every_event_under_its_own_key(spark: SparkSession) -> None:
    events = _events(spark, [("c1", T0, 0, 1, "a"), ("c1", T0, 0, 1, "a"), ("c1", T0, 0, 2, "b")])
    rows = history.aggregate(events, _view(ViewKind.HISTORY)).toArrow()
    records = list(history.changelog(rows))
    expected = [EventRow("c1", T0, 0, o, {"trip": t}) for o, t in ((1, "a"), (1, "a"), (2, "b"))]
    assert [decode_event(_value(r)) for r in records] == expected
    # a replayed event rewrites the same record key: an idempotent upsert
    assert [r.key for r in records] == [event_record_key(e) for e in expected]
