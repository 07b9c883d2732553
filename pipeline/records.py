"""Input records as a view sees them: a UTF-8 entity key, an event time and value fields.

How a view reads its records is its `Decoding`: the event time is the value field
`event_time_field` (ms since the epoch, or an Avro timestamp) or, when None, the Kafka
record timestamp; the `value_fields` are decoded from the value (a missing field is null):
a JSON object, or a value of the view's Schema Registry subject (`pipeline.wire`: Avro or
JSON Schema). A record
without a usable key, value or event time cannot be placed in the view; it goes to the
dead-letter topic with the reason from `reject_reason`. So does one whose Float field (or a
Float in a list or record field) is a NaN or an infinity (`not_finite`), as a key of one
does (`pipeline.keys`), and an Avro
value whose text in a field read as text is not UTF-8 (`not_utf8`).

An event time field more than `Decoding.max_ahead_ms` after its record's Kafka timestamp
(`event_time_ahead`) is a dead letter too: it would move a windowed view's watermark past
every event to come. It is judged against the record's own timestamp, so the view, the
dead-letter query and every replay judge a record alike.

A record with a null value is a tombstone, never a dead letter: a view that deletes
(`Decoding.tombstones`, latest) takes it as a deletion at its Kafka timestamp, a view that
reads values skips it, and a view that ignores values counts it as any record.

A view grouped by value fields (`schema.groups`) takes its key from them, not from the
record key, and dead-letters a value without a usable one (`pipeline.groups`).

On a topic of several types (`Decoding.shared`, `schema.SubjectStrategy`) a value of
another type's subject is skipped, never a dead letter, and so is a tombstone (its type
cannot be told); every view of such a topic decodes the value's header to tell them.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.errors import SourceError
from pipeline.groups import group_reason, group_text
from pipeline.keys import (
    REASON_BAD_UTF8,
    REASON_EMPTY_KEY,
    REASON_NO_KEY,
    key_reason,
    key_text,
    read_record_key,
)
from pipeline.shapes import mismatches
from pipeline.wire import RegisteredSchemas, foreign_value
from schema import (
    EnumOf,
    FieldType,
    KeyType,
    ListOf,
    RecordKey,
    RecordOf,
    ValueField,
    ValueType,
    View,
)

__all__ = [
    "MAX_EVENT_MS",
    "REASON_BAD_UTF8",
    "REASON_BAD_VALUE",
    "REASON_EMPTY_KEY",
    "REASON_NO_KEY",
    "REASON_NO_TIMESTAMP",
    "Decoding",
    "bad_event_time",
    "event_time_ahead",
    "keyed_events",
    "missing_event_time",
    "not_finite",
    "not_utf8",
    "reject_reason",
    "rejected_records",
]

REASON_NO_TIMESTAMP = "missing timestamp"
REASON_BAD_VALUE = "value is not a JSON object"

# Year 10000: later times overflow Spark's timestamps (and no real event is that late)
MAX_EVENT_MS = 253_402_300_800_000

_CORRUPT = "_corrupt_record"  # never a value field: those start with a lowercase letter
# each scalar from its text (a JSON field's, or an Avro value cast to string) to the form
# the changelog stores (schema.fieldtypes): a value that does not fit becomes null, or
# text that `field_value` shows as null
_STORED_SCALARS: dict[FieldType, Callable[[Column], Column]] = {
    FieldType.STRING: lambda text: text,
    FieldType.INT: lambda text: text.try_cast("int").cast("bigint"),  # null past 32 bits
    FieldType.LONG: lambda text: text.try_cast("bigint"),
    FieldType.FLOAT: lambda text: text.try_cast("double"),
    # only true and false: Spark's cast takes 1, yes, t and more, which no JSON Boolean is
    FieldType.BOOLEAN: lambda text: F.when(text.isin("true", "false"), text == "true"),
    FieldType.DECIMAL: lambda text: text,
    FieldType.TIMESTAMP: lambda text: F.coalesce(
        text.try_cast("bigint"), F.unix_millis(text.try_cast("timestamp"))
    ),
    FieldType.DATE: lambda text: text.try_cast("date").cast("string"),
}
_TEXT_STORED = (FieldType.STRING, FieldType.DECIMAL)  # stored as the decoded text itself


def missing_event_time(field: str) -> str:
    """The reason of a JSON value without its event time field (or with null there)."""
    return f"missing event time field {field!r}"


def not_finite(field: str) -> str:
    """The reason of a value whose Float field is a NaN or an infinity."""
    return (
        f"value field {field!r} is a NaN or an infinity, which GraphQL's Float cannot "
        f"carry (a sum, an average or a maximum of it would stay one for good)"
    )


def not_utf8(field: str) -> str:
    """The reason of an Avro value whose field read as text holds bytes that are not UTF-8."""
    return (
        f"value field {field!r} holds text that is not UTF-8 (Avro bytes, or a string "
        f"its producer did not encode as Avro requires)"
    )


def bad_event_time(field: str) -> str:
    """The reason of an event time that is no integer ms since the epoch up to year 9999."""
    return f"event time field {field!r} is not an integer of ms since the epoch"


def event_time_ahead(field: str, max_ahead_ms: int) -> str:
    """The reason of an event time too far after its record's Kafka timestamp."""
    return (
        f"event time field {field!r} is more than {max_ahead_ms} ms after the record's Kafka "
        f"timestamp: it would move windowed views' watermark past every event to come, and "
        f"win its key in latest views for good (the bound is STATEFED_PIPELINE_MAX_AHEAD_MS)"
    )


@dataclass(frozen=True)
class Decoding:
    """Where a view's event time comes from and which value fields it keeps; `avro` holds
    the schemas of values in a registry format (None: plain JSON values); `tombstones`: a
    null value deletes the key (its events get a `deleted` column)."""

    event_time_field: str | None = None
    value_fields: tuple[ValueField, ...] = ()
    registered: RegisteredSchemas | None = None
    tombstones: bool = False
    key_type: KeyType | RecordKey = KeyType.STRING
    shared: bool = False  # the topic carries other types, which are skipped (SubjectStrategy)
    # the value fields whose values are the key instead of the record's (schema.groups)
    group_by: tuple[ValueField, ...] = ()
    # how far after its Kafka record's timestamp an event time field may be (None: any)
    max_ahead_ms: int | None = None

    @classmethod
    def of(
        cls,
        view: View,
        registered: RegisteredSchemas | None = None,
        tombstones: bool = False,
        max_ahead_ms: int | None = None,
    ) -> Decoding:
        """The decoding of `view`; SourceError naming the view, the field and the subject
        when the newest schema lacks a field the view reads, or has a field of another
        structure (`pipeline.shapes`)."""
        by_name = {f.name: f for f in view.value_fields}
        decoding = cls(
            view.event_time_field,
            view.value_fields,
            registered,
            tombstones,
            view.key_type,
            view.shares_topic,
            tuple(by_name[name] for name in view.group_by),
            max_ahead_ms,
        )
        if registered is not None:
            names = registered.field_names()
            missing = [n for n in decoding.read_fields() if n not in names]
            if missing:
                raise SourceError(
                    f"view {view.name} reads value fields {missing}, which the newest schema "
                    f"of subject {registered.subject!r} ({_version(registered)}) does not "
                    f"have (its fields: {names}): fix the view's value_fields or "
                    f"event_time_field"
                )
            unfit = mismatches(view.value_fields, registered.shape())
            if unfit:
                raise SourceError(
                    f"view {view.name}: the newest schema of subject {registered.subject!r} "
                    f"({_version(registered)}) does not fit its value fields: "
                    f"{'; '.join(unfit)}: fix the view's value_fields (a record for a record, "
                    f"a ListOf for an array)"
                )
        return decoding

    @property
    def needs_value(self) -> bool:
        """Whether the record value must be decoded (else it is ignored): also to tell a
        value of the view's type from the others on a shared topic."""
        return self.event_time_field is not None or bool(self.value_fields) or self.shared

    @property
    def deletes(self) -> bool:
        """Whether a tombstone deletes its key: in a view that deletes, on a topic whose
        tombstones are of its type (not a shared one, where no one can tell)."""
        return self.tombstones and not self.shared

    def read_fields(self) -> list[str]:
        """The value fields it reads: the event time's, then `value_fields`."""
        names = [*self._time_fields(), *(f.in_value for f in self.value_fields)]
        return list(dict.fromkeys(names))

    def json_schema(self) -> str:
        """Every field read as a string (a JSON number or object as its text), typed later,
        so a field of an unexpected type is null rather than making the value corrupt."""
        names = self.read_fields()
        return ", ".join([*(f"`{n}` string" for n in names), f"`{_CORRUPT}` string"])

    def _time_fields(self) -> list[str]:
        return [] if self.event_time_field is None else [self.event_time_field]


def _version(registered: RegisteredSchemas) -> str:
    return f"version {registered.newest.number}, schema id {registered.newest.id}"


def _decoded(decoding: Decoding) -> Column:
    """The decoded value: a JSON object (null for an empty value, `_corrupt_record` set if
    not an object) or an Avro record; a null literal when the view ignores the value."""
    if not decoding.needs_value:
        return F.lit(None)
    if decoding.registered is not None:
        return decoding.registered.decoded(decoding.read_fields())
    options = {"columnNameOfCorruptRecord": _CORRUPT}
    return F.from_json(F.col("value").cast("string"), decoding.json_schema(), options)


def _event_ms(decoding: Decoding, parsed: Column) -> Column:
    """Event time in ms, null if missing or unusable; an integral JSON float is accepted."""
    if decoding.event_time_field is None:
        return F.unix_millis(F.col("timestamp"))
    registered = decoding.registered
    if registered is not None and registered.is_timestamp(decoding.event_time_field):
        ms = F.unix_millis(parsed[decoding.event_time_field].try_cast("timestamp"))
        return F.when((ms >= 0) & (ms < MAX_EVENT_MS), ms)
    as_double = parsed[decoding.event_time_field].try_cast("double")
    usable = (as_double >= 0) & (as_double < MAX_EVENT_MS) & (as_double == F.floor(as_double))
    return F.when(usable, as_double.cast("bigint"))


def _value_reason(decoding: Decoding, parsed: Column) -> Column:
    """Why a non-null value cannot be read (not JSON, not Avro), or null."""
    if decoding.registered is not None:
        return decoding.registered.reject_reason(parsed)
    return F.when(
        ~F.is_valid_utf8(F.col("value").cast("string"))
        | parsed.isNull()
        | parsed[_CORRUPT].isNotNull(),
        F.lit(REASON_BAD_VALUE),
    )


def _tombstone() -> Column:
    return F.col("value").isNull()


def reject_reason(decoding: Decoding, parsed: Column, key_read: Column | None = None) -> Column:
    """Why a raw Kafka row is unusable for views of `decoding`, or null if it is fine (a
    tombstone is: see the module's docs); `parsed` is the row's `_decoded(decoding)` and
    `key_read` its `_key_read(decoding)` (for a record key). The first reason that holds
    wins."""
    no_timestamp = F.when(F.col("timestamp").isNull(), F.lit(REASON_NO_TIMESTAMP))
    field = decoding.event_time_field
    # a grouped view's key is in the value: checked with it, after the value is readable
    of_key = (
        F.lit(None).cast("string") if decoding.group_by else key_reason(decoding.key_type, key_read)
    )
    if not decoding.needs_value:
        return F.coalesce(of_key, no_timestamp)
    value_reasons = [_value_reason(decoding, parsed)]
    if field is None:
        value_reasons.append(no_timestamp)
    else:
        event_ms = _event_ms(decoding, parsed)
        of_time = F.when(parsed[field].isNull(), F.lit(missing_event_time(field))).when(
            event_ms.isNull(), F.lit(bad_event_time(field))
        )
        ahead = decoding.max_ahead_ms
        if ahead is not None:  # the record's own timestamp: the same at every replay
            too_far = event_ms > F.unix_millis(F.col("timestamp")) + F.lit(ahead)
            of_time = of_time.when(too_far, F.lit(event_time_ahead(field, ahead)))
        value_reasons.append(of_time)
    if decoding.group_by:
        no_group = _group_text(decoding, parsed).isNull()
        value_reasons.append(F.when(no_group, F.lit(group_reason(decoding.group_by))))
    value_reasons.extend(_not_finite(decoding, parsed))
    value_reasons.extend(_not_utf8(decoding, parsed))
    of_value = F.when(~_tombstone(), F.coalesce(*value_reasons))
    if decoding.deletes:  # a deletion happens at its Kafka timestamp
        of_value = of_value.when(_tombstone(), no_timestamp)
    reason = F.coalesce(of_key, of_value)
    foreign = _foreign(decoding)
    return reason if foreign is None else F.when(~foreign, reason)


def _not_finite(decoding: Decoding, parsed: Column) -> list[Column]:
    """The reason of each value field holding a Float that is a NaN or an infinity (the
    text "NaN" or "Infinity" in JSON, an Avro or Protobuf double), in a list or record too
    (the changelog's JSON would hold null there), or null. Int and Long fields cannot be
    one: their casts make such text null."""
    reasons = []
    for value_field in decoding.value_fields:
        if _holds_float(value_field.type):
            bad = _bad_float(_stored_field(decoding, parsed, value_field), value_field.type)
            reasons.append(F.when(bad, F.lit(not_finite(value_field.name))))
    return reasons


def _holds_float(value_type: ValueType) -> bool:
    return _holds(value_type, lambda leaf: leaf is FieldType.FLOAT)


def _bad_float(stored: Column, value_type: ValueType) -> Column:
    """Whether `stored` (as `_stored` gives it) holds a NaN or an infinity; never null."""
    return _any_leaf(
        stored, value_type, _holds_float, lambda v: F.isnan(v) | (F.abs(v) == F.lit(math.inf))
    )


def _holds(value_type: ValueType, leaf: Callable[[ValueType], bool]) -> bool:
    """Whether `value_type`, or a list's item or a record's field in it, is a `leaf`."""
    if isinstance(value_type, ListOf):
        return _holds(value_type.item, leaf)
    if isinstance(value_type, RecordOf):
        return any(_holds(f.type, leaf) for f in value_type.fields)
    return leaf(value_type)


def _any_leaf(
    stored: Column,
    value_type: ValueType,
    holds: Callable[[ValueType], bool],
    bad: Callable[[Column], Column],
) -> Column:
    """Whether any value in `stored` (as `_stored` gives it) of a type `holds` says leads to
    one is `bad`, through lists and records; never null."""
    if isinstance(value_type, ListOf):
        item = value_type.item
        found = F.exists(stored, lambda v: _any_leaf(v, item, holds, bad))
        return F.coalesce(found, F.lit(False))
    if isinstance(value_type, RecordOf):
        fields = [f for f in value_type.fields if holds(f.type)]
        checks = (_any_leaf(stored[f.name], f.type, holds, bad) for f in fields)
        return functools.reduce(operator.or_, checks, F.lit(False))
    if holds(value_type):
        return F.coalesce(bad(stored), F.lit(False))
    return F.lit(False)


def _not_utf8(decoding: Decoding, parsed: Column) -> list[Column]:
    """The reason of each value field holding text that is not UTF-8, or null. Spark's Avro
    decoder checks no string, and casts bytes to text unchecked; the changelog writer's
    Arrow batch would then fail to decode on every replay. JSON text is checked whole
    (`_value_reason`), and Protobuf's comes from Python: no field of theirs can be one."""
    registered = decoding.registered
    if registered is None or registered.fields_as_text:
        return []
    reasons = []
    for value_field in decoding.value_fields:
        if _holds_text(value_field.type):
            stored = _stored(parsed[value_field.in_value], value_field.type)
            bad = _bad_text(stored, value_field.type)
            reasons.append(F.when(bad, F.lit(not_utf8(value_field.name))))
    return reasons


def _holds_text(value_type: ValueType) -> bool:
    """Whether a value of `value_type` is stored with its decoded text as it is (a Date's
    text is made anew, numbers are no text)."""
    return _holds(value_type, lambda leaf: isinstance(leaf, EnumOf) or leaf in _TEXT_STORED)


def _bad_text(stored: Column, value_type: ValueType) -> Column:
    """Whether `stored` (as `_stored` gives it) holds text that is not UTF-8; never null."""
    return _any_leaf(stored, value_type, _holds_text, lambda v: ~F.is_valid_utf8(v))


def _foreign(decoding: Decoding) -> Column | None:
    """Whether a row is a value of another type on a shared topic (skipped, never a dead
    letter); None when the topic carries one type."""
    if not decoding.shared or decoding.registered is None:
        return None
    return F.coalesce(foreign_value(decoding.registered), F.lit(False))


def _text_schema(value_type: ValueType) -> str:
    """The from_json schema that reads a JSON value of `value_type` with every scalar as
    text, typed later by `_stored` (a scalar of an unexpected type is null, not corrupt)."""
    if isinstance(value_type, ListOf):
        return f"array<{_text_schema(value_type.item)}>"
    if isinstance(value_type, RecordOf):
        fields = (f"`{f.in_value}`: {_text_schema(f.type)}" for f in value_type.fields)
        return f"struct<{', '.join(fields)}>"
    return "string"


def _stored(value: Column, value_type: ValueType) -> Column:
    """`value` (decoded from JSON text or Avro) in the form the changelog stores."""
    if isinstance(value_type, FieldType):
        return _STORED_SCALARS[value_type](value.cast("string"))
    if isinstance(value_type, EnumOf):
        text = value.cast("string")
        return F.when(text.isin(*value_type.symbols), text)  # another text: no value of it
    if isinstance(value_type, ListOf):
        return F.transform(value, lambda item: _stored(item, value_type.item))
    fields = (_stored(value[f.in_value], f.type).alias(f.name) for f in value_type.fields)
    return F.when(value.isNotNull(), F.struct(*fields))


def _field(decoding: Decoding, parsed: Column, value_field: ValueField) -> Column:
    """One value field, stored, under its name."""
    return _stored_field(decoding, parsed, value_field).alias(value_field.name)


def _stored_field(decoding: Decoding, parsed: Column, value_field: ValueField) -> Column:
    """One value field, stored: a JSON value's nested fields are parsed from its text."""
    value = parsed[value_field.in_value]
    as_text = decoding.registered is None or decoding.registered.fields_as_text
    if as_text and isinstance(value_field.type, ListOf):
        value = F.from_json(value, _text_schema(value_field.type))
    if as_text and isinstance(value_field.type, RecordOf):  # from_json makes a struct of
        parsed_record = F.from_json(value, _text_schema(value_field.type))  # nulls of "5"
        value = F.when(F.ltrim(value).startswith("{"), parsed_record)
    return _stored(value, value_field.type)


def _fields(decoding: Decoding, parsed: Column) -> Column:
    return F.struct(*(_field(decoding, parsed, f) for f in decoding.value_fields))


def _group_text(decoding: Decoding, parsed: Column) -> Column:
    """The key text of a grouped view's row, from its group fields as stored."""
    values = [_field(decoding, parsed, f) for f in decoding.group_by]
    return group_text(decoding.key_type, values)


def _key_text(decoding: Decoding, parsed: Column, key_read: Column | None) -> Column:
    if decoding.group_by:
        return _group_text(decoding, parsed)
    return key_text(decoding.key_type, key_read)


def _key_read(decoding: Decoding, name: str) -> dict[str, Column]:
    """The column `name` of a row's record key as `read_record_key` reads it (a Python UDF,
    so `_parsed` computes it once); none for a key of another type or a grouped view."""
    if isinstance(decoding.key_type, RecordKey) and not decoding.group_by:
        return {name: read_record_key(decoding.key_type)}
    return {}


def _column(columns: dict[str, Column], name: str) -> Column | None:
    return F.col(name) if name in columns else None


def _parsed(raw: DataFrame, columns: dict[str, Column]) -> DataFrame:
    """`raw` plus `columns`, each computed once per row.

    From a plain projection Spark would push the later filter down and inline the columns
    into it, parsing each JSON value once per reference (measured 4-5x slower); a filter
    on a generator's output stays above the generator.
    """
    one_row = F.array(F.struct(*(c.alias(name) for name, c in columns.items())))
    return raw.select("*", F.inline(one_row))


def keyed_events(raw: DataFrame, decoding: Decoding = Decoding()) -> DataFrame:
    """The usable rows of a raw Kafka stream: `key` (its key text), `event_ms`, `partition`,
    `offset`, `fields` (a struct of the value fields) and the raw `value`, and `deleted`
    (a tombstone) for a decoding with `tombstones`."""
    parsed = F.col("_json")
    columns = {"_json": _decoded(decoding), **_key_read(decoding, "_key")}
    key_read = _column(columns, "_key")
    usable = reject_reason(decoding, parsed, key_read).isNull()
    if decoding.needs_value and not decoding.deletes:
        usable = usable & ~_tombstone()  # skipped: this view reads values, or cannot tell
    foreign = _foreign(decoding)
    if foreign is not None:
        usable = usable & ~foreign  # another type's: skipped
    event_ms = _event_ms(decoding, parsed)
    deleted = []
    if decoding.tombstones:
        event_ms = F.when(_tombstone(), F.unix_millis(F.col("timestamp"))).otherwise(event_ms)
        deleted = [_tombstone().alias("deleted")]
    return (
        _parsed(raw, columns)
        .where(usable)
        .select(
            _key_text(decoding, parsed, key_read).alias("key"),
            event_ms.alias("event_ms"),
            F.col("partition"),
            F.col("offset"),
            _fields(decoding, parsed).alias("fields"),
            F.col("value"),
            *deleted,
        )
    )


def rejected_records(raw: DataFrame, decodings: Sequence[Decoding] = (Decoding(),)) -> DataFrame:
    """The raw rows unusable for at least one of `decodings` (the views of one topic), with
    the `reason` of the first decoding that rejects them."""
    if not decodings:
        raise ValueError("rejected_records needs at least one decoding")
    columns: dict[str, Column] = {}
    for i, decoding in enumerate(decodings):
        columns |= {f"_json{i}": _decoded(decoding), **_key_read(decoding, f"_key{i}")}
    reasons = [
        reject_reason(d, F.col(f"_json{i}"), _column(columns, f"_key{i}"))
        for i, d in enumerate(decodings)
    ]
    with_reason = _parsed(raw, columns).withColumn("reason", F.coalesce(*reasons))
    return with_reason.where(F.col("reason").isNotNull()).drop(*columns)
