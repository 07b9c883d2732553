"""The shape of a registered schema (records, lists, scalars), against which the pipeline
checks a view's value fields at start: a field declared a record where the schema has a
string would fail deep inside Spark's planning, or read as null forever.

Mostly the structure is checked. A scalar of the schema reads as any scalar type (through
its text, `pipeline.records`), so a schema's `long` may be a view's `Int` or `String`; but
an Avro date or timestamp, which Spark decodes as a date or a date-time, has text no number,
Boolean or enum symbol reads, so only `String`, `DateTime` and `Date` read it.

Names are resolved as the formats define them: an Avro reference by its full name, the
enclosing namespace completing a name without a dot; a JSON Schema `$ref` within the same
schema (`#/definitions/Address`, `#/$defs/Address`, any JSON pointer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote

from schema import EnumOf, FieldType, ListOf, ValueField, ValueType, type_text

__all__ = [
    "Shape",
    "avro_full_name",
    "avro_named",
    "avro_shape",
    "json_schema_shape",
    "json_schema_target",
    "json_schema_variants",
    "mismatches",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Shape:
    """`record`: the fields of a record by name; `item`: the items of a list; `scalar`: a
    scalar or an enum, which reads as any scalar type or only as those of `reads_as`; none of
    them: something no value field reads (a union of several types, a map). `type_text`
    says what the schema declares, for errors."""

    type_text: str
    record: Mapping[str, Shape] | None = None
    item: Shape | None = None
    scalar: bool = False
    reads_as: tuple[FieldType, ...] | None = None


_SCALAR = Shape("a scalar", scalar=True)

# --- Avro ---------------------------------------------------------------------------------

# the logical types Spark's from_avro decodes as a date or a date-time, with their base type
_AVRO_DATETIMES = {
    "date": "int",
    "timestamp-millis": "long",
    "timestamp-micros": "long",
    "local-timestamp-millis": "long",
    "local-timestamp-micros": "long",
}
_DATETIME_READS = (FieldType.TIMESTAMP, FieldType.DATE, FieldType.STRING)


def avro_full_name(declared: Mapping[str, Any], namespace: str) -> str:
    """The full name of the named type `declared` (a record, an enum, a fixed) defined within
    `namespace`: its name when that has a dot, else its own namespace's or the enclosing one's
    (the Avro specification's "Names")."""
    name = str(declared["name"])
    if "." in name:
        return name
    own = declared.get("namespace")
    space = namespace if own is None else str(own)
    return f"{space}.{name}" if space else name


def avro_named(reference: str, namespace: str, named: Mapping[str, _T]) -> _T | None:
    """What `named` (by full name) holds for the type `reference` names within `namespace`: a
    name with a dot is a full name; one without is looked up in `namespace`, then in the null
    namespace (as Avro's own parser does)."""
    if "." in reference or not namespace:
        return named.get(reference)
    found = named.get(f"{namespace}.{reference}")
    return found if found is not None else named.get(reference)


def _namespace_of(full_name: str) -> str:
    return full_name.rpartition(".")[0]


def avro_shape(declared: Any, named: dict[str, Shape] | None = None, namespace: str = "") -> Shape:
    """The shape of an Avro type (a schema parsed from JSON) defined within `namespace`;
    `named` holds the records seen so far, by full name, as later references use them."""
    named = {} if named is None else named
    if isinstance(declared, list):  # a union: the non-null branch of an optional field
        branches = [b for b in declared if b != "null"]
        if len(branches) != 1:
            return Shape("a union")
        return avro_shape(branches[0], named, namespace)
    if isinstance(declared, str):
        found = avro_named(declared, namespace, named)
        return _SCALAR if found is None else found
    kind = declared.get("type")
    if kind == "record":
        return _avro_record(declared, named, namespace)
    if kind == "array":
        return Shape("an array", item=avro_shape(declared["items"], named, namespace))
    if kind == "map":
        return Shape("a map")
    logical = declared.get("logicalType")
    if isinstance(logical, str) and _AVRO_DATETIMES.get(logical) == kind:
        return Shape(f"an Avro {logical}", scalar=True, reads_as=_DATETIME_READS)
    return _SCALAR


def _avro_record(declared: Mapping[str, Any], named: dict[str, Shape], namespace: str) -> Shape:
    """A record's shape, named by its full name before its fields are read (a field may
    refer to the record itself); its fields are defined within its own namespace."""
    full_name = avro_full_name(declared, namespace)
    fields: dict[str, Shape] = {}
    shape = Shape(f"record {declared['name']}", fields)
    named[full_name] = shape
    for field in declared["fields"]:
        fields[field["name"]] = avro_shape(field["type"], named, _namespace_of(full_name))
    return shape


# --- JSON Schema --------------------------------------------------------------------------


def _is_null(declared: Any) -> bool:
    """Whether `declared` admits only null, whatever else it says (`{"type": "null",
    "title": "Not included"}`, as Confluent's Java serializer writes an optional field)."""
    return isinstance(declared, dict) and declared.get("type") in ("null", ["null"])


def json_schema_variants(declared: Mapping[str, Any]) -> tuple[str, list[Any]] | None:
    """The keyword (`oneOf`, `anyOf`) and the non-null branches of a schema that combines
    several, or None for one that does not."""
    for combined in ("oneOf", "anyOf"):
        if combined in declared:
            return combined, [b for b in declared[combined] if not _is_null(b)]
    return None


def json_schema_target(document: Any, ref: str) -> tuple[str, Any] | None:
    """The schema the `$ref` `ref` names within `document` (a JSON pointer after `#`),
    following a `$ref` it names in turn, and the last `$ref` followed; None for a `$ref` to
    another document (another subject's schema, not read). ValueError naming the `$ref`
    when it names nothing in `document`, or when `$ref`s lead back to one already followed."""
    followed: list[str] = []
    target: Any = {"$ref": ref}
    while isinstance(target, dict) and isinstance(target.get("$ref"), str):
        ref = target["$ref"]
        if ref in followed:
            raise ValueError(f"a cycle of $refs ({' -> '.join([*followed, ref])})")
        followed.append(ref)
        if not ref.startswith("#"):
            return None
        target = _pointed(document, ref)
    return ref, target


def _pointed(document: Any, ref: str) -> Any:
    """What the local `$ref` `ref` (`#`, `#/definitions/Address`) points to in `document`."""
    pointer = ref[1:]
    if pointer and not pointer.startswith("/"):
        raise ValueError(f"a $ref {ref!r} to an anchor, which is not followed")
    found = document
    for part in pointer.split("/")[1:]:
        key = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(found, dict) and key in found:
            found = found[key]
        elif isinstance(found, list) and key.isdigit() and int(key) < len(found):
            found = found[int(key)]
        else:
            raise ValueError(f"a $ref {ref!r} that names nothing in the schema")
    return found


def json_schema_shape(declared: Any) -> Shape:
    """The shape of a JSON Schema (parsed), its `$ref`s followed within it; a `$ref` to
    another document reads as a scalar, and schemas it cannot tell too, which a nested
    field's check then names."""
    return _json_shape(declared, declared, {})


def _json_shape(declared: Any, document: Any, named: dict[str, Shape], ref: str = "") -> Shape:
    """The shape of `declared`; `named` holds the shapes of the `$ref`s met so far, and
    `ref` is the one `declared` is the target of (if any): an object registers there before
    its properties are read, as a property may refer back to it."""
    if not isinstance(declared, dict):
        return _SCALAR
    if isinstance(declared.get("$ref"), str):
        return _json_ref_shape(declared["$ref"], document, named)
    variants = json_schema_variants(declared)
    if variants is not None:
        combined, branches = variants
        if len(branches) != 1:
            return Shape(f"a {combined}")
        return _json_shape(branches[0], document, named, ref)
    types = declared.get("type")
    types = [t for t in (types if isinstance(types, list) else [types]) if t != "null"]
    if types in (["object"], [None]) and "properties" in declared:  # `type` may be left out
        fields: dict[str, Shape] = {}
        shape = Shape("an object", fields)
        if ref:
            named[ref] = shape
        for name, property_schema in declared["properties"].items():
            fields[name] = _json_shape(property_schema, document, named)
        return shape
    if types == ["array"]:
        return Shape("an array", item=_json_shape(declared.get("items"), document, named))
    return _SCALAR


def _json_ref_shape(ref: str, document: Any, named: dict[str, Shape]) -> Shape:
    try:
        found = json_schema_target(document, ref)
    except ValueError as exc:
        return Shape(str(exc))
    if found is None:
        return Shape(f"a $ref to another schema ({ref!r}), not read", scalar=True)
    last, target = found
    if last not in named:  # what a `$ref` within its target finds, until the shape is known
        named[last] = Shape(f"a $ref {last!r} within its own definition")
        named[last] = _json_shape(target, document, named, last)
    return named[last]


# --- fitting a view's fields --------------------------------------------------------------


def _scalar_mismatch(path: str, value_type: FieldType | EnumOf, shape: Shape) -> list[str]:
    if not shape.scalar:
        return [f"{path} is {type_text(value_type)} but {shape.type_text}"]
    if shape.reads_as is None or value_type in shape.reads_as:
        return []
    *others, last = [type_text(t) for t in shape.reads_as]
    readable = f"{', '.join(others)} or {last}" if others else last
    return [
        f"{path} is {type_text(value_type)} but {shape.type_text}, which it would read as "
        f"null: declare it {readable}"
    ]


def _mismatch(path: str, value_type: ValueType, shape: Shape) -> list[str]:
    if isinstance(value_type, FieldType | EnumOf):
        return _scalar_mismatch(path, value_type, shape)
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
