"""The value fields `statefed fields` derives from a registered schema, and the source it
prints for them: pasted into a catalogue, that source is exactly those fields."""

from __future__ import annotations

import json
from typing import Any

import pytest

import schema
from pipeline.errors import SourceError
from schema import EnumOf, FieldType, ListOf, RecordOf, ValueField
from tests.conformance.test_matrix import _PROTO, _avro_schema, _json_schema
from tests.conformance.views import FIELDS
from tooling.registeredfields import derive, render

SCHEMAS = {
    "AVRO": _avro_schema(2),
    "JSON": _json_schema(2),
    "PROTOBUF": _PROTO % "\n  optional string added = 17;",
}


def _pasted(source: str) -> Any:
    """What the printed `value_fields=(...),` gives in a catalogue."""
    namespace = {name: getattr(schema, name) for name in schema.__all__}
    exec(f"fields = dict({source})", namespace)
    return namespace["fields"]["value_fields"]


@pytest.mark.parametrize("schema_type", list(SCHEMAS))
def test_the_printed_source_is_the_derived_fields(schema_type: str) -> None:
    derived = derive(schema_type, SCHEMAS[schema_type])
    assert derived.skipped == []
    assert _pasted(render(derived)) == derived.fields


def test_an_avro_schema_gives_the_fields_the_matrix_declares_by_hand() -> None:
    assert derive("AVRO", SCHEMAS["AVRO"]).fields == FIELDS


@pytest.mark.parametrize("schema_type", list(SCHEMAS))
def test_every_schema_gives_each_shape_its_type(schema_type: str) -> None:
    fields = {f.name: f for f in derive(schema_type, SCHEMAS[schema_type]).fields}
    assert fields["orderId"] == ValueField("orderId", FieldType.LONG, source="order_id")
    assert fields["at"].type is FieldType.TIMESTAMP
    assert isinstance(fields["status"].type, EnumOf)
    stops = fields["stops"].type
    assert isinstance(stops, ListOf) and isinstance(stops.item, RecordOf)
    address = fields["address"].type
    assert isinstance(address, RecordOf)
    assert [f.name for f in address.fields] == ["city", "zipCode", "geo"]


def test_what_no_field_can_show_is_left_out_and_named() -> None:
    record = (
        '{"type": "record", "name": "R", "fields": ['
        '{"name": "tags", "type": {"type": "map", "values": "string"}},'
        '{"name": "either", "type": ["int", "string"]},'
        '{"name": "ok", "type": "int"}]}'
    )
    derived = derive("AVRO", record)
    assert derived.fields == (ValueField("ok", FieldType.INT),)
    assert derived.skipped == ["tags: an Avro map", "either: a union of several types"]
    assert render(derived).splitlines()[:2] == [
        "# left out: tags: an Avro map",
        "# left out: either: a union of several types",
    ]


def test_names_that_collide_enums_graphql_cannot_name_and_empty_records_are_handled() -> None:
    properties = {
        "order_id": {"type": "integer"},
        "orderId": {"type": "string"},
        "state": {"type": "string", "enum": ["new", "in-progress"]},
        "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        "untyped": {"properties": {"a": {"type": "string"}}},
        "ref": {"$ref": "#/$defs/Other"},
    }
    derived = derive("JSON", json.dumps({"type": "object", "properties": properties}))
    assert derived.fields == (
        ValueField("orderId", FieldType.LONG, source="order_id"),
        ValueField("state"),  # its symbols are no GraphQL enum values: a String
        ValueField("untyped", RecordOf("Untyped", (ValueField("a"),))),
    )
    assert derived.skipped == [
        "orderId: its GraphQL name 'orderId' is another field's",
        "meta: no field to show",
        "ref: a $ref (not followed yet)",
    ]


PROTO_EDGES = """syntax = "proto3";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
message Node {
  string name = 1;
  Node parent = 2;
  google.protobuf.StringValue label = 3;
  google.protobuf.Int64Value size = 4;
  google.protobuf.Struct extra = 5;
  uint64 big = 6;
  bytes blob = 7;
}
"""


def test_protobuf_recursion_wrappers_and_unsigned_longs() -> None:
    derived = derive("PROTOBUF", PROTO_EDGES, "nodes-value", 3)
    assert derived.fields == (
        ValueField("name"),
        ValueField("label"),
        ValueField("size", FieldType.LONG),
        ValueField("big", FieldType.DECIMAL),
    )
    assert derived.skipped == [
        "parent: a recursive message",
        "extra: a google.protobuf.Struct",
        "blob: bytes",
    ]


def test_a_proto_that_does_not_compile_is_named_by_its_subject_and_id() -> None:
    with pytest.raises(SourceError, match=r"subject 'nodes-value', id 3, does not compile"):
        derive("PROTOBUF", "message {", "nodes-value", 3)


@pytest.mark.parametrize(
    ("schema_type", "text", "said"),
    [
        ("AVRO", '"string"', 'an Avro record\'s fields, and the schema is "string"'),
        ("AVRO", '["null", "string"]', 'and the schema is ["null", "string"]'),
        ("JSON", "true", "a JSON Schema object's fields, and the schema is true"),
        ("PROTOBUF", 'syntax = "proto3";\n', "a Protobuf message's fields, and the schema is a"),
    ],
)
def test_a_schema_with_no_fields_to_read_says_so(schema_type: str, text: str, said: str) -> None:
    with pytest.raises(ValueError, match="value fields are read from ") as refused:
        derive(schema_type, text, "plain-value", 1)
    assert said in str(refused.value) and "names no value_fields" in str(refused.value)
