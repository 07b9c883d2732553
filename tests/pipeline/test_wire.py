"""Values of each registry format that are not in the wire format, or carry an id no
registry gives, on static DataFrames in the shared Spark session (ANSI mode, as the
pipeline runs): dead letters with the documented reason, never a failed batch."""

from __future__ import annotations

import dataclasses
import io
import json
import math
from collections.abc import Callable
from datetime import UTC, datetime

import avro.io
import avro.schema
import pytest
from google.protobuf import message_factory
from pyspark.sql import DataFrame, SparkSession

from pipeline import PipelineConfig
from pipeline.avro import AvroSchemas
from pipeline.job import read_topic
from pipeline.jsonschema import JsonSchemas
from pipeline.protobuf import ProtobufSchemas, descriptor_pool_of, descriptor_set
from pipeline.records import Decoding, keyed_events, not_finite, rejected_records
from pipeline.wire import (
    REASON_NOT_WIRE_FORMAT,
    RegisteredSchemas,
    Version,
    unknown_schema_id,
    unseen_schema_id,
)
from schema import FieldType, ValueField

SUBJECT = "bookings-value"
ID = 7
AT = 1_767_225_600_000
AVRO = json.dumps(
    {
        "type": "record",
        "name": "Booking",
        "fields": [
            {"name": "trip", "type": "string"},
            {"name": "price", "type": "double"},
            {"name": "at", "type": "long"},
        ],
    }
)
JSON_SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"trip": {"type": "string"}, "price": {"type": "number"}, "at": {}},
    }
)
PROTO = 'syntax = "proto3";\nmessage Booking { string trip = 1; double price = 2; int64 at = 3; }\n'
FIELDS = (ValueField("trip"), ValueField("price", FieldType.FLOAT))
HEADER = b"\x00" + ID.to_bytes(4, "big")


def _avro(trip: str, price: float) -> bytes:
    out = io.BytesIO()
    writer = avro.io.DatumWriter(avro.schema.parse(AVRO))
    writer.write({"trip": trip, "price": price, "at": AT}, avro.io.BinaryEncoder(out))
    return HEADER + out.getvalue()


_TEXTS = {math.inf: "Infinity", -math.inf: "-Infinity"}


def _json(trip: str, price: float) -> bytes:
    # Spark reads a bare NaN (or 1e400) as null, the text "NaN" (or "Infinity") as the number
    number = price if math.isfinite(price) else _TEXTS.get(price, "NaN")
    return HEADER + json.dumps({"trip": trip, "price": number, "at": AT}).encode()


def _protobuf(trip: str, price: float) -> bytes:
    pool = descriptor_pool_of(descriptor_set(SUBJECT, ID, PROTO))
    booking = message_factory.GetMessageClass(pool.FindMessageTypeByName("Booking"))
    return HEADER + b"\x00" + booking(trip=trip, price=price, at=AT).SerializeToString()


FORMATS: dict[str, tuple[RegisteredSchemas, Callable[[str, float], bytes]]] = {
    "avro": (AvroSchemas(SUBJECT, (Version(ID, AVRO, 1),)), _avro),
    "json_schema": (JsonSchemas(SUBJECT, (Version(ID, JSON_SCHEMA, 1),)), _json),
    "protobuf": (ProtobufSchemas(SUBJECT, (Version(ID, PROTO, 1),)), _protobuf),
}
# each byte 2 >= 0x80 (past a signed int's range as bytes 2-5 of the header)
NOT_FRAMED = [
    b"\x0a\x80\x01" + b"t" * 128,  # raw Protobuf: a first field of 128 bytes
    "été".encode(),
    b"\x00\x80",  # shorter than the header
    b"\xff\xff\xff\xff\xff\xff",
]
FRAMED_PAST_INT = [b"\x00\x80\x00\x00\x00\x00", b"\x00\xff\xff\xff\xff\x00"]


def _values(spark: SparkSession, values: list[bytes]) -> DataFrame:
    kafka = read_topic(spark, PipelineConfig(bootstrap="127.0.0.1:1"), "bookings").schema
    when = datetime(2026, 1, 2, tzinfo=UTC)
    rows = [(b"c1", value, "bookings", 0, i, when, 0) for i, value in enumerate(values)]
    return spark.createDataFrame(rows, kafka)


def _decoding(registered: RegisteredSchemas, shared: bool = False) -> Decoding:
    return Decoding(value_fields=FIELDS, registered=registered, shared=shared)


@pytest.mark.parametrize("value_format", list(FORMATS))
def test_values_not_in_the_wire_format_or_past_an_int_id_are_dead_letters(
    spark: SparkSession, value_format: str
) -> None:
    registered, encode = FORMATS[value_format]
    good = encode("ZRH-LIS", 9.5)
    raw = _values(spark, [good, *NOT_FRAMED, *FRAMED_PAST_INT])
    decoding = _decoding(registered)
    reasons = {r["value"]: r["reason"] for r in rejected_records(raw, [decoding]).collect()}
    unknown = unknown_schema_id(SUBJECT)
    assert reasons == {
        **dict.fromkeys(NOT_FRAMED, REASON_NOT_WIRE_FORMAT),
        FRAMED_PAST_INT[0]: unknown + str(2**31),
        FRAMED_PAST_INT[1]: unknown + str(2**32 - 1),
    }
    (event,) = keyed_events(raw, decoding).collect()
    assert event["fields"].asDict() == {"trip": "ZRH-LIS", "price": 9.5}


def test_on_a_shared_topic_an_id_past_an_int_is_another_type_skipped(
    spark: SparkSession,
) -> None:
    registered, _ = FORMATS["avro"]
    raw = _values(spark, [*NOT_FRAMED, *FRAMED_PAST_INT])
    decoding = _decoding(registered, shared=True)
    reasons = {r["value"]: r["reason"] for r in rejected_records(raw, [decoding]).collect()}
    assert reasons == dict.fromkeys(NOT_FRAMED, REASON_NOT_WIRE_FORMAT)
    assert keyed_events(raw, decoding).count() == 0


@pytest.mark.parametrize("shared", [False, True], ids=["own topic", "shared topic"])
def test_an_id_lower_than_the_versions_asks_the_registry_once_and_a_stray_is_rejected(
    spark: SparkSession, shared: bool
) -> None:
    """An id below the subject's (a registry reuses another subject's id for the same schema)
    may be a version registered since the start: the batch fails naming it, for the
    pipeline to ask; once known to be no version, a dead letter (skipped on a shared topic)."""
    registered = AvroSchemas(SUBJECT, (Version(ID, AVRO, 1),))
    lower = b"\x00" + (ID - 4).to_bytes(4, "big") + b"\x02"
    raw = _values(spark, [lower])
    with pytest.raises(Exception) as failed:  # Spark's error, raised by the JVM
        rejected_records(raw, [_decoding(registered, shared)]).collect()
    assert unseen_schema_id(failed.value) == (SUBJECT, ID - 4)
    strayed = _decoding(dataclasses.replace(registered, strays=frozenset({ID - 4})), shared)
    reasons = [r["reason"] for r in rejected_records(raw, [strayed]).collect()]
    assert reasons == ([] if shared else [unknown_schema_id(SUBJECT) + str(ID - 4)])
    assert keyed_events(raw, strayed).count() == 0


@pytest.mark.parametrize("value_format", list(FORMATS))
def test_a_float_field_that_is_not_finite_is_a_dead_letter(
    spark: SparkSession, value_format: str
) -> None:
    registered, encode = FORMATS[value_format]
    bad = [encode("nan", math.nan), encode("inf", math.inf), encode("-inf", -math.inf)]
    raw = _values(spark, [encode("max", 1.7976931348623157e308), *bad])
    decoding = _decoding(registered)
    reasons = {r["value"]: r["reason"] for r in rejected_records(raw, [decoding]).collect()}
    assert reasons == dict.fromkeys(bad, not_finite("price"))
    (event,) = keyed_events(raw, decoding).collect()
    assert event["fields"].asDict() == {"trip": "max", "price": 1.7976931348623157e308}
