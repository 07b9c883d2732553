"""Avro, JSON Schema and Protobuf values through a real Schema Registry: records written with two
versions of the subject's schema read as the newest one, and every value the pipeline
cannot read goes to the dead letters with the reason that names why."""

from __future__ import annotations

import dataclasses
import json
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import (
    Schema,
    SchemaRegistryClient,
    record_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import json_format, message_factory
from pyspark.sql import SparkSession

from pipeline import HealthFile, start_queries
from pipeline.avro import not_decoded
from pipeline.errors import SourceError
from pipeline.jsonschema import REASON_NOT_JSON_OBJECT
from pipeline.metrics import PipelineMetrics
from pipeline.protobuf import compile_proto, descriptor_pool_of
from pipeline.protobuf import not_decoded as not_protobuf
from pipeline.run import run_with_restarts
from pipeline.wire import REASON_NOT_WIRE_FORMAT, unknown_schema_id
from runtime.topics import ensure_topics, statefed_topics
from schema import (
    DEMO_DOMAIN,
    EventRow,
    FieldType,
    SubjectStrategy,
    ValueField,
    ValueFormat,
    View,
    ViewKind,
    decode_event,
)
from tests.pipeline.support import (
    PARTITIONS,
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
from tooling.registry import SchemaRegistry

T0 = 1_767_225_600_000
KAFKA_TIME = int(time.time() * 1000) - 3_600_000  # within the topic's retention
Avro = dict[str, Any]
_AT: Avro = {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}
_FIELDS: list[Avro] = [{"name": "trip", "type": "string"}, {"name": "seats", "type": "int"}, _AT]
_NOTE: Avro = {"name": "note", "type": ["null", "string"], "default": None}


def _schema(*fields: Avro) -> str:
    return json.dumps({"type": "record", "name": "Booking", "namespace": "t", "fields": fields})


V1 = _schema(*_FIELDS)
V2 = _schema(*_FIELDS, _NOTE)  # an optional field: BACKWARD compatible
_PROPERTIES = {"trip": {"type": "string"}, "seats": {"type": "integer"}, "at": {"type": "integer"}}


def _object(properties: dict[str, Any]) -> str:
    """A closed object schema (no other properties): adding an optional property to it is
    BACKWARD compatible, as a field with a default is in Avro."""
    doc = {"type": "object", "properties": properties, "additionalProperties": False}
    return json.dumps({**doc, "required": list(_PROPERTIES)})


JSON_V1 = _object(_PROPERTIES)
JSON_V2 = _object({**_PROPERTIES, "note": {"type": ["string", "null"]}})
WRITTEN: list[tuple[str, Avro]] = [
    (V1, {"trip": "ZRH-LIS", "seats": 2, "at": T0}),
    (V1, {"trip": "LIS-OPO", "seats": 1, "at": T0 + 1_000}),
    (V2, {"trip": "OPO-ZRH", "seats": 3, "at": T0 + 2_000, "note": "window"}),
    (V2, {"trip": "GVA-NCE", "seats": 4, "at": T0 + 3_000, "note": None}),
]
CUSTOMERS = ["c1", "c2", "c1", "c3"]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistry]:
    with SchemaRegistry(tmp_path_factory.mktemp("registry")) as running:
        yield running


def _views(topic: str, value_format: ValueFormat = ValueFormat.AVRO) -> list[View]:
    """The demo's latest and history views of bookings, reading `topic`'s values of
    `value_format`."""
    suffix = uuid.uuid4().hex[:10]
    fields = (ValueField("trip"), ValueField("seats", FieldType.INT), ValueField("note"))
    return [
        dataclasses.replace(
            view,
            name=f"{view.name}_{suffix}",
            topic=topic,
            event_time_field="at",
            value_fields=fields,
            value_format=value_format,
        )
        for view in DEMO_DOMAIN
        if view.kind in (ViewKind.LATEST, ViewKind.HISTORY)
    ]


def _order(row: EventRow) -> tuple[str, int, int]:
    return row.key, row.source_partition, row.source_offset


def _avro(client: SchemaRegistryClient, schema: str, topic: str, value: dict[str, object]) -> bytes:
    serialize = AvroSerializer(client, schema, conf={"auto.register.schemas": False})
    data = serialize(value, SerializationContext(topic, MessageField.VALUE))
    assert data is not None
    return data


def _json(client: SchemaRegistryClient, schema: str, topic: str, value: dict[str, object]) -> bytes:
    serialize = JSONSerializer(schema, client, conf={"auto.register.schemas": False})
    data = serialize(value, SerializationContext(topic, MessageField.VALUE))
    assert data is not None
    return data


PROTO = """syntax = "proto3";
package t;
message Booking { string trip = 1; int32 seats = 2; int64 at = 3;%s }
"""
PROTO_V1 = PROTO % ""
PROTO_V2 = PROTO % " optional string note = 4;"


def _protobuf(
    client: SchemaRegistryClient, schema: str, topic: str, value: dict[str, object]
) -> bytes:
    """Confluent's Protobuf serializer, with the class protoc generates from `schema`; it
    registers its schema itself (a base64 descriptor), beside the .proto text registered."""
    pool = descriptor_pool_of(compile_proto("test", 0, schema))
    message_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.Booking"))
    conf = {"auto.register.schemas": True, "use.deprecated.format": False}
    serialize = ProtobufSerializer(message_class, client, conf)
    fields = {k: v for k, v in value.items() if v is not None}
    data = serialize(
        json_format.ParseDict(fields, message_class()),
        SerializationContext(topic, MessageField.VALUE),
    )
    assert data is not None
    return data


# per format: its schemas v1 and v2, its serializer, and a payload its v1 id cannot read
FORMATS = {
    ValueFormat.AVRO: ("AVRO", V1, V2, _avro, b"\xff\xff\xff"),
    ValueFormat.JSON_SCHEMA: ("JSON", JSON_V1, JSON_V2, _json, b"not json"),
    ValueFormat.PROTOBUF: ("PROTOBUF", PROTO_V1, PROTO_V2, _protobuf, b"\x00\xff\xff"),
}


def _records(
    client: SchemaRegistryClient, topic: str, subject: str, value_format: ValueFormat
) -> tuple[list[Record], list[tuple[Record, str]]]:
    """v1 and v2 registered, records of both; bad values with the reasons they must get."""
    schema_type, first, second, serializer, garbage = FORMATS[value_format]
    if value_format is not ValueFormat.PROTOBUF:  # Apicurio cannot compare a .proto text
        client.set_compatibility(subject, "BACKWARD")  # with a base64 descriptor
    v1 = client.register_schema(subject, Schema(first, schema_type))
    v2 = client.register_schema(subject, Schema(second, schema_type))
    assert v2 != v1
    schemas = {V1: first, V2: second}
    good = [
        Record(c.encode(), serializer(client, schemas[s], topic, v), KAFKA_TIME)
        for c, (s, v) in zip(CUSTOMERS, WRITTEN, strict=True)
    ]
    unreadable = not_decoded(subject) + str(v1)
    if value_format is ValueFormat.JSON_SCHEMA:
        unreadable = REASON_NOT_JSON_OBJECT
    if value_format is ValueFormat.PROTOBUF:  # v1 as .proto text: compiled by the pipeline
        unreadable = not_protobuf(subject) + str(v1)
    bad = [
        (Record(b"c1", b"\x00" + struct.pack(">i", v1) + garbage, KAFKA_TIME), unreadable),
        # an id no registry gives (ids start at 1): after a restart asked, a dead letter
        (Record(b"c1", b"\x00" + struct.pack(">i", 0) + b"\x02", KAFKA_TIME),
         unknown_schema_id(subject) + "0"),
        (Record(b"c1", b'{"trip": "json"}', KAFKA_TIME), REASON_NOT_WIRE_FORMAT),
        (Record(b"c1", b"\x00\x00", KAFKA_TIME), REASON_NOT_WIRE_FORMAT),
    ]  # fmt: skip
    return good, bad


@pytest.mark.parametrize("value_format", list(FORMATS), ids=lambda f: f.value)
def test_values_of_two_schema_versions_read_as_the_newest_and_bad_ones_are_dead_letters(
    spark: SparkSession,
    broker: KafkaBroker,
    registry: SchemaRegistry,
    tmp_path: Path,
    value_format: ValueFormat,
) -> None:
    topic = f"test.{uuid.uuid4().hex[:10]}.bookings"
    latest, history = views = _views(topic, value_format)
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, views))
    with SchemaRegistryClient({"url": registry.url}) as client:
        subject = latest.subject
        good, bad = _records(client, topic, subject, value_format)
    history_log = RecordLog(broker.bootstrap, history.changelog_topic)
    status = StatusReader(broker.bootstrap, [history.name])
    letters = DeadLetterReader(broker.bootstrap, topic)
    try:
        with _restarting(spark, broker, registry, tmp_path / "checkpoints", views):
            placed = produce_records(broker.bootstrap, topic, [*good, *(r for r, _ in bad)])
            status.wait_for_offsets(history.name, end_offsets(placed))
            expected = sorted(
                (EventRow(c, v["at"], p, o, {"trip": v["trip"], "seats": v["seats"],
                                             "note": v.get("note")})
                 for c, (_, v), (p, o) in zip(CUSTOMERS, WRITTEN, placed, strict=False)),
                key=_order,
            )  # fmt: skip

            def history_read() -> list[EventRow]:
                rows = [decode_event(value) for _, _, value in history_log.records]
                return sorted(rows, key=_order)

            history_log.wait_until(lambda: history_read() == expected, "history = produced")

            def all_letters() -> bool:
                letters.poll()
                return len(letters.letters) >= len(bad)

            wait_until(all_letters, 60, "a dead letter per bad record", interval_s=0)
    finally:
        history_log.close()
        status.close()
        letters.close()
    rejected = sorted((letter.value or b"", letter.reason) for letter in letters.letters)
    assert rejected == sorted((r.value or b"", reason) for r, reason in bad)


def test_a_view_reading_a_field_the_schema_lacks_is_refused_naming_both(
    spark: SparkSession, broker: KafkaBroker, registry: SchemaRegistry, tmp_path: Path
) -> None:
    topic = f"test.{uuid.uuid4().hex[:10]}.bookings"
    views = [dataclasses.replace(v, value_fields=(ValueField("gate"),)) for v in _views(topic)]
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, views))
    with SchemaRegistryClient({"url": registry.url}) as client:
        client.register_schema(views[0].subject, Schema(V1, "AVRO"))
    config = dataclasses.replace(
        pipeline_config(broker, tmp_path / "checkpoints"), registry_url=registry.url
    )
    with pytest.raises(SourceError, match=rf"\['gate'\].*subject '{topic}-value'.*'trip'"):
        start_queries(spark, config, views)


def test_a_subject_the_registry_lacks_is_refused_naming_it_and_the_fix(
    spark: SparkSession, broker: KafkaBroker, registry: SchemaRegistry, tmp_path: Path
) -> None:
    topic = f"test.{uuid.uuid4().hex[:10]}.bookings"
    config = dataclasses.replace(
        pipeline_config(broker, tmp_path / "checkpoints"), registry_url=registry.url
    )
    with pytest.raises(SourceError, match=rf"subject '{topic}-value'.*register"):
        start_queries(spark, config, _views(topic))


STRAY_ID = 2**31 - 1  # no registry has given it


@contextmanager
def _restarting(
    spark: SparkSession,
    broker: KafkaBroker,
    registry: SchemaRegistry,
    checkpoints: Path,
    views: list[View],
) -> Iterator[PipelineMetrics]:
    """The queries of `views` run by the pipeline's restart loop in a thread until the end
    of the block; its metrics count the restarts."""
    config = dataclasses.replace(pipeline_config(broker, checkpoints), registry_url=registry.url)
    metrics, stop = PipelineMetrics(), threading.Event()
    arguments = (spark, config, tuple(views), stop, HealthFile(None), metrics)
    run = threading.Thread(target=run_with_restarts, args=arguments)
    run.start()
    try:
        yield metrics
    finally:
        stop.set()
        run.join(120)
    assert not run.is_alive(), "the pipeline did not stop"


def _restarts(metrics: PipelineMetrics) -> float:
    return metrics.registry.get_sample_value("statefed_pipeline_query_restarts_total") or 0


def _trips(history_log: RecordLog) -> list[tuple[str, object]]:
    """(key, trip) of every event the history view wrote, in order."""
    rows = [decode_event(value) for _, _, value in history_log.records]
    return sorted((row.key, row.fields.get("trip")) for row in rows)


def _wait_for_a_letter(letters: DeadLetterReader, what: str) -> None:
    def lettered() -> bool:
        letters.poll()
        return bool(letters.letters)

    wait_until(lettered, 90, what, interval_s=0)


def _v1_views(broker: KafkaBroker, topic: str) -> list[View]:
    """The latest and history views of `topic` reading v1's fields only, their topics made."""
    v1_fields = (ValueField("trip"), ValueField("seats", FieldType.INT))
    views = [dataclasses.replace(view, value_fields=v1_fields) for view in _views(topic)]
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, views))
    return views


def _first_v1_record(
    broker: KafkaBroker,
    client: SchemaRegistryClient,
    schema: str,
    topic: str,
    history_log: RecordLog,
) -> None:
    """The first booking, written with v1 `schema`, through the running queries: they run."""
    first = [Record(b"c1", _avro(client, schema, topic, WRITTEN[0][1]), KAFKA_TIME)]
    produce_records(broker.bootstrap, topic, first)
    history_log.wait_until(lambda: len(history_log.records) == 1, "the v1 record")


def test_a_version_registered_while_running_is_read_and_a_stray_id_becomes_a_dead_letter(
    spark: SparkSession, broker: KafkaBroker, registry: SchemaRegistry, tmp_path: Path
) -> None:
    """The queries run with v1 only; v2 (v1 and an optional note, which the views do not
    read) is registered and its records arrive: the pipeline restarts its queries,
    reading v2, and loses none of them. A record whose id is newer than every version but
    is none restarts them too (the same restart, if it fails the batch first), then is a
    dead letter."""
    topic = f"test.{uuid.uuid4().hex[:10]}.bookings"
    latest, history = views = _v1_views(broker, topic)
    history_log = RecordLog(broker.bootstrap, history.changelog_topic)
    letters = DeadLetterReader(broker.bootstrap, topic)
    try:
        with SchemaRegistryClient({"url": registry.url}) as client:
            client.register_schema(latest.subject, Schema(V1, "AVRO"))
            with _restarting(spark, broker, registry, tmp_path / "cp", views) as metrics:
                _first_v1_record(broker, client, V1, topic, history_log)
                client.register_schema(latest.subject, Schema(V2, "AVRO"))
                v2 = [
                    Record(c.encode(), _avro(client, V2, topic, v), KAFKA_TIME)
                    for c, (_, v) in zip(CUSTOMERS[2:], WRITTEN[2:], strict=True)
                ]
                stray = Record(b"c9", b"\x00" + struct.pack(">i", STRAY_ID) + b"\x02", KAFKA_TIME)
                produce_records(broker.bootstrap, topic, [*v2, stray])
                expected = [("c1", "OPO-ZRH"), ("c1", "ZRH-LIS"), ("c3", "GVA-NCE")]
                history_log.wait_until(lambda: _trips(history_log) == expected, "the v2 records")
                _wait_for_a_letter(letters, "the stray record's dead letter")
    finally:
        history_log.close()
        letters.close()
    reasons = [letter.reason for letter in letters.letters]
    assert reasons == [unknown_schema_id(latest.subject) + str(STRAY_ID)]
    assert _restarts(metrics) >= 1  # one restart may read v2 and learn the stray


def test_a_version_reusing_an_older_id_of_another_subject_is_read(
    spark: SparkSession, broker: KafkaBroker, registry: SchemaRegistry, tmp_path: Path
) -> None:
    """A registry gives a schema it already holds under another subject the same id: v2 of
    the view's subject, registered while the queries run, comes with an id lower than v1's.
    Its records are read after a restart, as any new version's, not dead letters."""
    topic = f"test.{uuid.uuid4().hex[:10]}.bookings"
    # schemas of this test only: the module's registry gives others' ids to the same text
    v1, v2 = (json.dumps({**json.loads(schema), "doc": topic}) for schema in (V1, V2))
    latest, history = views = _v1_views(broker, topic)
    history_log = RecordLog(broker.bootstrap, history.changelog_topic)
    letters = DeadLetterReader(broker.bootstrap, topic)
    try:
        with SchemaRegistryClient({"url": registry.url}) as client:
            older = client.register_schema(f"{topic}.archive-value", Schema(v2, "AVRO"))
            newer = client.register_schema(latest.subject, Schema(v1, "AVRO"))
            with _restarting(spark, broker, registry, tmp_path / "cp", views) as metrics:
                _first_v1_record(broker, client, v1, topic, history_log)
                assert client.register_schema(latest.subject, Schema(v2, "AVRO")) == older < newer
                records = [
                    Record(c.encode(), _avro(client, v2, topic, v), KAFKA_TIME)
                    for c, (_, v) in zip(CUSTOMERS[2:], WRITTEN[2:], strict=True)
                ]
                produce_records(broker.bootstrap, topic, records)
                expected = [("c1", "OPO-ZRH"), ("c1", "ZRH-LIS"), ("c3", "GVA-NCE")]
                history_log.wait_until(lambda: _trips(history_log) == expected, "the v2 records")
                letters.poll()
    finally:
        history_log.close()
        letters.close()
    assert letters.letters == []
    assert _restarts(metrics) >= 1


def _record_named(client: SchemaRegistryClient, schema: str, topic: str, value: Avro) -> bytes:
    """Confluent's Avro serializer with RecordNameStrategy: the subject is the record's
    full name."""
    conf = {"auto.register.schemas": False, "subject.name.strategy": record_subject_name_strategy}
    data = AvroSerializer(client, schema, conf=conf)(
        value, SerializationContext(topic, MessageField.VALUE)
    )
    assert data is not None
    return data


def _named_schema(name: str, field: Avro) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "t", "fields": [field]})


def test_on_a_topic_of_several_types_a_view_reads_its_own_and_skips_the_others(
    spark: SparkSession, broker: KafkaBroker, registry: SchemaRegistry, tmp_path: Path
) -> None:
    """Bookings, payments and refunds on one topic, each type its own subject: the views of
    t.Booking read the bookings; payments (an older id) and refunds (registered after the
    start) are skipped once a restart found their ids no version of t.Booking, and so are
    tombstones. Only a value in no wire format is a dead letter."""
    topic = f"test.{uuid.uuid4().hex[:10]}.events"
    strategy = SubjectStrategy.RECORD_NAME
    _, history = views = [
        dataclasses.replace(view, value_subject="t.Booking", subject_strategy=strategy)
        for view in _views(topic)
    ]
    ensure_topics(broker.bootstrap, statefed_topics(PARTITIONS, views))
    payment = _named_schema("Payment", {"name": "amount", "type": "long"})
    refund = _named_schema("Refund", {"name": "reason", "type": "string"})
    history_log = RecordLog(broker.bootstrap, history.changelog_topic)
    letters = DeadLetterReader(broker.bootstrap, topic)
    try:
        with SchemaRegistryClient({"url": registry.url}) as client:
            client.register_schema("t.Payment", Schema(payment, "AVRO"))  # an older id
            client.register_schema("t.Booking", Schema(V2, "AVRO"))
            with _restarting(spark, broker, registry, tmp_path / "cp", views) as metrics:
                client.register_schema("t.Refund", Schema(refund, "AVRO"))  # a newer id
                bookings = [
                    Record(c.encode(), _record_named(client, V2, topic, {"note": None, **v}),
                           KAFKA_TIME)
                    for c, (_, v) in zip(CUSTOMERS, WRITTEN, strict=True)
                ]  # fmt: skip
                others = [
                    Record(b"c1", _record_named(client, payment, topic, {"amount": 5}),
                           KAFKA_TIME),
                    Record(b"c2", _record_named(client, refund, topic, {"reason": "x"}),
                           KAFKA_TIME),
                    Record(b"c1", None, KAFKA_TIME),  # a tombstone: of no type one can tell
                    Record(b"c3", b'{"trip": "json"}', KAFKA_TIME),  # no wire format
                ]  # fmt: skip
                produce_records(broker.bootstrap, topic, [*others, *bookings])
                expected = sorted(
                    (c, v["trip"]) for c, (_, v) in zip(CUSTOMERS, WRITTEN, strict=True)
                )
                history_log.wait_until(
                    lambda: _trips(history_log) == expected, "every booking, and no other"
                )
                _wait_for_a_letter(letters, "the dead letter of the value in no wire format")
    finally:
        history_log.close()
        letters.close()
    assert [letter.reason for letter in letters.letters] == [REASON_NOT_WIRE_FORMAT]
    assert _restarts(metrics) >= 1
