"""Keys in GraphQL: each view's key argument and key fields have its key type's GraphQL
types, and become its key text (schema.keytypes, schema.recordkeys) on the way in and the
typed key on the way out. Everything below the API reads and routes key texts.

A scalar key (String, Int, Long or Float) is one argument and one field, both named
`key_field`. A record key's fields are fields of the view's type each, its entities are
found by all of them (`@key(fields: "region order")`), and a lookup takes `key_field` as
an input object of them (`<TypeName>Key`).

A `Long` is written as a string of decimal digits, since a JavaScript number cannot hold
every 64-bit integer; as an argument it is taken as an Int or as such a string.
"""

# No `from __future__ import annotations`: strawberry reads the resolvers' annotations,
# which name types created at run time, so they must be real objects, not strings.
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import strawberry

from gateway.model.errors import BadRequestError
from runtime.valuetypes import LONG_SCALAR, Long, parse_long
from schema import KeyType, RecordKey, View

__all__ = [
    "LONG_SCALAR",
    "Long",
    "key_annotation",
    "key_fields",
    "key_names",
    "key_texts",
    "key_values",
    "representation_key",
]

FieldSpec = tuple[str, Any, str | None]

_ANNOTATIONS: dict[KeyType, Any] = {
    KeyType.STRING: str,
    KeyType.INT: int,
    KeyType.LONG: Long,
    KeyType.DOUBLE: float,
}


def key_annotation(view: View) -> Any:
    """The annotation of `view`'s key argument: its scalar, or `<TypeName>Key`."""
    if isinstance(view.key_type, RecordKey):
        return _key_input(view)
    return _ANNOTATIONS[view.key_type]


def key_names(view: View) -> tuple[str, ...]:
    """The fields of `view`'s type that hold its key (its `@key(fields: ...)`)."""
    if isinstance(view.key_type, RecordKey):
        return view.key_type.names
    return (view.key_field,)


def key_fields(view: View) -> list[FieldSpec]:
    """The fields of `view`'s type that hold its key, as `object_type` takes them."""
    if isinstance(view.key_type, RecordKey):
        return [(f.name, _ANNOTATIONS[f.type], None) for f in view.key_type.fields]
    return [(view.key_field, _ANNOTATIONS[view.key_type], None)]


def key_values(view: View, text: str) -> dict[str, Any]:
    """The key whose key text is `text`, by the names of `key_fields(view)`."""
    # a string key's text is the key: skip `from_text`'s call for every row of most views
    if view.key_type is KeyType.STRING:
        return {view.key_field: text}
    if isinstance(view.key_type, RecordKey):
        return view.key_type.from_text(text)
    return {view.key_field: view.key_type.from_text(text)}


def key_texts(view: View, keys: Sequence[Any]) -> list[str]:
    """The key texts of keys given as arguments; BadRequestError naming a key that is no
    value of the view's key type (a NaN or an infinity)."""
    key_type = view.key_type
    if key_type is KeyType.STRING:
        return list(keys)
    try:
        if isinstance(key_type, RecordKey):
            return [key_type.text(_given_record(key_type, key)) for key in keys]
        return [key_type.text(key) for key in keys]
    except ValueError as exc:
        raise BadRequestError(view.name, f"{view.key_field}: {exc}") from exc


def representation_key(view: View, representation: Mapping[str, Any]) -> str | None:
    """The key text of the key of an `_entities` representation (JSON: a Long may be a
    string of digits), or None when it holds no key of the view's type."""
    key_type = view.key_type
    try:
        if isinstance(key_type, RecordKey):
            fields = {
                f.name: _json_key(f.type, representation.get(f.name)) for f in key_type.fields
            }
            return key_type.text(fields)
        value = representation.get(view.key_field)
        if key_type is KeyType.STRING:
            return value if isinstance(value, str) and value else None
        return key_type.text(_json_key(key_type, value))
    except ValueError:
        return None


def _json_key(key_type: KeyType, value: Any) -> Any:
    return parse_long(value) if key_type is KeyType.LONG else value


def _attribute(name: str) -> str:
    return f"f_{name}"  # as gateway.api.fields.common names attributes: never a keyword


def _given_record(record_key: RecordKey, key: Any) -> dict[str, Any]:
    """The fields of a record key argument: an input object (a resolver's), or the dict
    of its coerced value by GraphQL name (the fast path's)."""
    if isinstance(key, Mapping):
        return {name: key.get(name) for name in record_key.names}
    return {name: getattr(key, _attribute(name)) for name in record_key.names}


@functools.cache
def _key_input(view: View) -> Any:
    """`<TypeName>Key`: the input object of a record key's fields."""
    assert isinstance(view.key_type, RecordKey)
    namespace: dict[str, Any] = {"__annotations__": {}}
    for field in view.key_type.fields:
        namespace["__annotations__"][_attribute(field.name)] = _ANNOTATIONS[field.type]
        namespace[_attribute(field.name)] = strawberry.field(name=field.name)
    description = f"A key of view {view.name}: the fields of its topic's JSON record keys."
    return strawberry.input(type(f"{view.type_name}Key", (), namespace), description=description)
