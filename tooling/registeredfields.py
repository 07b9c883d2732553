"""The value fields of a registered schema, as catalogue source to paste into a view:
what `statefed fields SUBJECT` prints.

A view's fields are written in its catalogue, not read from the registry when a part
starts: the GraphQL schema is a contract clients depend on, so it changes when the
catalogue does, never because a producer registered a new version. When one does, run
`statefed fields` again, paste what it prints, and let `statefed schema --breaking` judge
the new SDL against the last one (docs/views.md, "Schema changes").

Names in the schema that GraphQL cannot take are given as `source`, with the GraphQL name
`schema.graphql_name` makes. What no value field can show (an Avro map, a union of several
types, a Protobuf map or bytes, a recursive record, a JSON Schema `$ref` to another subject's
schema) is left out, and named in a comment. Names are resolved as `pipeline.shapes` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from pipeline.protobuf import SCALAR_MESSAGES, descriptor_set, messages_of
from pipeline.shapes import avro_full_name, avro_named, json_schema_target, json_schema_variants
from schema import (
    EnumOf,
    FieldType,
    ListOf,
    RecordOf,
    ValueField,
    ValueType,
    graphql_name,
    graphql_type_name,
    is_enum_symbol,
)

__all__ = ["Derived", "derive", "render"]


@dataclass
class Derived:
    """The value fields of one schema, and what could not become one (`path: why`)."""

    fields: tuple[ValueField, ...] = ()
    skipped: list[str] = field(default_factory=list)


Found = ValueType | str  # a field's type, or why no value field can show it


def _collect(entries: list[tuple[str, str, Found]], skipped: list[str]) -> tuple[ValueField, ...]:
    """The value fields of (path, source name, found) entries; the others go to `skipped`,
    as does a field whose GraphQL name another field of the record took already."""
    fields: dict[str, ValueField] = {}
    for path, source, found in entries:
        name = graphql_name(source)
        if isinstance(found, str):
            skipped.append(f"{path}: {found}")
        elif name in fields:
            skipped.append(f"{path}: its GraphQL name {name!r} is another field's")
        else:
            fields[name] = ValueField(name, found, None if name == source else source)
    return tuple(fields.values())


def _record(source: str, fields: tuple[ValueField, ...]) -> Found:
    return RecordOf(graphql_type_name(source), fields) if fields else "no field to show"


def _enum(source: str, symbols: tuple[str, ...]) -> Found:
    """An enum, or String when a symbol cannot be a GraphQL enum value (`in-progress`)."""
    if symbols and all(is_enum_symbol(s) for s in symbols):
        return EnumOf(graphql_type_name(source), symbols)
    return FieldType.STRING


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
    # Spark decodes these as a TIMESTAMP_NTZ, whose text reads as that wall-clock time in UTC
    # (the pipeline's session zone): the instant whose ms since the epoch the value holds
    "local-timestamp-millis": FieldType.TIMESTAMP,
    "local-timestamp-micros": FieldType.TIMESTAMP,
    "date": FieldType.DATE,
    "decimal": FieldType.DECIMAL,
}


def _avro_type(
    path: str, declared: Any, named: dict[str, Found], namespace: str, skipped: list[str]
) -> Found:
    """The value type of an Avro type defined within `namespace` (`named`: the records and
    enums met so far, by full name)."""
    if isinstance(declared, list):
        branches = [b for b in declared if b != "null"]
        if len(branches) != 1:
            return "a union of several types"
        return _avro_type(path, branches[0], named, namespace, skipped)
    if isinstance(declared, str):
        if declared in _AVRO_SCALARS:
            return _AVRO_SCALARS[declared]
        found = avro_named(declared, namespace, named)
        return found if found is not None else f"the type {declared!r}"
    logical = _AVRO_LOGICAL.get(declared.get("logicalType", ""))
    if logical is not None:
        return logical
    kind = declared.get("type")
    if kind == "record":
        full_name, fields = _avro_record(path, declared, named, namespace, skipped)
        named[full_name] = record = _record(_avro_source(full_name, named), fields)
        return record
    if kind == "enum":
        full_name = avro_full_name(declared, namespace)
        named[full_name] = enum = _enum(_avro_source(full_name, named), tuple(declared["symbols"]))
        return enum
    if kind == "array":
        item = _avro_type(f"{path}[]", declared["items"], named, namespace, skipped)
        return item if isinstance(item, str) else ListOf(item)
    if isinstance(kind, str) and kind in _AVRO_SCALARS:
        return _AVRO_SCALARS[kind]
    return f"an Avro {kind}"


def _short(full_name: str) -> str:
    return full_name.rpartition(".")[2]


def _avro_source(full_name: str, named: dict[str, Found]) -> str:
    """What a named Avro type's GraphQL name is made of: its name without namespace, or its
    full name when another type of the schema has that name too (com.a.Address and
    com.b.Address: Address and ComBAddress, which one catalogue can hold)."""
    short = _short(full_name)
    shared = any(other != full_name and _short(other) == short for other in named)
    return full_name if shared else short


def _avro_record(
    path: str, record: Any, named: dict[str, Found], namespace: str, skipped: list[str]
) -> tuple[str, tuple[ValueField, ...]]:
    """The full name of a record defined within `namespace`, and its value fields (defined
    within its own namespace)."""
    full_name = avro_full_name(record, namespace)
    named[full_name] = "a recursive record"  # until its fields are known
    inner = full_name.rpartition(".")[0]
    entries = []
    for declared in record["fields"]:
        where = f"{path}{declared['name']}"
        found = _avro_type(f"{where}.", declared["type"], named, inner, skipped)
        entries.append((where, declared["name"], found))
    return full_name, _collect(entries, skipped)


# --- JSON Schema --------------------------------------------------------------------------

_JSON_FORMATS = {"date-time": FieldType.TIMESTAMP, "date": FieldType.DATE}
_JSON_SCALARS = {
    "string": FieldType.STRING,
    "integer": FieldType.LONG,
    "number": FieldType.FLOAT,
    "boolean": FieldType.BOOLEAN,
}


@dataclass(frozen=True)
class _JsonDocument:
    """The schema whose `$ref`s are followed, and the `$ref`s followed to reach a part of it
    (one met again there is a recursive record)."""

    schema: Any
    within: tuple[str, ...] = ()


def _json_type(
    path: str, name: str, declared: Any, document: _JsonDocument, skipped: list[str]
) -> Found:
    """The value type of a JSON Schema; `name` names a record or an enum it makes."""
    if not isinstance(declared, dict):
        return "no schema"
    if isinstance(declared.get("$ref"), str):
        return _json_ref(path, name, declared["$ref"], document, skipped)
    variants = json_schema_variants(declared)
    if variants is not None:
        combined, branches = variants
        if len(branches) != 1:
            return f"a {combined} of several types"
        return _json_type(path, name, branches[0], document, skipped)
    types = declared.get("type")
    types = [t for t in (types if isinstance(types, list) else [types]) if t != "null"]
    if "enum" in declared and all(isinstance(s, str) for s in declared["enum"]):
        return _enum(name, tuple(declared["enum"]))
    if types == [None] and "properties" in declared:  # an object, its `type` left out
        types = ["object"]
    if len(types) != 1:
        return "a value of several types"
    if types == ["object"]:
        properties = declared.get("properties", {})
        return _record(name, _json_fields(f"{path}.", properties, document, skipped))
    if types == ["array"]:
        item = _json_type(f"{path}[]", name, declared.get("items"), document, skipped)
        return item if isinstance(item, str) else ListOf(item)
    if types == ["string"] and declared.get("format") in _JSON_FORMATS:
        return _JSON_FORMATS[declared["format"]]
    return _JSON_SCALARS.get(str(types[0]), f"a JSON {types[0]}")


def _json_ref(path: str, name: str, ref: str, document: _JsonDocument, skipped: list[str]) -> Found:
    """The value type of the schema `ref` names in the document, as a record or an enum
    named after its definition (`#/definitions/Address`: Address)."""
    try:
        found = json_schema_target(document.schema, ref)
    except ValueError as exc:
        return str(exc)
    if found is None:
        return f"a $ref to another schema ({ref!r}), not read"
    last, target = found
    if last in document.within:
        return f"a recursive record (the $ref {last!r})"
    inner = _JsonDocument(document.schema, (*document.within, last))
    defined = last.rpartition("/")[2] or name
    return _json_type(path, defined, target, inner, skipped)


def _json_fields(
    prefix: str, properties: dict[str, Any], document: _JsonDocument, skipped: list[str]
) -> tuple[ValueField, ...]:
    entries = []
    for source, declared in properties.items():
        found = _json_type(f"{prefix}{source}", source, declared, document, skipped)
        entries.append((f"{prefix}{source}", source, found))
    return _collect(entries, skipped)


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
    FieldDescriptor.TYPE_UINT64: FieldType.DECIMAL,  # beyond a Long: exact as a Decimal
    FieldDescriptor.TYPE_FIXED64: FieldType.DECIMAL,
}
# the well-known messages protobuf's JSON writes as one scalar (pipeline.protobuf)
_PROTO_WRAPPERS: dict[str, FieldType] = {
    "google.protobuf.Timestamp": FieldType.TIMESTAMP,
    "google.protobuf.BoolValue": FieldType.BOOLEAN,
    "google.protobuf.DoubleValue": FieldType.FLOAT,
    "google.protobuf.FloatValue": FieldType.FLOAT,
    "google.protobuf.Int32Value": FieldType.INT,
    "google.protobuf.UInt32Value": FieldType.LONG,
    "google.protobuf.Int64Value": FieldType.LONG,
    "google.protobuf.UInt64Value": FieldType.DECIMAL,
}


def _proto_message(
    path: str, message: Descriptor, within: tuple[str, ...], skipped: list[str]
) -> Found:
    if message.GetOptions().map_entry:
        return "a map"
    if message.full_name in _PROTO_WRAPPERS:
        return _PROTO_WRAPPERS[message.full_name]
    if message.full_name in SCALAR_MESSAGES:  # Duration, FieldMask, StringValue, BytesValue
        return FieldType.STRING
    if message.full_name.startswith("google.protobuf."):  # Struct, Value, Any, Empty
        return f"a {message.full_name}"
    if message.full_name in within:
        return "a recursive message"
    fields = _proto_fields(f"{path}.", message, (*within, message.full_name), skipped)
    return _record(message.name, fields)


def _proto_type(
    path: str, declared: FieldDescriptor, within: tuple[str, ...], skipped: list[str]
) -> Found:
    found: Found
    if declared.message_type is not None:
        found = _proto_message(path, declared.message_type, within, skipped)
    elif declared.enum_type is not None:
        found = _enum(declared.enum_type.name, tuple(v.name for v in declared.enum_type.values))
    elif declared.type == FieldDescriptor.TYPE_BYTES:
        found = "bytes"
    else:
        found = _PROTO_SCALARS.get(declared.type, f"a Protobuf type {declared.type}")
    if isinstance(found, str) or not declared.is_repeated:
        return found
    return ListOf(found)


def _proto_fields(
    prefix: str, message: Descriptor, within: tuple[str, ...], skipped: list[str]
) -> tuple[ValueField, ...]:
    entries = []
    for declared in message.fields:
        found = _proto_type(f"{prefix}{declared.name}", declared, within, skipped)
        entries.append((f"{prefix}{declared.name}", declared.name, found))
    return _collect(entries, skipped)


def derive(schema_type: str, schema: str, subject: str = "", schema_id: int = 0) -> Derived:
    """The value fields of a registered schema of `schema_type` (`AVRO`, `JSON`,
    `PROTOBUF`: the registry's names; for Protobuf, the file's first message); `subject`
    and `schema_id` name it in errors (SourceError: a .proto that does not compile)."""
    skipped: list[str] = []
    if schema_type == "AVRO":
        document = json.loads(schema)
        if not isinstance(document, dict) or document.get("type") != "record":
            raise ValueError(_no_fields("an Avro record", json.dumps(document)[:200]))
        _, fields = _avro_record("", document, {}, "", skipped)
    elif schema_type == "JSON":
        document = json.loads(schema)
        if not isinstance(document, dict):
            raise ValueError(_no_fields("a JSON Schema object", json.dumps(document)[:200]))
        root = _JsonDocument(document, ("#",))  # a `$ref` to "#" is the value itself
        fields = _json_fields("", document.get("properties", {}), root, skipped)
    else:
        messages = messages_of(descriptor_set(subject, schema_id, schema))
        if not messages:
            raise ValueError(_no_fields("a Protobuf message", "a .proto file without one"))
        fields = _proto_fields("", messages[0], (messages[0].full_name,), skipped)
    return Derived(fields, skipped)


def _no_fields(wanted: str, found: str) -> str:
    return (
        f"value fields are read from {wanted}'s fields, and the schema is {found}: a view of "
        "this subject reads the whole value, and names no value_fields"
    )


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
