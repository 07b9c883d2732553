"""The value fields `statefed fields` derives from a registered schema, and the source it
prints for them: pasted into a catalogue, that source is exactly those fields."""

from __future__ import annotations

import json
from typing import Any

import pytest

import schema
from pipeline.avro import AvroSchemas
from pipeline.errors import SourceError
from pipeline.jsonschema import JsonSchemas
from pipeline.shapes import mismatches
from pipeline.wire import Version
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
        "ref: a $ref '#/$defs/Other' that names nothing in the schema",
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


NOT_INCLUDED = {"type": "null", "title": "Not included"}  # as Confluent's Java serializer writes
# a Java object with a nested class and optional fields, as KafkaJsonSchemaSerializer registers
# it: an optional field is a oneOf of that null and its type, a nested object a $ref
GENERATED_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "note": {"oneOf": [NOT_INCLUDED, {"type": "string"}]},
        "qty": {"type": "integer"},
        "shipTo": {"oneOf": [NOT_INCLUDED, {"$ref": "#/definitions/Address"}]},
        "billTo": {"$ref": "#/definitions/Address"},
        "stops": {"type": "array", "items": {"$ref": "#/$defs/Stop"}},
        "parent": {"oneOf": [NOT_INCLUDED, {"$ref": "#"}]},
        "tree": {"$ref": "#/definitions/Node"},
        "loop": {"$ref": "#/definitions/Loop"},
        "elsewhere": {"$ref": "address.json"},
    },
    "required": ["qty"],
    "definitions": {
        "Address": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"city": {"oneOf": [NOT_INCLUDED, {"type": "string"}]}},
        },
        "Node": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "next": {"$ref": "#/definitions/Node"}},
        },
        "Loop": {"$ref": "#/definitions/Round"},
        "Round": {"$ref": "#/definitions/Loop"},
    },
    "$defs": {"Stop": {"type": "object", "properties": {"minutes": {"type": "integer"}}}},
}
ADDRESS = RecordOf("Address", (ValueField("city"),))


def test_json_schema_optional_fields_and_refs_are_followed() -> None:
    derived = derive("JSON", json.dumps(GENERATED_JSON))
    assert derived.fields == (
        ValueField("note"),
        ValueField("qty", FieldType.LONG),
        ValueField("shipTo", ADDRESS),
        ValueField("billTo", ADDRESS),
        ValueField("stops", ListOf(RecordOf("Stop", (ValueField("minutes", FieldType.LONG),)))),
        ValueField("tree", RecordOf("Node", (ValueField("name"),))),
    )
    assert derived.skipped == [
        "tree.next: a recursive record (the $ref '#/definitions/Node')",
        "parent: a recursive record (the $ref '#')",
        "loop: a cycle of $refs (#/definitions/Loop -> #/definitions/Round -> #/definitions/Loop)",
        "elsewhere: a $ref to another schema ('address.json'), not read",
    ]


AVRO_NAMES = {
    "type": "record",
    "name": "Order",
    "namespace": "com.acme",
    "fields": [
        {
            "name": "billTo",
            "type": {
                "type": "record",
                "name": "com.acme.Address",
                "fields": [{"name": "city", "type": "string"}],
            },
        },
        {"name": "shipTo", "type": "Address"},  # com.acme.Address, by the enclosing namespace
        {
            "name": "status",
            "type": {"type": "enum", "name": "Status", "namespace": "x", "symbols": ["OPEN"]},
        },
        {"name": "was", "type": ["null", "x.Status"]},
        {"name": "at", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "atMicros", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    ],
}


def test_avro_names_resolve_in_their_namespace_and_local_timestamps_are_times() -> None:
    status = EnumOf("Status", ("OPEN",))
    assert derive("AVRO", json.dumps(AVRO_NAMES)).fields == (
        ValueField("billTo", ADDRESS),
        ValueField("shipTo", ADDRESS),
        ValueField("status", status),
        ValueField("was", status),
        ValueField("at", FieldType.TIMESTAMP),
        ValueField("atMicros", FieldType.TIMESTAMP),
    )


def test_avro_types_of_one_name_in_two_namespaces_get_two_graphql_names() -> None:
    def address(namespace: str, field: str) -> dict[str, Any]:
        return {
            "type": "record",
            "name": "Address",
            "namespace": namespace,
            "fields": [{"name": field, "type": "string"}],
        }

    document = {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "billTo", "type": address("com.a", "city")},
            {"name": "shipTo", "type": address("com.b", "town")},
        ],
    }
    fields = derive("AVRO", json.dumps(document)).fields
    assert [(f.name, f.type.name) for f in fields] == [  # type: ignore[union-attr]
        ("billTo", "Address"),
        ("shipTo", "ComBAddress"),
    ]


@pytest.mark.parametrize(
    ("schema_type", "document", "registered"),
    [
        ("JSON", GENERATED_JSON, JsonSchemas),
        ("AVRO", AVRO_NAMES, AvroSchemas),
    ],
)
def test_the_printed_fields_pass_the_pipelines_check(
    schema_type: str, document: dict[str, Any], registered: type[JsonSchemas | AvroSchemas]
) -> None:
    text = json.dumps(document)
    fields = derive(schema_type, text).fields
    assert mismatches(fields, registered("s", (Version(1, text, 1),)).shape()) == []
