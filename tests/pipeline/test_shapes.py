"""A view's value fields against the structure of the newest registered schema: checked at
the pipeline's start, each misfit named by its path (no Spark here)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest

from pipeline.avro import AvroSchemas
from pipeline.errors import SourceError
from pipeline.jsonschema import JsonSchemas
from pipeline.records import Decoding
from pipeline.wire import Version
from schema import (
    DEMO_DOMAIN,
    EnumOf,
    FieldType,
    ListOf,
    RecordOf,
    ValueField,
    ValueFormat,
    View,
)

GEO = {"type": "record", "name": "Geo", "fields": [{"name": "lat", "type": "double"}]}
AVRO = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "geo", "type": ["null", GEO], "default": None},
        {"name": "stops", "type": {"type": "array", "items": "Geo"}},
        {"name": "status", "type": {"type": "enum", "name": "S", "symbols": ["A"]}},
        {"name": "either", "type": ["int", "string"]},
    ],
}
JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "geo": {"oneOf": [{"type": "null"}, {"type": "object", "properties": {"lat": {}}}]},
        "stops": {"type": "array", "items": {"type": "object", "properties": {"lat": {}}}},
        "status": {"type": "string", "enum": ["A"]},
        "either": {"oneOf": [{"type": "integer"}, {"type": "object"}]},
    },
}
GEO_RECORD = RecordOf("Geo", (ValueField("lat", FieldType.FLOAT),))
FITTING = (
    ValueField("name"),
    ValueField("geo", GEO_RECORD),
    ValueField("stops", ListOf(GEO_RECORD)),
    ValueField("status", EnumOf("S", ("A",))),
)


def _view(value_format: ValueFormat, *fields: ValueField) -> View:
    (latest,) = [v for v in DEMO_DOMAIN if v.name == "last_booking"]
    return dataclasses.replace(
        latest, event_time_field=None, value_fields=fields, value_format=value_format
    )


def _registered(value_format: ValueFormat) -> AvroSchemas | JsonSchemas:
    if value_format is ValueFormat.AVRO:
        return AvroSchemas("orders-value", (Version(1, json.dumps(AVRO), 1),))
    return JsonSchemas("orders-value", (Version(1, json.dumps(JSON_SCHEMA), 1),))


FORMATS = [ValueFormat.AVRO, ValueFormat.JSON_SCHEMA]


@pytest.mark.parametrize("value_format", FORMATS, ids=lambda f: f.value)
def test_fields_of_the_schemas_structure_are_accepted(value_format: ValueFormat) -> None:
    view = _view(value_format, *FITTING)
    assert Decoding.of(view, _registered(value_format)).value_fields == FITTING


MISFITS = [
    (ValueField("name", GEO_RECORD), "name is record Geo but a scalar"),
    (ValueField("geo"), "geo is String but "),
    (ValueField("stops", GEO_RECORD), "stops is record Geo but an array"),
    (ValueField("geo", ListOf(FieldType.STRING)), r"geo is \[String\] but "),
    (
        ValueField("geo", RecordOf("Geo", (ValueField("lon", FieldType.FLOAT),))),
        "geo.lon is not in ",
    ),
    (ValueField("stops", ListOf(FieldType.FLOAT)), r"stops\[\] is Float but "),
    (ValueField("either", FieldType.INT), "either is Int but "),
]


@pytest.mark.parametrize("value_format", FORMATS, ids=lambda f: f.value)
@pytest.mark.parametrize(("misfit", "named"), MISFITS, ids=[m[1][:20] for m in MISFITS])
def test_a_field_of_another_structure_stops_the_start_naming_its_path(
    value_format: ValueFormat, misfit: ValueField, named: str
) -> None:
    view = _view(value_format, ValueField("name"), misfit)
    with pytest.raises(SourceError, match=rf"view last_booking: .*subject 'orders-value'.*{named}"):
        Decoding.of(view, _registered(value_format))


# --- JSON Schema as Confluent's Java serializer registers it ------------------------------


def _optional(schema: dict[str, object]) -> dict[str, object]:
    """An optional property as KafkaJsonSchemaSerializer writes a Java object's field."""
    return {"oneOf": [{"type": "null", "title": "Not included"}, schema]}


def _object(properties: dict[str, object], **more: object) -> dict[str, object]:
    return {"type": "object", "additionalProperties": False, "properties": properties, **more}


ADDRESS_SCHEMA = _object({"city": _optional({"type": "string"})})
GENERATED = _object(
    {
        "note": _optional({"type": "string"}),
        "qty": {"type": "integer"},
        "shipTo": _optional({"$ref": "#/definitions/Address"}),
        "billTo": {"$ref": "#/definitions/Address"},
        "stops": _optional({"type": "array", "items": {"$ref": "#/$defs/Stop"}}),
        "tree": {"$ref": "#/definitions/Node"},
        "loop": {"$ref": "#/definitions/Loop"},
        "lost": {"$ref": "#/definitions/Nowhere"},
        "elsewhere": {"$ref": "address.json"},
    },
    title="Order",
    required=["qty"],
    definitions={
        "Address": ADDRESS_SCHEMA,
        "Node": _object(
            {"name": {"type": "string"}, "next": _optional({"$ref": "#/definitions/Node"})}
        ),
        "Loop": {"$ref": "#/definitions/Round"},
        "Round": {"$ref": "#/definitions/Loop"},
    },
    **{"$defs": {"Stop": _object({"city": {"type": "string"}})}},
)
ADDRESS = RecordOf("Address", (ValueField("city"),))
NEXT = RecordOf("Next", (ValueField("name"),))


def _json_schema_view(*fields: ValueField) -> Decoding:
    view = _view(ValueFormat.JSON_SCHEMA, *fields)
    return Decoding.of(view, JsonSchemas("orders-value", (Version(1, json.dumps(GENERATED), 1),)))


def test_optional_and_referenced_json_schema_fields_are_read() -> None:
    fields = (
        ValueField("note"),
        ValueField("qty", FieldType.LONG),
        ValueField("shipTo", ADDRESS),
        ValueField("billTo", ADDRESS),
        ValueField("stops", ListOf(ADDRESS)),
        ValueField("tree", RecordOf("Node", (ValueField("next", NEXT),))),
        ValueField("elsewhere"),  # another subject's schema: not read, any scalar passes
    )
    assert _json_schema_view(*fields).value_fields == fields


JSON_MISFITS = [
    (ValueField("note", ADDRESS), "note is record Address but a scalar"),
    (ValueField("shipTo"), "shipTo is String but an object"),
    (ValueField("billTo", RecordOf("A", (ValueField("zip"),))), "billTo.zip is not in an obj"),
    (ValueField("stops", ListOf(FieldType.STRING)), r"stops\[\] is String but an object"),
    (ValueField("tree", RecordOf("N", (ValueField("next"),))), "tree.next is String but an"),
    (ValueField("loop"), r"loop is String but a cycle of \$refs \(#/definitions/Loop -> "),
    (ValueField("lost"), r"lost is String but a \$ref '#/definitions/Nowhere' that names no"),
    (ValueField("elsewhere", ADDRESS), r"elsewhere is record Address but a \$ref to another"),
]


@pytest.mark.parametrize(("misfit", "named"), JSON_MISFITS, ids=[m[1][:20] for m in JSON_MISFITS])
def test_a_json_schema_field_is_checked_through_its_refs(misfit: ValueField, named: str) -> None:
    with pytest.raises(SourceError, match=rf"view last_booking: .*subject 'orders-value'.*{named}"):
        _json_schema_view(ValueField("note"), misfit)


# --- Avro names ---------------------------------------------------------------------------

CITY = {
    "type": "record",
    "name": "com.acme.Address",
    "fields": [{"name": "city", "type": "string"}],
}
ZIP = {
    "type": "record",
    "name": "Address",
    "namespace": "other",
    "fields": [{"name": "zip", "type": "string"}],
}
NAMED = {
    "type": "record",
    "name": "Order",
    "namespace": "com.acme",
    "fields": [
        {"name": "billTo", "type": CITY},
        {"name": "postTo", "type": ZIP},
        {"name": "shipTo", "type": "Address"},  # com.acme.Address: the enclosing namespace
        {"name": "zipTo", "type": ["null", "other.Address"]},
        {"name": "stops", "type": {"type": "array", "items": "com.acme.Address"}},
    ],
}
ZIP_RECORD = RecordOf("Zip", (ValueField("zip"),))


def _avro_view(schema: Mapping[str, Any], *fields: ValueField) -> Decoding:
    registered = AvroSchemas("orders-value", (Version(1, json.dumps(schema), 1),))
    return Decoding.of(_view(ValueFormat.AVRO, *fields), registered)


def test_an_avro_name_is_resolved_in_its_namespace() -> None:
    fields = (
        ValueField("billTo", ADDRESS),
        ValueField("postTo", ZIP_RECORD),
        ValueField("shipTo", ADDRESS),
        ValueField("zipTo", ZIP_RECORD),
        ValueField("stops", ListOf(ADDRESS)),
    )
    assert _avro_view(NAMED, *fields).value_fields == fields


def test_an_avro_short_name_is_not_taken_from_another_namespace() -> None:
    with pytest.raises(SourceError, match=r"shipTo\.zip is not in record com\.acme\.Address"):
        _avro_view(NAMED, ValueField("shipTo", ZIP_RECORD))


# --- Avro dates and timestamps ------------------------------------------------------------


def _logical(name: str, base: str, logical: str) -> dict[str, object]:
    return {"name": name, "type": {"type": base, "logicalType": logical}}


DATETIMES = {
    "type": "record",
    "name": "Times",
    "fields": [
        _logical("at", "long", "timestamp-millis"),
        _logical("atMicros", "long", "timestamp-micros"),
        _logical("local", "long", "local-timestamp-millis"),
        _logical("localMicros", "long", "local-timestamp-micros"),
        _logical("day", "int", "date"),
        {"name": "maybe", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "plain", "type": "long"},
    ],
}
DATETIME_FIELDS = ["at", "atMicros", "local", "localMicros", "day", "maybe"]


@pytest.mark.parametrize("name", DATETIME_FIELDS)
@pytest.mark.parametrize("read_as", [FieldType.TIMESTAMP, FieldType.DATE, FieldType.STRING])
def test_an_avro_date_or_timestamp_reads_as_a_time_or_text(name: str, read_as: FieldType) -> None:
    field = ValueField(name, read_as)
    assert _avro_view(DATETIMES, field).value_fields == (field,)


NOT_TIMES = [FieldType.LONG, FieldType.INT, FieldType.FLOAT, FieldType.DECIMAL, FieldType.BOOLEAN]


@pytest.mark.parametrize("name", DATETIME_FIELDS)
@pytest.mark.parametrize("read_as", [*NOT_TIMES, EnumOf("E", ("A",))], ids=str)
def test_an_avro_date_or_timestamp_read_as_a_number_stops_the_start(
    name: str, read_as: FieldType | EnumOf
) -> None:
    with pytest.raises(SourceError, match=rf"{name} is \w+ but an Avro [a-z-]+, which it would "):
        _avro_view(DATETIMES, ValueField(name, read_as))


def test_a_plain_avro_long_still_reads_as_any_scalar() -> None:
    fields = tuple(ValueField("plain", t) for t in NOT_TIMES)
    assert _avro_view(DATETIMES, *fields).value_fields == fields


@pytest.mark.parametrize("name", ["at", "atMicros", "local", "localMicros"])
def test_an_avro_timestamp_event_time_is_read_as_a_timestamp(name: str) -> None:
    registered = AvroSchemas("times-value", (Version(1, json.dumps(DATETIMES), 1),))
    assert registered.is_timestamp(name) and not registered.is_timestamp("plain")
