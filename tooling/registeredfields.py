"""The value fields of a registered schema, as catalogue source to paste into a view:
what `statefed fields SUBJECT` prints.

A view's fields are written in its catalogue, not read from the registry when a part
starts: the GraphQL schema is a contract clients depend on, so it changes when the
catalogue does, never because a producer registered a new version. When one does, run
`statefed fields` again, paste what it prints, and let `statefed schema --breaking` judge
the new SDL against the last one (docs/views.md, "Schema changes").

Names in the schema that GraphQL cannot take are given as `source`, with the GraphQL name
`schema.graphql_name` makes. What no value field can show (an Avro map, a union of several
types, a Protobuf map or bytes) is left out, and named in a comment.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from pipeline.protobuf import descriptor_set, messages_of
from schema import (
    EnumOf,
    FieldType,
    ListOf,
    RecordOf,
    ValueField,
    ValueType,
    graphql_name,
    graphql_type_name,
)

__all__ = ["Derived", "derive", "render"]


@dataclass
class Derived:
    """The value fields of one schema, and what could not become one (`path: why`)."""

    fields: tuple[ValueField, ...] = ()
    skipped: list[str] = field(default_factory=list)


def _field(source: str, value_type: ValueType) -> ValueField:
    name = graphql_name(source)
    return ValueField(name, value_type, None if name == source else source)


# --- Avro ---------------------------------------------------------------------------------

_AVRO_SCALARS = {
    "string": FieldType.STRING,
    "int": FieldType.INT,
    "long": FieldType.LONG,
    "float": FieldType.FLOAT,
    "double": FieldType.FLOAT,
    "boolean": FieldType.BOOLEAN,
}
_AVRO_LOGICAL = {
    "timestamp-millis": FieldType.TIMESTAMP,
    "timestamp-micros": FieldType.TIMESTAMP,
    "date": FieldType.DATE,
    "decimal": FieldType.DECIMAL,
}


def _avro_type(
    path: str, declared: Any, named: dict[str, ValueType], skipped: list[str]
) -> ValueType | str:
    """The value type of an Avro type, or why there is none."""
    if isinstance(declared, list):
        branches = [b for b in declared if b != "null"]
        if len(branches) != 1:
            return "a union of several types"
        return _avro_type(path, branches[0], named, skipped)
    if isinstance(declared, str):
        if declared in _AVRO_SCALARS:
            return _AVRO_SCALARS[declared]
        found = named.get(declared) or named.get(declared.rsplit(".", 1)[-1])
        return found if found is not None else f"the type {declared!r}"
    logical = _AVRO_LOGICAL.get(declared.get("logicalType", ""))
    if logical is not None:
        return logical
    kind = declared.get("type")
    if kind == "record":
        fields = _avro_fields(path, declared, named, skipped)
        record = RecordOf(graphql_type_name(declared["name"]), fields)
        named[declared["name"]] = record
        return record
    if kind == "enum":
        enum = EnumOf(graphql_type_name(declared["name"]), tuple(declared["symbols"]))
        named[declared["name"]] = enum
        return enum
    if kind == "array":
        item = _avro_type(f"{path}[]", declared["items"], named, skipped)
        return item if isinstance(item, str) else ListOf(item)
    if isinstance(kind, str) and kind in _AVRO_SCALARS:
        return _AVRO_SCALARS[kind]
    return f"an Avro {kind}"


def _avro_fields(
    path: str, record: Any, named: dict[str, ValueType], skipped: list[str]
) -> tuple[ValueField, ...]:
    fields = []
    for declared in record["fields"]:
        where = f"{path}{declared['name']}"
        found = _avro_type(f"{where}.", declared["type"], named, skipped)
        if isinstance(found, str):
            skipped.append(f"{where}: {found}")
        else:
            fields.append(_field(declared["name"], found))
    return tuple(fields)


def _from_avro(schema: str, skipped: list[str]) -> tuple[ValueField, ...]:
    return _avro_fields("", json.loads(schema), {}, skipped)


# --- JSON Schema --------------------------------------------------------------------------

_JSON_FORMATS = {"date-time": FieldType.TIMESTAMP, "date": FieldType.DATE}
_JSON_SCALARS = {
    "string": FieldType.STRING,
    "integer": FieldType.LONG,
    "number": FieldType.FLOAT,
    "boolean": FieldType.BOOLEAN,
}


def _json_type(path: str, name: str, declared: Any, skipped: list[str]) -> ValueType | str:
    if not isinstance(declared, dict):
        return "no schema"
    for combined in ("oneOf", "anyOf"):
        if combined in declared:
            branches = [b for b in declared[combined] if b != {"type": "null"}]
            if len(branches) != 1:
                return f"a {combined} of several types"
            return _json_type(path, name, branches[0], skipped)
    types = declared.get("type")
    types = [t for t in (types if isinstance(types, list) else [types]) if t != "null"]
    if "enum" in declared and all(isinstance(s, str) for s in declared["enum"]):
        return EnumOf(graphql_type_name(name), tuple(declared["enum"]))
    if len(types) != 1:
        return "a value of several types"
    if types == ["object"]:
        properties = declared.get("properties", {})
        return RecordOf(graphql_type_name(name), _json_fields(f"{path}.", properties, skipped))
    if types == ["array"]:
        item = _json_type(f"{path}[]", name, declared.get("items"), skipped)
        return item if isinstance(item, str) else ListOf(item)
    if types == ["string"] and declared.get("format") in _JSON_FORMATS:
        return _JSON_FORMATS[declared["format"]]
    return _JSON_SCALARS.get(types[0], f"a JSON {types[0]}")


def _json_fields(
    prefix: str, properties: dict[str, Any], skipped: list[str]
) -> tuple[ValueField, ...]:
    fields = []
    for source, declared in properties.items():
        found = _json_type(f"{prefix}{source}", source, declared, skipped)
        if isinstance(found, str):
            skipped.append(f"{prefix}{source}: {found}")
        else:
            fields.append(_field(source, found))
    return tuple(fields)


def _from_json_schema(schema: str, skipped: list[str]) -> tuple[ValueField, ...]:
    return _json_fields("", json.loads(schema).get("properties", {}), skipped)


# --- Protobuf -----------------------------------------------------------------------------

_PROTO_SCALARS = {
    FieldDescriptor.TYPE_STRING: FieldType.STRING,
    FieldDescriptor.TYPE_BOOL: FieldType.BOOLEAN,
    FieldDescriptor.TYPE_DOUBLE: FieldType.FLOAT,
    FieldDescriptor.TYPE_FLOAT: FieldType.FLOAT,
    FieldDescriptor.TYPE_INT32: FieldType.INT,
    FieldDescriptor.TYPE_SINT32: FieldType.INT,
    FieldDescriptor.TYPE_SFIXED32: FieldType.INT,
    FieldDescriptor.TYPE_UINT32: FieldType.LONG,
    FieldDescriptor.TYPE_FIXED32: FieldType.LONG,
    FieldDescriptor.TYPE_INT64: FieldType.LONG,
    FieldDescriptor.TYPE_SINT64: FieldType.LONG,
    FieldDescriptor.TYPE_SFIXED64: FieldType.LONG,
}


def _proto_type(path: str, declared: FieldDescriptor, skipped: list[str]) -> ValueType | str:
    message = declared.message_type
    if message is not None and message.GetOptions().map_entry:
        return "a map"
    if message is not None and message.full_name == "google.protobuf.Timestamp":
        found: ValueType | str = FieldType.TIMESTAMP
    elif message is not None:
        fields = _proto_fields(f"{path}.", message, skipped)
        found = RecordOf(graphql_type_name(message.name), fields)
    elif declared.enum_type is not None:
        symbols = tuple(v.name for v in declared.enum_type.values)
        found = EnumOf(graphql_type_name(declared.enum_type.name), symbols)
    else:
        found = _PROTO_SCALARS.get(declared.type, "bytes")
    if isinstance(found, str) or not declared.is_repeated:
        return found
    return ListOf(found)


def _proto_fields(prefix: str, message: Descriptor, skipped: list[str]) -> tuple[ValueField, ...]:
    fields = []
    for declared in message.fields:
        found = _proto_type(f"{prefix}{declared.name}", declared, skipped)
        if isinstance(found, str):
            skipped.append(f"{prefix}{declared.name}: {found}")
        else:
            fields.append(_field(declared.name, found))
    return tuple(fields)


def _from_protobuf(schema: str, skipped: list[str]) -> tuple[ValueField, ...]:
    (first, *_) = messages_of(descriptor_set("the subject", 0, schema))
    return _proto_fields("", first, skipped)


_DERIVERS: dict[str, Callable[[str, list[str]], tuple[ValueField, ...]]] = {
    "AVRO": _from_avro,
    "JSON": _from_json_schema,
    "PROTOBUF": _from_protobuf,
}


def derive(schema_type: str, schema: str) -> Derived:
    """The value fields of a registered schema of `schema_type` (`AVRO`, `JSON`,
    `PROTOBUF`: the registry's names; for Protobuf, the file's first message)."""
    skipped: list[str] = []
    fields = _DERIVERS[schema_type](schema, skipped)
    return Derived(fields, skipped)


# --- Python source ------------------------------------------------------------------------


def _tuple(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _type_source(value_type: ValueType) -> str:
    if isinstance(value_type, FieldType):
        return f"FieldType.{value_type.name}"
    if isinstance(value_type, EnumOf):
        symbols = _tuple([json.dumps(s) for s in value_type.symbols])
        return f'EnumOf("{value_type.name}", {symbols})'
    if isinstance(value_type, ListOf):
        return f"ListOf({_type_source(value_type.item)})"
    fields = _tuple([_field_source(f) for f in value_type.fields])
    return f'RecordOf("{value_type.name}", {fields})'


def _field_source(value_field: ValueField) -> str:
    parts = [json.dumps(value_field.name)]
    if value_field.type is not FieldType.STRING:
        parts.append(_type_source(value_field.type))
    if value_field.source is not None:
        parts.append(f"source={json.dumps(value_field.source)}")
    return f"ValueField({', '.join(parts)})"


def render(derived: Derived) -> str:
    """`value_fields=(...)` as Python source, a field per line, and what was left out."""
    lines = [f"# left out: {skipped}" for skipped in derived.skipped]
    lines.append("value_fields=(")
    lines.extend(f"    {_field_source(f)}," for f in derived.fields)
    lines.append("),")
    return "\n".join(lines)
