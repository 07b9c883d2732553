"""The catalogue of the conformance matrix: latest views over every value format and every
key type (each format with two key types), each exposing the same value fields, one per
schema shape (test_matrix.py). The record key has a field of each type a record key field
can have."""

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


# Each value format with two key types and each key type with two formats (format i with
# key types i and (i + 1) mod 4), not all sixteen pairs: the key is read from the record's
# key and the value from its value, and they meet only in the row, so a pair proves no
# more than its two halves. Half the views is half the queries the matrix's one pipeline
# runs. The record key, read by a Python UDF, comes with Avro (spark-avro) and with
# Protobuf (a UDF of its own in the same plan).
PAIRS: tuple[tuple[ValueFormat, KeyType | RecordKey], ...] = tuple(
    (value_format, KEY_TYPES[(i + step) % len(KEY_TYPES)])
    for i, value_format in enumerate(FORMATS)
    for step in (0, 1)
)
CATALOGUE: tuple[View, ...] = tuple(_view(f, k) for f, k in PAIRS)
