"""A view's value fields against the structure of the newest registered schema: checked at
the pipeline's start, each misfit named by its path (no Spark here)."""

from __future__ import annotations

import dataclasses
import json

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
