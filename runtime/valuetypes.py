"""Value fields in GraphQL, for the node subgraph and the gateway alike: the annotation
strawberry reads for each value type (schema.fieldtypes), and the `Long` scalar.

A record's GraphQL type reads its fields from the dict `field_value` makes (keyed by
GraphQL field names), so a nested value needs no object of a class of its own. Types are
made once per definition: views that share a record or an enum share its GraphQL type.
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
import datetime
import decimal
import enum
import functools
from collections.abc import Callable, Mapping
from typing import Any, NewType

import strawberry
from strawberry.types.scalar import ScalarDefinition

from schema import EnumOf, FieldType, ListOf, RecordOf, ValueType, field_value

__all__ = ["LONG_SCALAR", "SCALAR_MAP", "Long", "annotation", "parse_long"]


def parse_long(value: Any) -> int:
    """An Int, or a string of decimal digits, within 64 bits (as a Long value field reads
    one: schema.fieldtypes)."""
    number: int | None = field_value(FieldType.LONG, value)
    if number is None:
        raise ValueError(f"a Long is a 64-bit integer (an Int or a string of digits): {value!r}")
    return number


Long = NewType("Long", int)
LONG_SCALAR = strawberry.scalar(
    name="Long",
    description=(
        "A 64-bit integer, written as a string of decimal digits (a JavaScript number cannot "
        "hold every one); given as an Int or as such a string."
    ),
    serialize=str,
    parse_value=parse_long,
)
# what a schema's StrawberryConfig maps: `Long` annotations to the Long scalar
SCALAR_MAP: dict[object, ScalarDefinition] = {Long: LONG_SCALAR}

_SCALARS: Mapping[FieldType, Any] = {
    FieldType.STRING: str,
    FieldType.INT: int,
    FieldType.LONG: Long,
    FieldType.FLOAT: float,
    FieldType.BOOLEAN: bool,
    FieldType.DECIMAL: decimal.Decimal,
    FieldType.TIMESTAMP: datetime.datetime,
    FieldType.DATE: datetime.date,
}


def annotation(value_type: ValueType) -> Any:
    """What strawberry reads as `value_type`'s GraphQL type (not null: add `| None`)."""
    if isinstance(value_type, FieldType):
        return _SCALARS[value_type]
    if isinstance(value_type, EnumOf):
        return _enum_type(value_type)
    if isinstance(value_type, ListOf):
        return list[annotation(value_type.item) | None]  # type: ignore[misc]
    return _record_type(value_type)


@functools.cache
def _enum_type(definition: EnumOf) -> Any:
    members = enum.Enum(definition.name, [(symbol, symbol) for symbol in definition.symbols])  # type: ignore[misc]
    return strawberry.enum(members, name=definition.name)


def _reader(name: str, field_annotation: Any) -> Callable[..., Any]:
    """A resolver reading `name` from the record's dict."""

    def read(root: Any) -> Any:
        return root.get(name) if isinstance(root, dict) else None

    read.__annotations__ = {"root": Any, "return": field_annotation}
    return read


@functools.cache
def _record_type(definition: RecordOf) -> Any:
    namespace: dict[str, Any] = {"__annotations__": {}}
    for index, value_field in enumerate(definition.fields):
        read = _reader(value_field.name, annotation(value_field.type) | None)
        namespace[f"f{index}"] = strawberry.field(name=value_field.name, resolver=read)
    return strawberry.type(type(definition.name, (), namespace), name=definition.name)
