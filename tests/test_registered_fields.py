"""The value fields `statefed fields` derives from a registered schema, and the source it
prints for them: pasted into a catalogue, that source is exactly those fields."""

from __future__ import annotations

from typing import Any

import pytest

import schema
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
