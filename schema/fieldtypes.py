"""The types of a view's value fields: scalars, enums, lists and nested records.

A latest or history view exposes fields of each event's value (`View.value_fields`). Each
has a type that GraphQL shows as it is: a scalar (`FieldType`), an enum (`EnumOf`), a list
(`ListOf`) or an object of fields of its own (`RecordOf`), nested as deep as the value is.

A value travels in three forms, converted here and nowhere else:

- *stored*: what the pipeline writes in the changelog (JSON): scalars as JSON has them, a
  decimal and a date as text ("12.50", "2026-11-28"), a timestamp as ms since the epoch,
  a record as an object keyed by its GraphQL field names;
- *shown* (`field_value`): the Python value GraphQL's scalar serializes (an `int` for Int
  and Long, a `Decimal`, a UTC `datetime`, a `date`), None where the value does not fit
  its type (a field of the wrong type reads as null, never as an error);
- *wire* (`wire_value`): what GraphQL writes in JSON, which is what a node answers the
  gateway (a Long and a Decimal as text, a DateTime and a Date in ISO-8601).

`field_value` takes the stored and the wire form alike (and its own output), so the
node's answers and the changelog's rows become the same values.

Names. A field's GraphQL name is `ValueField.name`; its name in the value is `source`
(default: the same). `graphql_name` is the rule that turns any source name into a GraphQL
field name, and `graphql_type_name` into a type name: split it at every character that is
not a letter or a digit, drop empty parts, join the parts with the first letter of each
but the first in upper case (the first part's first letter in lower case for a field,
upper case for a type), and put `f` (`T` for a type) in front when it would start with a
digit: `order_id` -> `orderId`, `first-name` -> `firstName`, `_ts` -> `ts`, `2fa` -> `f2fa`.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = [
    "EnumOf",
    "FieldType",
    "ListOf",
    "RecordOf",
    "ValueField",
    "ValueType",
    "field_value",
    "graphql_name",
    "graphql_type_name",
    "is_enum_symbol",
    "type_text",
    "wire_value",
]

_FIELD = re.compile(r"^[a-z][A-Za-z0-9]*$")
_TYPE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_ENUM_VALUE = re.compile(r"^[_A-Za-z][_0-9A-Za-z]*$")
_NOT_ENUM_VALUES = frozenset({"true", "false", "null"})  # GraphQL reserves them
_PYTHON_RESERVED = re.compile(r"^(mro|_.*_)$")  # names Python's Enum keeps for itself
_PARTS = re.compile(r"[^A-Za-z0-9]+")
_INT32 = range(-(2**31), 2**31)  # a GraphQL Int
_INT64 = range(-(2**63), 2**63)  # a Long
_LONG_TEXT = re.compile(r"^-?[0-9]{1,19}$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
# the ms since the epoch a datetime can hold (years 1 to 9999)
_MS_RANGE = range(-62_135_596_800_000, 253_402_300_800_000)


class FieldType(enum.Enum):
    """A scalar value field, named by its GraphQL scalar."""

    STRING = "String"
    INT = "Int"  # 32-bit, as GraphQL's Int
    LONG = "Long"  # 64-bit, written as a string of digits
    FLOAT = "Float"
    BOOLEAN = "Boolean"
    DECIMAL = "Decimal"  # exact, written as text
    TIMESTAMP = "DateTime"  # an instant, ISO-8601 in UTC
    DATE = "Date"  # a calendar day, ISO-8601


@dataclass(frozen=True)
class EnumOf:
    """An enum: one of `symbols`, shown as the GraphQL enum type `name`."""

    name: str
    symbols: tuple[str, ...]

    def __post_init__(self) -> None:
        if not _TYPE.match(self.name):
            raise ValueError(f"enum {self.name!r} is no GraphQL type name")
        bad = [s for s in self.symbols if not is_enum_symbol(s)]
        if not self.symbols or bad or len(set(self.symbols)) != len(self.symbols):
            raise ValueError(
                f"enum {self.name}: needs distinct symbols that are GraphQL enum values "
                f"(letters, digits, _; not true, false or null; not mro or _x_), got "
                f"{list(self.symbols)}"
            )


def is_enum_symbol(symbol: str) -> bool:
    """Whether `symbol` can be a value of an `EnumOf` (GraphQL's and Python's rules)."""
    return (
        bool(_ENUM_VALUE.match(symbol))
        and symbol not in _NOT_ENUM_VALUES
        and not _PYTHON_RESERVED.match(symbol)
    )


@dataclass(frozen=True)
class ListOf:
    """A list of values of one type (an item may be null)."""

    item: ValueType


@dataclass(frozen=True)
class RecordOf:
    """A nested record, shown as the GraphQL object type `name` with `fields`."""

    name: str
    fields: tuple[ValueField, ...]

    def __post_init__(self) -> None:
        if not _TYPE.match(self.name):
            raise ValueError(f"record {self.name!r} is no GraphQL type name")
        names = [f.name for f in self.fields]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"record {self.name}: needs fields of distinct names, got {names}")


ValueType = FieldType | EnumOf | ListOf | RecordOf


@dataclass(frozen=True)
class ValueField:
    """One field of the event's value that a `latest` or `history` view exposes: `name` in
    GraphQL, `source` in the value (default: `name`)."""

    name: str
    type: ValueType = FieldType.STRING
    source: str | None = None

    def __post_init__(self) -> None:
        if not _FIELD.match(self.name):
            raise ValueError(
                f"value field {self.name!r} is no GraphQL field name: name it "
                f"{graphql_name(self.name)!r} and give {self.name!r} as its source"
            )
        if self.source == "":
            raise ValueError(f"value field {self.name}: source must not be empty")

    @property
    def in_value(self) -> str:
        """The field's name in the event's value."""
        return self.source or self.name


def _joined(source: str, first_upper: bool, prefix: str) -> str:
    parts = [p for p in _PARTS.split(source) if p]
    if not parts:
        raise ValueError(f"{source!r} has no letter or digit to make a GraphQL name of")
    head = parts[0]
    head = (head[0].upper() if first_upper else head[0].lower()) + head[1:]
    joined = head + "".join(p[0].upper() + p[1:] for p in parts[1:])
    return prefix + joined if joined[0].isdigit() else joined


def graphql_name(source: str) -> str:
    """The GraphQL field name of a field named `source` in the value (module docs)."""
    return _joined(source, False, "f")


def graphql_type_name(source: str) -> str:
    """The GraphQL type name of a record or enum named `source` (module docs)."""
    return _joined(source, True, "T")


def type_text(value_type: ValueType) -> str:
    """The GraphQL type a field of `value_type` shows as, for messages: `[Address]`."""
    if isinstance(value_type, FieldType):
        return value_type.value
    if isinstance(value_type, ListOf):
        return f"[{type_text(value_type.item)}]"
    return value_type.name


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    try:
        number = Decimal(value)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _timestamp(value: Any) -> datetime | None:
    try:
        return _instant(value)
    except OverflowError:  # in its zone within year 1 to 9999, in UTC outside
        return None


def _instant(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo is not None else None
    if isinstance(value, int) and not isinstance(value, bool):
        return _EPOCH + value * _MS if value in _MS_RANGE else None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
        return moment.astimezone(UTC) if moment.tzinfo is not None else None
    return None


def _date(value: Any) -> date | None:
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value)
        except ValueError:
            return None
    return None


def _long(value: Any) -> int | None:
    if isinstance(value, str) and _LONG_TEXT.match(value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value in _INT64:
        return value
    return None


def _scalar(field_type: FieldType, value: Any) -> Any:
    if field_type is FieldType.STRING:
        return value if isinstance(value, str) else None
    if field_type is FieldType.BOOLEAN:
        return value if isinstance(value, bool) else None
    if field_type is FieldType.INT:
        number = _long(value) if not isinstance(value, str) else None
        return number if number is not None and number in _INT32 else None
    if field_type is FieldType.LONG:
        return _long(value)
    if field_type is FieldType.FLOAT:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        try:
            double = float(value)
        except OverflowError:  # an integer beyond a double
            return None
        return double if math.isfinite(double) else None
    if field_type is FieldType.DECIMAL:
        return _decimal(value)
    if field_type is FieldType.TIMESTAMP:
        return _timestamp(value)
    return _date(value)


def field_value(value_type: ValueType, value: Any) -> Any:
    """`value` (stored or wire form) as the field's GraphQL value shows it, or None when it
    does not fit `value_type` (see the module's docs)."""
    if value is None:
        return None
    if isinstance(value_type, FieldType):
        return _scalar(value_type, value)
    if isinstance(value_type, EnumOf):
        return value if isinstance(value, str) and value in value_type.symbols else None
    if isinstance(value_type, ListOf):
        if not isinstance(value, list):
            return None
        return [field_value(value_type.item, item) for item in value]
    if not isinstance(value, dict):
        return None
    return {f.name: field_value(f.type, value.get(f.name)) for f in value_type.fields}


def wire_value(value_type: ValueType, value: Any) -> Any:
    """`field_value`'s output as GraphQL writes it in JSON (see the module's docs)."""
    if value is None or isinstance(value_type, EnumOf):
        return value
    if isinstance(value_type, ListOf):
        return [wire_value(value_type.item, item) for item in value]
    if isinstance(value_type, RecordOf):
        return {f.name: wire_value(f.type, value.get(f.name)) for f in value_type.fields}
    if value_type in (FieldType.LONG, FieldType.DECIMAL):
        return str(value)
    if value_type is FieldType.TIMESTAMP:
        return value.isoformat(timespec="milliseconds")
    if value_type is FieldType.DATE:
        return value.isoformat()
    return value
