"""The catalogue of the conformance matrix: one latest view per value format and key type,
each exposing the same value fields, one per schema shape (test_matrix.py). The record key
has a field of each type a record key field can have."""

from __future__ import annotations

from schema import (
    EnumOf,
    FieldType,
    KeyField,
    KeyType,
    ListOf,
    RecordKey,
    RecordOf,
    ValueField,
    ValueFormat,
    View,
    ViewKind,
)

STATUS = EnumOf("Status", ("OPEN", "PAID", "SHIPPED"))
GEO = RecordOf("Geo", (ValueField("lat", FieldType.FLOAT), ValueField("lon", FieldType.FLOAT)))
ADDRESS = RecordOf(
    "Address",
    (ValueField("city"), ValueField("zipCode", source="zip_code"), ValueField("geo", GEO)),
)
STOP = RecordOf("Stop", (ValueField("city"), ValueField("minutes", FieldType.INT)))

# one field per shape; `added` is in the schemas' v2 only (v1 records read it as null)
FIELDS = (
    ValueField("name"),
    ValueField("count", FieldType.INT),
    ValueField("big", FieldType.LONG),
    ValueField("ratio", FieldType.FLOAT),
    ValueField("flag", FieldType.BOOLEAN),
    ValueField("price", FieldType.DECIMAL),
    ValueField("at", FieldType.TIMESTAMP),
    ValueField("day", FieldType.DATE),
    ValueField("status", STATUS),
    ValueField("tags", ListOf(FieldType.STRING)),
    ValueField("moods", ListOf(STATUS)),
    ValueField("address", ADDRESS),
    ValueField("stops", ListOf(STOP)),
    ValueField("note"),
    ValueField("maybeAddress", ADDRESS, source="maybe_address"),
    ValueField("orderId", FieldType.LONG, source="order_id"),
    ValueField("added"),
)
FORMATS = (ValueFormat.JSON, ValueFormat.JSON_SCHEMA, ValueFormat.AVRO, ValueFormat.PROTOBUF)
RECORD_KEY = RecordKey(
    (KeyField("shop"), KeyField("seq", KeyType.LONG), KeyField("lane", KeyType.INT))
)
KEY_TYPES: tuple[KeyType | RecordKey, ...] = (KeyType.STRING, KeyType.INT, KeyType.LONG, RECORD_KEY)


def _view(value_format: ValueFormat, key_type: KeyType | RecordKey) -> View:
    suffix = f"{value_format.value.replace('_', '')}_{key_type.value}"
    camel = "".join(part.capitalize() for part in suffix.split("_"))
    return View(
        name=f"shapes_{suffix}",
        topic=f"shapes.{suffix}",
        kind=ViewKind.LATEST,
        key_field="id",
        type_name=f"Shape{camel}",
        point_field=f"shape{camel}",
        many_field=f"shapes{camel}",
        value_fields=FIELDS,
        value_format=value_format,
        key_type=key_type,
    )


CATALOGUE: tuple[View, ...] = tuple(_view(f, k) for f in FORMATS for k in KEY_TYPES)
