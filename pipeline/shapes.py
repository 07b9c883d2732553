"""The shape of a registered schema (records, lists, scalars), against which the pipeline
checks a view's value fields at start: a field declared a record where the schema has a
string would fail deep inside Spark's planning, or read as null forever.

Only the structure is checked. Any scalar of the schema reads as any scalar type (through
its text, `pipeline.records`), so a schema's `long` may be a view's `Int` or `String`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schema import EnumOf, FieldType, ListOf, ValueField, ValueType, type_text

__all__ = ["Shape", "avro_shape", "json_schema_shape", "mismatches"]


@dataclass(frozen=True)
class Shape:
    """`record`: the fields of a record by name; `item`: the items of a list; `scalar`: a
    scalar or an enum; none of them: something no value field reads (a union of several
    types, a map). `type_text` says what the schema declares, for errors."""

    type_text: str
    record: Mapping[str, Shape] | None = None
    item: Shape | None = None
    scalar: bool = False


_SCALAR = Shape("a scalar", scalar=True)


def avro_shape(declared: Any, named: dict[str, Shape] | None = None) -> Shape:
    """The shape of an Avro type (a schema parsed from JSON); `named` holds the records
    seen so far, by name, as later references use them."""
    named = {} if named is None else named
    if isinstance(declared, list):  # a union: the non-null branch of an optional field
        branches = [b for b in declared if b != "null"]
        return avro_shape(branches[0], named) if len(branches) == 1 else Shape("a union")
    if isinstance(declared, str):
        return named.get(declared, named.get(declared.rsplit(".", 1)[-1], _SCALAR))
    if declared.get("type") == "record":
        fields: dict[str, Shape] = {}
        shape = Shape(f"record {declared['name']}", fields)
        named[declared["name"]] = shape
        if "namespace" in declared:
            named[f"{declared['namespace']}.{declared['name']}"] = shape
        for field in declared["fields"]:
            fields[field["name"]] = avro_shape(field["type"], named)
        return shape
    if declared.get("type") == "array":
        return Shape("an array", item=avro_shape(declared["items"], named))
    if declared.get("type") == "map":
        return Shape("a map")
    return _SCALAR


def json_schema_shape(declared: Any) -> Shape:
    """The shape of a JSON Schema (parsed); `$ref`s (not resolved yet) and schemas it
    cannot tell read as scalars, which a nested field's check then names."""
    if not isinstance(declared, dict):
        return _SCALAR
    for combined in ("oneOf", "anyOf"):
        if combined in declared:
            branches = [b for b in declared[combined] if b != {"type": "null"}]
            return json_schema_shape(branches[0]) if len(branches) == 1 else Shape(f"a {combined}")
    types = declared.get("type")
    types = [t for t in (types if isinstance(types, list) else [types]) if t != "null"]
    if types in (["object"], [None]) and "properties" in declared:  # `type` may be left out
        properties = declared.get("properties", {})
        return Shape("an object", {k: json_schema_shape(v) for k, v in properties.items()})
    if types == ["array"]:
        return Shape("an array", item=json_schema_shape(declared.get("items")))
    return _SCALAR


def _mismatch(path: str, value_type: ValueType, shape: Shape) -> list[str]:
    if isinstance(value_type, FieldType | EnumOf):
        return [] if shape.scalar else [f"{path} is {type_text(value_type)} but {shape.type_text}"]
    if isinstance(value_type, ListOf):
        if shape.item is None:
            return [f"{path} is {type_text(value_type)} but {shape.type_text}"]
        return _mismatch(f"{path}[]", value_type.item, shape.item)
    if shape.record is None:
        return [f"{path} is record {value_type.name} but {shape.type_text}"]
    return mismatches(value_type.fields, shape, f"{path}.")


def mismatches(fields: tuple[ValueField, ...], record: Shape, prefix: str = "") -> list[str]:
    """What of `fields` the record `record` cannot give, one line each (empty: all fits)."""
    found = record.record or {}
    lines = []
    for value_field in fields:
        path = f"{prefix}{value_field.in_value}"
        if value_field.in_value not in found:
            lines.append(f"{path} is not in {record.type_text}")
            continue
        lines.extend(_mismatch(path, value_field.type, found[value_field.in_value]))
    return lines
