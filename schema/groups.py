"""Re-keying: an aggregate view (windowed or not) grouped by value fields instead of the record key.

`View(group_by=("product",), key_field="product", key_type=KeyType.STRING, ...)` keeps one
row per product of an orders topic keyed by customer. The fields' values make the key,
declared as any key is (`key_type`): a `KeyType` for one field (STRING for a String or an
enum, INT, LONG), a `RecordKey` of the fields, in the same order and of the same types,
for several. The view's rows are then keyed, partitioned and looked up by that key as if
a producer had written it as the record key; the record key itself is not read.

An event whose group fields are missing or not of their types (or whose only field is an
empty string, which no lookup can ask for) cannot be placed: it goes to the dead letters.
"""

from __future__ import annotations

from schema.fieldtypes import EnumOf, FieldType, ValueField, ValueType
from schema.keytypes import KeyType
from schema.recordkeys import KeyField, RecordKey

__all__ = ["check_group_by", "group_key_type"]

# the key type a group field of each value type makes
_KEY_TYPES: dict[FieldType, KeyType] = {
    FieldType.STRING: KeyType.STRING,
    FieldType.INT: KeyType.INT,
    FieldType.LONG: KeyType.LONG,
}


def _key_type_of(value_type: ValueType) -> KeyType | None:
    if isinstance(value_type, EnumOf):
        return KeyType.STRING
    return _KEY_TYPES.get(value_type) if isinstance(value_type, FieldType) else None


def group_key_type(fields: tuple[ValueField, ...]) -> KeyType | RecordKey:
    """The key type the group fields `fields` make (every one a String, an enum, an Int
    or a Long): a `KeyType` for one, a `RecordKey` of them for several."""
    parts = []
    for value_field in fields:
        key_type = _key_type_of(value_field.type)
        if key_type is None:
            raise ValueError(f"group field {value_field.name} is no String, enum, Int or Long")
        parts.append(KeyField(value_field.name, key_type))
    return parts[0].type if len(parts) == 1 else RecordKey(tuple(parts))


def check_group_by(
    view: str,
    group_by: tuple[str, ...],
    fields: tuple[ValueField, ...],
    key_field: str,
    key_type: KeyType | RecordKey,
) -> None:
    """ValueError naming `view` and the fix unless `group_by` names distinct value fields
    of key types and `key_type` is the key they make (the view's kind is `View`'s to
    check: only aggregates are grouped)."""
    by_name = {f.name: f for f in fields}
    unknown = [name for name in group_by if name not in by_name]
    if unknown or len(set(group_by)) != len(group_by):
        raise ValueError(
            f"view {view}: group_by {list(group_by)} must name distinct value fields of the "
            f"view (unknown: {unknown}; value fields: {list(by_name)})"
        )
    grouped = tuple(by_name[name] for name in group_by)
    unfit = [f.name for f in grouped if _key_type_of(f.type) is None]
    if unfit:
        raise ValueError(
            f"view {view}: group field(s) {unfit} must be String, an enum, Int or Long to "
            f"make a key"
        )
    if len(group_by) == 1 and key_field != group_by[0]:
        raise ValueError(
            f"view {view}: its key is its group field {group_by[0]!r}: set "
            f"key_field={group_by[0]!r}"
        )
    wanted = group_key_type(grouped)
    if key_type != wanted:
        raise ValueError(
            f"view {view}: its key is its group fields {list(group_by)}: declare "
            f"key_type={_source(wanted)}"
        )


def _source(key_type: KeyType | RecordKey) -> str:
    """`key_type` as the Python a catalogue declares it with."""
    if isinstance(key_type, KeyType):
        return f"KeyType.{key_type.name}"
    parts = ", ".join(
        f'KeyField("{f.name}")'
        if f.type is KeyType.STRING
        else f'KeyField("{f.name}", KeyType.{f.type.name})'
        for f in key_type.fields
    )
    return f"RecordKey(({parts},))" if len(key_type.fields) == 1 else f"RecordKey(({parts}))"
