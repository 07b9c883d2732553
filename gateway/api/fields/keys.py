"""Keys in GraphQL: each view's key argument and key field have its key type's GraphQL type
(String, Int, Long or Float), and become its key text (schema.keytypes) on the way in and
the typed key on the way out. Everything below the API reads and routes key texts.

A `Long` is written as a string of decimal digits, since a JavaScript number cannot hold
every 64-bit integer; as an argument it is taken as an Int or as such a string.
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
from collections.abc import Sequence
from typing import Any

from gateway.model.errors import BadRequestError
from runtime.valuetypes import LONG_SCALAR, Long, parse_long
from schema import KeyType, View

__all__ = ["LONG_SCALAR", "Long", "key_annotation", "key_texts", "key_value", "representation_key"]

_ANNOTATIONS: dict[KeyType, Any] = {
    KeyType.STRING: str,
    KeyType.INT: int,
    KeyType.LONG: Long,
    KeyType.DOUBLE: float,
}


def key_annotation(view: View) -> Any:
    """The annotation of `view`'s key argument and key field."""
    return _ANNOTATIONS[view.key_type]


def key_value(view: View, text: str) -> Any:
    """The key whose key text is `text`, as `view`'s key field shows it."""
    return view.key_type.from_text(text)


def key_texts(view: View, keys: Sequence[Any]) -> list[str]:
    """The key texts of keys given as arguments; BadRequestError naming a key that is no
    value of the view's key type (a NaN or an infinity)."""
    if view.key_type is KeyType.STRING:
        return list(keys)
    try:
        return [view.key_type.text(key) for key in keys]
    except ValueError as exc:
        raise BadRequestError(view.name, f"{view.key_field}: {exc}") from exc


def representation_key(view: View, value: Any) -> str | None:
    """The key text of the key of an `_entities` representation (JSON: a Long may be a
    string of digits), or None when it is no key of the view's type."""
    if view.key_type is KeyType.STRING:
        return value if isinstance(value, str) and value else None
    try:
        if view.key_type is KeyType.LONG:
            value = parse_long(value)
        return view.key_type.text(value)
    except ValueError:
        return None
