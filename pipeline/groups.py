"""The key of a view grouped by value fields (`schema.groups`), as a Spark expression: the
key text a producer's record key of those values would have (`schema.keytypes`,
`schema.recordkeys`), so the view's rows land on the partitions the gateway routes them to.

- a String field: its text, unless empty;
- an Int or Long field: 16 hex digits that sort as the number does: its 64-bit two's
  complement with the sign bit flipped (Spark's `hex` of a bigint is the two's complement);
- several fields: each field's text in order, a String's with every NUL as NUL 0x01 and
  NUL NUL after it.

Null when a field is null, or an Int beyond 32 bits: the event has no key, and goes to the
dead letters with `group_reason`.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from schema import KeyType, RecordKey, ValueField, type_text

__all__ = ["group_reason", "group_text"]

_DIGITS = "0123456789abcdef"
_SIGN_FLIPPED = "89abcdef01234567"  # each digit XOR 8
_INT32 = (-(2**31), 2**31 - 1)


def group_reason(fields: tuple[ValueField, ...]) -> str:
    """The reason of an event without a usable group key."""
    names = ", ".join(f"{f.name!r} ({type_text(f.type)})" for f in fields)
    return (
        f"group field(s) {names} missing, null, of another type or an empty string: the "
        f"event has no key in this view"
    )


def _number(value: Column, key_type: KeyType) -> Column:
    digits = F.lpad(F.lower(F.hex(value)), 16, "0")
    text = F.concat(
        F.translate(F.substring(digits, 1, 1), _DIGITS, _SIGN_FLIPPED), F.substring(digits, 2, 15)
    )
    if key_type is KeyType.INT:
        return F.when(value.between(*_INT32), text)
    return text


def _part(value: Column, key_type: KeyType) -> Column:
    """One field's text inside a record key."""
    if key_type is KeyType.STRING:
        return F.concat(F.replace(value, F.lit("\x00"), F.lit("\x00\x01")), F.lit("\x00\x00"))
    return _number(value, key_type)


def group_text(key_type: KeyType | RecordKey, values: list[Column]) -> Column:
    """The key text of the group fields' stored `values` (in `key_type`'s order), or null."""
    if isinstance(key_type, RecordKey):
        parts = [_part(v, f.type) for v, f in zip(values, key_type.fields, strict=True)]
        return F.concat(*parts)  # null when any part is
    (value,) = values
    if key_type is KeyType.STRING:
        return F.when(F.length(value) > 0, value)
    return _number(value, key_type)
