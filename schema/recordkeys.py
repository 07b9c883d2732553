"""Record keys: a key of several fields, written as a JSON object.

A topic keyed by a record (`{"region":"eu","order":42}`) is written by a JSON serializer:
Jackson's `ObjectMapper` (Spring Kafka's `JsonSerializer`, Kafka Connect's `JsonConverter`
with `schemas.enable=false`). They write the object compact, its fields in the order the
producer declares them, and Kafka places the record by `murmur2` of those bytes. So does
statefed: a view names the key's fields in that order (`RecordKey`), and the bytes of a
key are the compact JSON Jackson writes for it:

- no whitespace; the fields in the view's order, each once, no others;
- a string escapes `"`, `\\` and the control characters (`\\n`, `\\t`, `\\r`, `\\b`, `\\f`, the rest
  as `\\u00XX` with capital hex digits) and writes a character beyond U+FFFF as its escaped
  surrogate pair (`\\uD83D\\uDE00`, as Jackson 2's UTF-8 writer does by default); every other
  character is itself in UTF-8 (no `/` or non-ASCII escaped);
- an int or a long as its decimal digits.

A key written otherwise (spaces, other field order, a missing or extra field) would lie
on a partition no lookup of it can predict; the pipeline dead-letters it, saying so.

Fields are strings, ints or longs (a double's text differs between Java and others).

Inside statefed the key is one *key text* (as for scalar keys, `schema.keytypes`): the
fields' texts in order, so key texts sort as the keys do field by field. A number field is
its 16 sortable hex digits; a string field is its text with each NUL written as NUL + 0x01,
then NUL + NUL (nothing sorts below the end of a field).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schema.keytypes import KeyType, partition_of_bytes

__all__ = ["KeyField", "RecordKey"]

_END = "\x00\x00"  # after each string field's text
_NUL = "\x00\x01"  # a NUL inside a string field
_NUMBER_DIGITS = 16
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a GraphQL name
_PART_TYPES = (KeyType.STRING, KeyType.INT, KeyType.LONG)
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n"}
_SHORT_ESCAPES |= {"\r": "\\r", "\t": "\\t"}


@dataclass(frozen=True)
class KeyField:
    """One field of a record key: its name (in the JSON and in GraphQL) and its type."""

    name: str
    type: KeyType = KeyType.STRING

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"key field {self.name!r} is no GraphQL name ({_NAME.pattern})")
        if self.name.startswith("__"):
            raise ValueError(
                f"key field {self.name!r} starts with '__', which GraphQL keeps for its own "
                f"names (__typename): rename it"
            )
        if self.type not in _PART_TYPES:
            raise ValueError(
                f"key field {self.name!r} is a {self.type.value}: a record key's fields are "
                f"strings, ints or longs"
            )


@dataclass(frozen=True)
class RecordKey:
    """A key of several fields, written as compact JSON with `fields` in this order."""

    fields: tuple[KeyField, ...]

    def __post_init__(self) -> None:
        names = [part.name for part in self.fields]
        if len(names) < 1:
            raise ValueError("a record key needs at least one field")
        if len(set(names)) != len(names):
            raise ValueError(f"a record key names a field twice: {names}")

    @property
    def value(self) -> str:
        """The key type's name in messages and docs."""
        return "record"

    @property
    def serializer(self) -> str:
        """What writes keys of this type."""
        return "JSON serializer (Jackson's ObjectMapper, compact)"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(part.name for part in self.fields)

    def serialize(self, key: Mapping[str, Any]) -> bytes:
        """The JSON bytes Jackson writes for `key`; ValueError naming a missing, extra or
        ill-typed field."""
        self._check(key)
        members = (f"{_json_string(p.name)}:{_json_value(p, key[p.name])}" for p in self.fields)
        return ("{" + ",".join(members) + "}").encode("utf-8")

    def deserialize(self, data: bytes) -> dict[str, Any]:
        """The key whose bytes are `data`; ValueError when they are no key of this type or
        not as Jackson writes it (then no lookup could find its partition)."""
        try:
            key = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"key is not JSON: {exc}") from None
        except RecursionError:  # e.g. a thousand `[`: no key nests, and it must not crash
            raise ValueError(f"key is not JSON: nested too deeply: {data[:80]!r}") from None
        if not isinstance(key, dict):
            raise ValueError(f"key is not a JSON object: {data[:80]!r}")
        if self.serialize(key) != data:
            raise ValueError(
                f"key is not compact JSON with fields {list(self.names)}: {data[:200]!r}"
            )
        return key

    def text(self, key: Mapping[str, Any]) -> str:
        """The key text of `key`: its fields' texts in order."""
        self._check(key)
        return "".join(_part_text(part, key[part.name]) for part in self.fields)

    def from_text(self, text: str) -> dict[str, Any]:
        """The key whose key text is `text`; ValueError when it is no key text of this type."""
        key: dict[str, Any] = {}
        at = 0
        for part in self.fields:
            if part.type is KeyType.STRING:
                end = _string_end(text, at)
                key[part.name] = text[at:end].replace(_NUL, "\x00")
                at = end + len(_END)
            else:
                key[part.name] = part.type.from_text(text[at : at + _NUMBER_DIGITS])
                at += _NUMBER_DIGITS
        if at != len(text):
            raise ValueError(f"{text!r} is no key text of a record key {list(self.names)}")
        return key

    def partition(self, text: str, partitions: int) -> int:
        """The partition of the key whose key text is `text` among `partitions`."""
        return partition_of_bytes(self.serialize(self.from_text(text)), partitions)

    def _check(self, key: Mapping[str, Any]) -> None:
        extra = sorted(set(key) - set(self.names))
        missing = [name for name in self.names if name not in key]
        if missing or extra:
            raise ValueError(
                f"a key has fields {list(self.names)}: missing {missing}, extra {extra}"
            )
        for part in self.fields:
            _part_text(part, key[part.name])  # raises naming a value of another type


def _part_text(part: KeyField, value: Any) -> str:
    try:
        if part.type is KeyType.STRING:
            return str(part.type.text(value)).replace("\x00", _NUL) + _END
        return part.type.text(value)
    except ValueError as exc:
        raise ValueError(f"key field {part.name!r}: {exc}") from None


def _string_end(text: str, at: int) -> int:
    """Where the string field starting at `at` ends (its NUL + NUL)."""
    index = at
    while True:
        index = text.find("\x00", index)
        if index < 0 or index + 1 >= len(text):
            raise ValueError(f"{text!r} has a string key field without its end")
        if text[index + 1] == "\x00":
            return index
        if text[index + 1] != "\x01":
            raise ValueError(f"{text!r} has a NUL not followed by 0x00 or 0x01")
        index += 2


def _json_value(part: KeyField, value: Any) -> str:
    return _json_string(value) if part.type is KeyType.STRING else str(value)


def _json_string(text: str) -> str:
    """`text` as Jackson writes a JSON string."""
    out = ['"']
    for char in text:
        escaped = _SHORT_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        elif char > "\uffff":
            offset = ord(char) - 0x10000
            out.append(f"\\u{0xD800 + (offset >> 10):04X}\\u{0xDC00 + (offset & 0x3FF):04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)
