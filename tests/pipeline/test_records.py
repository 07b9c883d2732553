"""Which input rows are usable and how they decode, on static DataFrames in the shared
Spark session."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from pipeline import PipelineConfig
from pipeline.avro import AvroSchemas
from pipeline.job import read_topic
from pipeline.records import (
    REASON_BAD_UTF8,
    REASON_BAD_VALUE,
    REASON_EMPTY_KEY,
    REASON_NO_KEY,
    REASON_NO_TIMESTAMP,
    Decoding,
    bad_event_time,
    event_time_ahead,
    keyed_events,
    missing_event_time,
    not_finite,
    not_utf8,
    rejected_records,
)
from pipeline.wire import Version
from schema import EnumOf, FieldType, ListOf, RecordOf, ValueField

WHEN = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def _kafka_schema(spark: SparkSession) -> StructType:
    """The columns of the pipeline's source, Spark's Kafka connector (load() connects to
    nothing): the rows below are what it would read."""
    return read_topic(spark, PipelineConfig(bootstrap="127.0.0.1:1"), "words").schema


def _raw(spark: SparkSession, key: bytes | None, when: datetime | None = WHEN) -> DataFrame:
    row = (key, b"v", "words", 0, 7, when, 0 if when else -1)
    return spark.createDataFrame([row], _kafka_schema(spark))


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


BOOKINGS = Decoding(
    event_time_field="timestamp",
    value_fields=(
        ValueField("trip"),
        ValueField("seats", FieldType.INT),
        ValueField("price", FieldType.FLOAT),
        ValueField("paid", FieldType.BOOLEAN),
    ),
)


def _valued(spark: SparkSession, *values: bytes | None, when: datetime | None = WHEN) -> DataFrame:
    rows = [(b"c1", v, "bookings", 0, i, when, 0 if when else -1) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, _kafka_schema(spark))


def test_event_time_and_value_fields_come_from_the_json_value(spark: SparkSession) -> None:
    raw = _valued(
        spark,
        b'{"timestamp": 1767225600000, "trip": "LIS", "seats": 2, "price": 9.5, "paid": true}',
        b'{"timestamp": 1.7e12, "trip": 7, "seats": "many", "paid": 1}',
        b'{"timestamp": 1.7e12, "trip": "OPO", "paid": "yes"}',
        b'{"timestamp": 1.7e12, "trip": "FAO", "paid": false}',
        when=None,  # the Kafka timestamp is not this view's event time
    )
    assert rejected_records(raw, [BOOKINGS]).count() == 0
    events = [e.asDict(recursive=True) for e in keyed_events(raw, BOOKINGS).collect()]
    assert [(e["key"], e["event_ms"], e["partition"], e["offset"]) for e in events] == [
        ("c1", 1_767_225_600_000, 0, 0),
        *(("c1", 1_700_000_000_000, 0, offset) for offset in (1, 2, 3)),
    ]
    assert [e["fields"] for e in events] == [
        {"trip": "LIS", "seats": 2, "price": 9.5, "paid": True},
        # a number where a string is expected is its text; a wrong type or no field is null
        {"trip": "7", "seats": None, "price": None, "paid": None},
        {"trip": "OPO", "seats": None, "price": None, "paid": None},  # no JSON Boolean
        {"trip": "FAO", "seats": None, "price": None, "paid": False},
    ]


def test_each_unusable_value_gets_its_reason(spark: SparkSession) -> None:
    cases = {
        b"": REASON_BAD_VALUE,
        b"not json": REASON_BAD_VALUE,
        b"[1]": REASON_BAD_VALUE,
        b"\xff{}": REASON_BAD_VALUE,
        b'{"trip": "LIS"}': missing_event_time("timestamp"),
        b'{"timestamp": null}': missing_event_time("timestamp"),
        b'{"timestamp": "soon"}': bad_event_time("timestamp"),
        b'{"timestamp": 1.5}': bad_event_time("timestamp"),
        b'{"timestamp": -1}': bad_event_time("timestamp"),
        b'{"timestamp": 99999999999999999}': bad_event_time("timestamp"),
    }
    raw = _valued(spark, *cases)
    assert keyed_events(raw, BOOKINGS).count() == 0
    got = {r["value"]: r["reason"] for r in rejected_records(raw, [BOOKINGS]).collect()}
    assert got == cases


def test_an_event_time_too_far_after_its_records_timestamp_is_a_dead_letter(
    spark: SparkSession,
) -> None:
    """Measured from the record's own Kafka timestamp, not the pipeline's clock: a view and
    the dead-letter query (and every replay) judge a record alike."""
    ahead = dataclasses.replace(BOOKINGS, max_ahead_ms=60_000)
    at = int(WHEN.timestamp() * 1000)
    on_the_bound, past_it = (b'{"timestamp": %d}' % (at + ms) for ms in (60_000, 60_001))
    long_ago = b'{"timestamp": %d}' % (at - 86_400_000)
    raw = _valued(spark, on_the_bound, past_it, long_ago)
    got = {r["value"]: r["reason"] for r in rejected_records(raw, [ahead]).collect()}
    assert got == {past_it: event_time_ahead("timestamp", 60_000)}
    assert sorted(e["event_ms"] for e in keyed_events(raw, ahead).collect()) == [
        at - 86_400_000,
        at + 60_000,
    ]
    assert keyed_events(raw, BOOKINGS).count() == 3  # unbounded: every one


NUMBERS = Decoding(
    value_fields=(
        ValueField("price", FieldType.FLOAT),
        ValueField("seats", FieldType.INT),
        ValueField("total", FieldType.LONG),
    )
)


def test_a_float_field_that_is_not_finite_is_a_dead_letter_an_int_or_long_cannot_be_one(
    spark: SparkSession,
) -> None:
    not_finite_values = [
        b'{"price": "NaN"}',
        b'{"price": "Infinity", "seats": 1}',
        b'{"price": "-Infinity"}',
        b'{"price": "inf"}',
    ]
    fine = [
        b'{"price": 1.5, "seats": "NaN", "total": "Infinity"}',
        # Spark's reader gives a bare NaN or 1e400 as quoted text: no number, so null
        b'{"price": NaN, "seats": Infinity, "total": -Infinity}',
        b'{"price": 1e400}',
    ]
    raw = _valued(spark, *not_finite_values, *fine)
    got = {r["value"]: r["reason"] for r in rejected_records(raw, [NUMBERS]).collect()}
    assert got == dict.fromkeys(not_finite_values, not_finite("price"))
    events = [e["fields"].asDict() for e in keyed_events(raw, NUMBERS).collect()]
    assert events == [
        {"price": 1.5, "seats": None, "total": None},
        {"price": None, "seats": None, "total": None},
        {"price": None, "seats": None, "total": None},
    ]


LEG = RecordOf("Leg", (ValueField("city"), ValueField("fare", FieldType.FLOAT)))
NESTED_NUMBERS = Decoding(
    value_fields=(
        ValueField("fares", ListOf(FieldType.FLOAT)),
        ValueField("leg", LEG),
        ValueField("legs", ListOf(LEG)),
        ValueField("seats", ListOf(FieldType.INT)),
    )
)


def test_a_float_that_is_not_finite_in_a_list_or_record_is_a_dead_letter_naming_the_field(
    spark: SparkSession,
) -> None:
    """The changelog's JSON cannot hold one either: it would read as null."""
    cases = {
        b'{"fares": [1.5, "NaN"]}': not_finite("fares"),
        b'{"leg": {"city": "Porto", "fare": "Infinity"}}': not_finite("leg"),
        b'{"legs": [{"fare": 2.0}, {"fare": "-Infinity"}]}': not_finite("legs"),
    }
    fine = b'{"fares": [1.5, null], "leg": {"fare": 3}, "legs": [null], "seats": ["NaN"]}'
    raw = _valued(spark, *cases, fine)
    got = {r["value"]: r["reason"] for r in rejected_records(raw, [NESTED_NUMBERS]).collect()}
    assert got == cases
    events = [
        e["fields"].asDict(recursive=True) for e in keyed_events(raw, NESTED_NUMBERS).collect()
    ]
    assert events == [
        {"fares": [1.5, None], "leg": {"city": None, "fare": 3.0}, "legs": [None], "seats": [None]}
    ]


def test_a_tombstone_is_no_dead_letter_a_deletion_where_views_delete_skipped_elsewhere(
    spark: SparkSession,
) -> None:
    deleting = dataclasses.replace(BOOKINGS, tombstones=True)
    raw = _valued(spark, None, b'{"timestamp": 1767225600000, "trip": "LIS"}')
    for decoding in (BOOKINGS, deleting, Decoding()):
        assert rejected_records(raw, [decoding]).count() == 0
    assert [e["value"] for e in keyed_events(raw, BOOKINGS).collect()] == [raw.collect()[1][1]]
    events = [e.asDict(recursive=True) for e in keyed_events(raw, deleting).collect()]
    assert [(e["deleted"], e["event_ms"], e["fields"]["trip"]) for e in events] == [
        (True, int(WHEN.timestamp() * 1000), None),  # at its Kafka timestamp
        (False, 1_767_225_600_000, "LIS"),
    ]
    assert keyed_events(raw, Decoding()).count() == 2  # a view ignoring values counts it


def test_a_topic_read_two_ways_rejects_what_either_view_cannot_use(spark: SparkSession) -> None:
    kafka_time = Decoding()
    json_time = Decoding(event_time_field="timestamp")
    fine = _valued(spark, b'{"timestamp": 5}')
    no_json = _valued(spark, b"plain")
    no_kafka_time = _valued(spark, b'{"timestamp": 5}', when=None)
    assert rejected_records(fine, [kafka_time, json_time]).count() == 0
    for raw, reason in ((no_json, REASON_BAD_VALUE), (no_kafka_time, REASON_NO_TIMESTAMP)):
        rows = rejected_records(raw, [kafka_time, json_time]).collect()
        assert [r["reason"] for r in rows] == [reason]
    # a view on the Kafka timestamp ignores the value
    assert keyed_events(no_json, kafka_time).count() == 1


ADDRESS = RecordOf("Address", (ValueField("city"), ValueField("zipCode", source="zip_code")))
SHAPES = Decoding(
    value_fields=(
        ValueField("big", FieldType.LONG),
        ValueField("price", FieldType.DECIMAL),
        ValueField("at", FieldType.TIMESTAMP),
        ValueField("day", FieldType.DATE),
        ValueField("status", EnumOf("Status", ("PAID", "OPEN"))),
        ValueField("tags", ListOf(FieldType.STRING)),
        ValueField("address", ADDRESS),
        ValueField("stops", ListOf(ADDRESS)),
        ValueField("orderId", FieldType.INT, source="order_id"),
    )
)


def test_nested_and_logical_types_are_stored_as_the_changelog_keeps_them(
    spark: SparkSession,
) -> None:
    raw = _valued(
        spark,
        b'{"big": 9007199254740993, "price": 12.50, "at": "2026-01-02T03:04:05.678Z",'
        b' "day": "2026-01-02", "status": "PAID", "tags": ["a", null, 3],'
        b' "address": {"city": "Lisbon", "zip_code": "1100"},'
        b' "stops": [{"city": "Porto"}, null], "order_id": 7}',
        b'{"at": 1767225600000, "price": "0.1000000000000000055511151231257827",'
        b' "status": "paid", "tags": "no list", "address": 5,'
        b' "stops": [], "order_id": 3000000000}',
    )
    events = [e.asDict(recursive=True) for e in keyed_events(raw, SHAPES).collect()]
    assert [e["fields"] for e in events] == [
        {
            "big": 9_007_199_254_740_993,
            "price": "12.5",  # a JSON number: read as a double is
            "at": 1_767_323_045_678,
            "day": "2026-01-02",
            "status": "PAID",
            "tags": ["a", None, "3"],
            "address": {"city": "Lisbon", "zipCode": "1100"},
            "stops": [{"city": "Porto", "zipCode": None}, None],
            "orderId": 7,
        },
        {
            "big": None,
            "price": "0.1000000000000000055511151231257827",  # text: every digit kept
            "at": 1_767_225_600_000,
            "day": None,
            "status": None,  # no symbol of the enum (they are case-sensitive)
            "tags": None,
            "address": None,
            "stops": [],
            "orderId": None,  # past 32 bits: no GraphQL Int, so stored as missing
        },
    ]


NOTE_SCHEMA = {
    "type": "record",
    "name": "Note",
    "fields": [
        {"name": "trip", "type": "string"},
        {"name": "note", "type": "bytes"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {
            "name": "stop",
            "type": {
                "type": "record",
                "name": "Stop",
                "fields": [{"name": "city", "type": "string"}],
            },
        },
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
        },
    ],
}
NOTES = Decoding(
    value_fields=(
        ValueField("trip"),
        ValueField("note"),  # Avro bytes, read as a String
        ValueField("tags", ListOf(FieldType.STRING)),
        ValueField("stop", RecordOf("Stop", (ValueField("city"),))),
        ValueField("price", FieldType.DECIMAL),  # Avro bytes too, but a decimal's
    ),
    registered=AvroSchemas("notes-value", (Version(7, json.dumps(NOTE_SCHEMA), 1),)),
)


def _avro_bytes(data: bytes) -> bytes:
    """An Avro string or bytes: its length (a zigzag varint, one byte below 64), the bytes."""
    assert len(data) < 64
    return bytes([2 * len(data)]) + data


def _note(trip: bytes, note: bytes, tags: list[bytes], city: bytes = b"Porto") -> bytes:
    """A `Note` in the wire format, with any bytes where Avro wants UTF-8 (no encoder
    writes them, but nothing stops a producer of its own)."""
    block = (bytes([2 * len(tags)]) + b"".join(map(_avro_bytes, tags)) if tags else b"") + b"\0"
    price = _avro_bytes((1250).to_bytes(2, "big"))  # 12.50
    fields = _avro_bytes(trip) + _avro_bytes(note) + block + _avro_bytes(city) + price
    return b"\0" + (7).to_bytes(4, "big") + fields


def test_avro_text_that_is_not_utf8_is_a_dead_letter_naming_the_field(
    spark: SparkSession,
) -> None:
    good = _note(b"LIS", b"window seat", [b"a"])
    bad = {
        _note(b"\xc3\x28", b"ok", []): not_utf8("trip"),  # Spark's Avro decoder checks none
        _note(b"LIS", b"\xff\xfe", []): not_utf8("note"),  # Avro bytes, read as a String
        _note(b"LIS", b"ok", [b"a", b"\xff"]): not_utf8("tags"),
        _note(b"LIS", b"ok", [], city=b"\xed\xa0\x80"): not_utf8("stop"),  # a surrogate
    }
    raw = _valued(spark, good, *bad)
    # as the changelog writer collects a batch: invalid UTF-8 would raise here, every replay
    events = keyed_events(raw, NOTES).toArrow().to_pylist()
    assert [e["fields"] for e in events] == [
        {
            "trip": "LIS",
            "note": "window seat",
            "tags": ["a"],
            "stop": {"city": "Porto"},
            "price": "12.50",
        }
    ]
    got = {r["value"]: r["reason"] for r in rejected_records(raw, [NOTES]).collect()}
    assert got == bad


def _trip(schema_id: int, trip: bytes, *more: bytes) -> bytes:
    """A record of a trip (and any further strings) in the wire format, as schema `schema_id`."""
    fields = b"".join(_avro_bytes(text) for text in (trip, *more))
    return b"\0" + schema_id.to_bytes(4, "big") + fields


def test_a_version_the_newest_cannot_read_is_a_dead_letter_naming_both_and_why(
    spark: SparkSession,
) -> None:
    """Under a FORWARD or NONE rule a new version may add a field without a default: the
    records written before it cannot be read as it (Avro's resolution needs the default)."""
    trips = {"type": "record", "name": "Trip", "fields": [{"name": "trip", "type": "string"}]}
    gated = {**trips, "fields": [*trips["fields"], {"name": "gate", "type": "string"}]}
    registered = AvroSchemas(
        "trips-value", (Version(7, json.dumps(trips), 1), Version(8, json.dumps(gated), 2))
    )
    decoding = Decoding(value_fields=(ValueField("trip"),), registered=registered)
    older, newer = _trip(7, b"LIS"), _trip(8, b"OPO", b"A1")
    raw = _valued(spark, older, newer)
    assert [e["fields"]["trip"] for e in keyed_events(raw, decoding).collect()] == ["OPO"]
    assert [(r["value"], r["reason"]) for r in rejected_records(raw, [decoding]).collect()] == [
        (
            older,
            "value of version 1 (schema id 7), which the newest, version 2, cannot read "
            "(reader_field_missing_default_value: gate): give the new field a default, or "
            "keep the subject's compatibility BACKWARD",
        )
    ]


def test_a_decoding_reads_the_value_where_the_view_says_it_does() -> None:
    """The catalogue's check of a shared topic and the produce mutation go by
    `View.reads_value`; the pipeline by its decoding: they agree."""
    from schema import CATALOGUE
    from tests.differential.views import CATALOGUE as DIFFERENTIAL
    from tests.orders import ORDER_VIEWS

    for view in (*CATALOGUE, *ORDER_VIEWS, *DIFFERENTIAL):
        assert Decoding.of(view).needs_value == view.reads_value, view.name
