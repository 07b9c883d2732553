"""Latest and history views, and dead letters for unusable values, against an in-test model."""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson
from pyspark.sql import SparkSession

from pipeline import start_queries
from pipeline.records import (
    REASON_BAD_VALUE,
    REASON_NO_KEY,
    bad_event_time,
    missing_event_time,
)
from schema import EventRow, View, decode_event, event_record_key, partition_for
from tests.pipeline.support import (
    DeadLetterReader,
    Record,
    RecordLog,
    StatusReader,
    end_offsets,
    pipeline_config,
    produce_records,
)
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

T0 = 1_767_225_600_000
# never the event time of these views; an hour ago, within the input topic's retention
# (older records are deleted at the broker's next retention check: a data loss to Spark)
KAFKA_TIME = int(time.time() * 1000) - 3_600_000


@dataclass(frozen=True)
class Booking:
    customer: str
    event_ms: int
    trip: object = None  # None: the field is left out of the value

    def record(self) -> Record:
        doc: dict[str, object] = {"timestamp": self.event_ms}
        if self.trip is not None:
            doc["trip"] = self.trip
        return Record(self.customer.encode(), orjson.dumps(doc), KAFKA_TIME)

    def row(self, placed: tuple[int, int]) -> EventRow:
        trip = None if self.trip is None else str(self.trip)
        return EventRow(self.customer, self.event_ms, placed[0], placed[1], {"trip": trip})


def _first_round(seed: int) -> list[Booking]:
    rng = random.Random(seed)
    bookings = [
        Booking(f"c{i % 5}", T0 + rng.randrange(100) * 1000, f"trip-{i}") for i in range(40)
    ]
    newest = max(b.event_ms for b in bookings)
    # the same event time twice: the later offset wins; a value without the field
    return [*bookings, Booking("c0", newest, "tie-1"), Booking("c0", newest, "tie-2"),
            Booking("c3", newest + 5, None), Booking("c4", newest + 7, 5)]  # fmt: skip


# Unusable records and the reason each must be rejected with.
BAD = [
    (Record(b"c1", b"not json", KAFKA_TIME), REASON_BAD_VALUE),
    (Record(b"c1", b"[1, 2]", KAFKA_TIME), REASON_BAD_VALUE),
    (Record(b"c1", b'{"trip": "nowhen"}', KAFKA_TIME), missing_event_time("timestamp")),
    (Record(b"c1", b'{"timestamp": null}', KAFKA_TIME), missing_event_time("timestamp")),
    (Record(b"c1", b'{"timestamp": "soon"}', KAFKA_TIME), bad_event_time("timestamp")),
    (Record(b"c1", b'{"timestamp": -5}', KAFKA_TIME), bad_event_time("timestamp")),
    (Record(None, b'{"timestamp": 5}', KAFKA_TIME), REASON_NO_KEY),
]


class Model:
    """Every usable event with where it landed; latest and history follow from them."""

    def __init__(self) -> None:
        self.events: list[EventRow] = []

    def add(self, bookings: list[Booking], placed: list[tuple[int, int]]) -> None:
        self.events += [b.row(p) for b, p in zip(bookings, placed, strict=True)]

    def latest(self) -> dict[str, EventRow]:
        newest: dict[str, EventRow] = {}
        for e in sorted(self.events, key=_order):
            newest[e.key] = e
        return newest

    def history(self) -> dict[str, list[EventRow]]:
        by_key: dict[str, list[EventRow]] = {}
        for e in sorted(self.events, key=_order):
            by_key.setdefault(e.key, []).append(e)
        return by_key


def _order(e: EventRow) -> tuple[int, int, int]:
    return e.event_ms, e.source_partition, e.source_offset


def _decoded(log: RecordLog) -> list[tuple[bytes, EventRow]]:
    rows = []
    for partition, key, value in log.records:
        row = decode_event(value)
        assert partition == partition_for(row.key, log.partitions), row
        rows.append((key, row))
    return rows


def _latest(log: RecordLog) -> dict[str, EventRow]:
    rows = {row.key: row for _, row in _decoded(log)}
    assert all(key == row.key.encode() for key, row in _decoded(log))
    return rows


def _history(log: RecordLog) -> dict[str, list[EventRow]]:
    by_key: dict[str, list[EventRow]] = {}
    for key, row in sorted(_decoded(log), key=lambda kr: kr[0]):  # byte order = read order
        assert key == event_record_key(row)
        by_key.setdefault(row.key, []).append(row)
    return by_key


def test_latest_and_history_follow_the_model_across_a_restart(
    spark: SparkSession, broker: KafkaBroker, demo_views: dict[str, View], tmp_path: Path
) -> None:
    latest, history = demo_views["latest"], demo_views["history"]
    assert latest.topic == history.topic
    config = pipeline_config(broker, tmp_path / "checkpoints")
    model = Model()
    placed: list[tuple[int, int]] = []
    latest_log = RecordLog(broker.bootstrap, latest.changelog_topic)
    history_log = RecordLog(broker.bootstrap, history.changelog_topic)
    status = StatusReader(broker.bootstrap, [latest.name, history.name])
    letters = DeadLetterReader(broker.bootstrap, latest.topic)

    def play(bookings: list[Booking], bad: tuple[Record, ...] = ()) -> None:
        records = [*(b.record() for b in bookings), *bad]
        where = produce_records(broker.bootstrap, latest.topic, records)
        placed.extend(where)
        model.add(bookings, where[: len(bookings)])
        for view in (latest, history):
            status.wait_for_offsets(view.name, end_offsets(placed))
        latest_log.wait_until(lambda: _latest(latest_log) == model.latest(), "latest = model")
        history_log.wait_until(lambda: _history(history_log) == model.history(), "history")

    try:
        with start_queries(spark, config, [latest, history]):
            play(_first_round(seed=7), tuple(r for r, _ in BAD))

            def all_letters() -> bool:
                letters.poll()
                return len(letters.letters) >= len(BAD)

            wait_until(all_letters, 60, "a dead letter per bad record", interval_s=0)
        newest_c1 = model.latest()["c1"].event_ms
        later = [
            Booking("c1", newest_c1 - 1, "older: must not win"),
            Booking("c2", T0 + 10**6, "newer"),
            Booking("c9", T0, "new customer"),
        ]
        with start_queries(spark, config, [latest, history]):
            play(later)
    finally:
        latest_log.close()
        history_log.close()
        status.close()
        letters.close()

    assert model.latest()["c1"].fields["trip"] != "older: must not win"
    assert model.latest()["c0"].fields["trip"] == "tie-2"
    # every event exactly once, even across the restart
    assert set(Counter(key for _, key, _ in history_log.records).values()) == {1}
    # an older event never replaced a newer one, not even for a moment
    for key in model.latest():
        seen = [_order(row) for _, row in _decoded(latest_log) if row.key == key]
        assert seen == sorted(seen), key
    rejected = sorted((letter.value or b"", letter.reason) for letter in letters.letters)
    assert rejected == sorted((r.value or b"", reason) for r, reason in BAD)


def test_a_tombstone_deletes_the_key_of_a_latest_view_until_a_newer_event(
    spark: SparkSession, broker: KafkaBroker, demo_views: dict[str, View], tmp_path: Path
) -> None:
    latest = demo_views["latest"]
    config = pipeline_config(broker, tmp_path / "checkpoints")
    log = RecordLog(broker.bootstrap, latest.changelog_topic)
    status = StatusReader(broker.bootstrap, [latest.name])
    tombstone = Record(b"c1", None, T0 + 10_000)  # deletes at its Kafka timestamp

    def play(records: list[Record]) -> None:
        placed = produce_records(broker.bootstrap, latest.topic, records)
        status.wait_for_offsets(latest.name, end_offsets(placed))

    def newest() -> dict[bytes, bytes]:
        """The newest changelog value per key (b"" for a tombstone)."""
        log.poll()
        return {key: value for key, (_, value) in log.latest().items()}

    try:
        with start_queries(spark, config, [latest]):
            play([Booking("c1", T0, "first").record(), Booking("c2", T0, "kept").record()])
            play([tombstone, Booking("c1", T0 + 5_000, "older than the deletion").record()])
            log.wait_until(lambda: newest().get(b"c1") == b"", "c1 deleted")
            assert decode_event(newest()[b"c2"]).fields["trip"] == "kept"
            play([Booking("c1", T0 + 20_000, "back").record()])
            log.wait_until(lambda: newest().get(b"c1", b"") != b"", "c1 back")
            assert decode_event(newest()[b"c1"]).fields["trip"] == "back"
    finally:
        log.close()
        status.close()
