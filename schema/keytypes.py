"""The types a topic's record keys can have, as Kafka's Java serializers write them.

A key type says how the bytes of a record key are made from a key and read back, so the
partition of a key is what the Java producer picks for it: `murmur2(serialized key)`.

| key type | Java serializer      | bytes                                     |
|----------|----------------------|-------------------------------------------|
| string   | `StringSerializer`   | UTF-8                                     |
| int      | `IntegerSerializer`  | 4 bytes, big-endian two's complement      |
| long     | `LongSerializer`     | 8 bytes, big-endian two's complement      |
| double   | `DoubleSerializer`   | 8 bytes, big-endian IEEE 754 (one NaN)    |

Inside statefed (changelog records, partition stores, cursors, the gateway's cache) every
key is one string, its *key text*. A string key is its own text. A number's text sorts as
the number does, so a scan in key order is in numeric order: 16 hex digits of the value's
bits, with the sign bit flipped for integers and the usual total order of IEEE 754 for
doubles (all bits flipped for negatives, the sign bit for the rest).
"""

from __future__ import annotations

import enum
import math
import re
import struct
import sys

from schema.partitioner import murmur2

__all__ = ["KeyType", "partition_of_bytes"]

_SIGN = 1 << 63
_MASK64 = (1 << 64) - 1
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_DOUBLE = struct.Struct(">d")
_BITS = struct.Struct(">Q")
_TEXT_DIGITS = 16
_KEY_TEXT = re.compile(f"[0-9a-f]{{{_TEXT_DIGITS}}}")  # no sign, prefix, "_" or space


def partition_of_bytes(data: bytes, partitions: int) -> int:
    """The partition of a record whose key is `data`, as Kafka's default partitioner picks it."""
    if partitions < 1:
        raise ValueError(f"partition count must be >= 1, got {partitions}")
    return (murmur2(data) & 0x7FFFFFFF) % partitions


class KeyType(enum.Enum):
    """How a topic's record keys are serialized; the value is the catalogue's spelling."""

    STRING = "string"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"

    @property
    def serializer(self) -> str:
        """The Java serializer that writes keys of this type: `IntegerSerializer`."""
        return _SERIALIZERS[self]

    @property
    def width(self) -> int | None:
        """How many bytes a key of this type is (None: a string's varies)."""
        return _WIDTH.get(self)

    @property
    def graphql_type(self) -> str:
        """The GraphQL type of a key argument or field: a long is a `Long` (a string of
        digits in JSON, as a JavaScript number cannot hold every long)."""
        return _GRAPHQL[self]

    def serialize(self, key: str | int | float) -> bytes:
        """The record key bytes the Java serializer writes for `key`; ValueError when `key`
        is not a value of this type."""
        if self is KeyType.STRING:
            return _string(key).encode("utf-8")
        if self is KeyType.DOUBLE:
            return _DOUBLE.pack(_double(key))
        return _integer(self, key).to_bytes(_WIDTH[self], "big", signed=True)

    def deserialize(self, data: bytes) -> str | int | float:
        """The key the Java serializer wrote as `data`; ValueError when the bytes are not
        one (a wrong length, or invalid UTF-8)."""
        if self is KeyType.STRING:
            return data.decode("utf-8")
        if len(data) != _WIDTH[self]:
            raise ValueError(f"a key of type {self.value} is {_WIDTH[self]} bytes, got {len(data)}")
        if self is KeyType.DOUBLE:
            return float(_DOUBLE.unpack(data)[0])
        return int.from_bytes(data, "big", signed=True)

    def text(self, key: str | int | float) -> str:
        """The key text of `key`: itself for a string, a sortable 16-hex-digit form else."""
        if self is KeyType.STRING:
            return _string(key)
        return f"{_sortable_bits(self, key):0{_TEXT_DIGITS}x}"

    def from_text(self, text: str) -> str | int | float:
        """The key whose key text is `text`; ValueError when it is no key text of this type."""
        if self is KeyType.STRING:
            return text
        if _KEY_TEXT.fullmatch(text) is None:  # int() alone takes "0x..", "-..", "A".."F"
            raise ValueError(
                f"{text!r} is no key text of a {self.value} key: "
                f"{_TEXT_DIGITS} lowercase hex digits"
            )
        bits = int(text, 16)
        if self is KeyType.DOUBLE:
            raw = bits ^ _SIGN if bits & _SIGN else ~bits & _MASK64
            # a NaN of other bits than Java's one NaN reads as NaN: the pipeline makes key
            # texts from the record's bytes, which a producer other than Java's may write
            return float(_DOUBLE.unpack(_BITS.pack(raw))[0])
        unsigned = bits ^ _SIGN
        value = unsigned - (1 << 64) if unsigned & _SIGN else unsigned
        _integer(self, value)  # an int key's text holds no value beyond 32 bits
        return value

    def partition(self, text: str, partitions: int) -> int:
        """The partition of the key whose key text is `text` among `partitions`."""
        key = text if self is KeyType.STRING else self.from_text(text)
        return partition_of_bytes(self.serialize(key), partitions)


_GRAPHQL = {KeyType.STRING: "String", KeyType.INT: "Int", KeyType.LONG: "Long"}
_GRAPHQL[KeyType.DOUBLE] = "Float"
_WIDTH = {KeyType.INT: 4, KeyType.LONG: 8, KeyType.DOUBLE: 8}
_SERIALIZERS = {
    KeyType.STRING: "StringSerializer",
    KeyType.INT: "IntegerSerializer",
    KeyType.LONG: "LongSerializer",
    KeyType.DOUBLE: "DoubleSerializer",
}
_RANGES = {KeyType.INT: range(-(2**31), 2**31), KeyType.LONG: range(-(2**63), 2**63)}


def _string(key: object) -> str:
    if not isinstance(key, str):
        raise ValueError(f"a string key must be a string, got {type(key).__name__}")
    return key


def _integer(key_type: KeyType, key: object) -> int:
    if isinstance(key, bool) or not isinstance(key, int) or key not in _RANGES[key_type]:
        bits = _WIDTH[key_type] * 8
        raise ValueError(
            f"a key of type {key_type.value} must be a {bits}-bit integer, got {key!r}"
        )
    return key


def _double(key: object) -> float:
    if isinstance(key, bool) or not isinstance(key, int | float):
        raise ValueError(f"a double key must be a number, got {key!r}")
    try:
        value = float(key)
    except OverflowError:  # an int beyond the doubles (its repr may be too long to make)
        raise ValueError(
            f"a double key must be a number up to {sys.float_info.max!r}, got an int of "
            f"{int(key).bit_length()} bits"
        ) from None
    return math.nan if math.isnan(value) else value  # one NaN, as doubleToLongBits


def _sortable_bits(key_type: KeyType, key: object) -> int:
    if key_type is KeyType.DOUBLE:
        bits = _BITS.unpack(_DOUBLE.pack(_double(key)))[0]
        return ~bits & _MASK64 if bits & _SIGN else bits | _SIGN
    return (_integer(key_type, key) & _MASK64) ^ _SIGN
