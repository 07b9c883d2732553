"""What `statefed produce` sends: keys and JSON values from the command line, made into
records that every view reading the topic accepts, or refused with what the topic needs.

Input lines hold whitespace-separated keys, or one `KEY=JSON` (that key with its own
value); `--value JSON` is the value of every key without one. A view that reads its event
time or value fields from the value (the pipeline's `Decoding.needs_json`) sends a record
whose value is not a JSON object to the dead letters, so such a topic refuses a key without
a value and a value that is not an object. Its event-time field defaults to now, as for
the gateway's `produce` mutation; one given must be a JSON number of whole ms since the
epoch. A topic whose views ignore the value (or that no view reads) takes any JSON value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from runtime.produce import Record
from schema import EnumOf, FieldType, KeyType, ListOf, ValueFormat, ValueType, View

__all__ = [
    "MAX_EVENT_MS",
    "KeyedValue",
    "ProduceInputError",
    "parse_value",
    "read_keys",
    "records_for",
]

# the first event time the pipeline cannot place (pipeline.records.MAX_EVENT_MS: year 10000)
MAX_EVENT_MS = 253_402_300_800_000
_EXAMPLES: dict[FieldType, object] = {
    FieldType.STRING: "text",
    FieldType.INT: 1,
    FieldType.LONG: 1,
    FieldType.FLOAT: 1.5,
    FieldType.BOOLEAN: True,
    FieldType.DECIMAL: "12.50",
    FieldType.TIMESTAMP: 1_767_225_600_000,
    FieldType.DATE: "2026-01-01",
}


def _example(value_type: ValueType) -> object:
    """A JSON value of `value_type` the pipeline reads (schema.fieldtypes)."""
    if isinstance(value_type, FieldType):
        return _EXAMPLES[value_type]
    if isinstance(value_type, EnumOf):
        return value_type.symbols[0]
    if isinstance(value_type, ListOf):
        return [_example(value_type.item)]
    return {f.in_value: _example(f.type) for f in value_type.fields}


class ProduceInputError(ValueError):
    """A key or value `statefed produce` will not send; says what the topic expects."""


@dataclass(frozen=True)
class KeyedValue:
    """One key to produce and its value as JSON text (None: no value given)."""

    key: str
    json: str | None = None


_JSON_VALUE_STARTS = ("{", "[", '"')  # the values of a line KEY=JSON


def parse_value(text: str, where: str) -> str:
    """`text` when it is JSON, else ProduceInputError naming `where` it came from."""
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ProduceInputError(
            f"{where}: {text!r} is not JSON ({exc}); a string value needs its quotes, "
            """e.g. '"text"', an object its braces, e.g. '{"trip": "ZRH-LIS"}'"""
        ) from exc
    return text


def read_keys(lines: Iterable[str], value: str | None = None) -> list[KeyedValue]:
    """The keys of `lines`: whitespace-separated keys, each with `value`, or a line
    `KEY=JSON`, that key with its own value: a JSON object, array or string (what a view
    can read), so a line `url?x=1` or `dGVzdA==` is a key holding '='."""
    shared = None if value is None else parse_value(value, "--value")
    found: list[KeyedValue] = []
    for number, line in enumerate(lines, start=1):
        if number == 1:
            line = line.removeprefix("\ufeff")  # a byte order mark some editors write
        key, equals, text = line.strip().partition("=")
        # KEY=JSON only where a value follows the '='; elsewhere it is part of a key
        paired = bool(equals) and text.strip().startswith(_JSON_VALUE_STARTS)
        if paired and key and not any(c.isspace() for c in key):
            found.append(KeyedValue(key, parse_value(text.strip(), f"line {number}, key {key!r}")))
        elif paired:
            raise ProduceInputError(
                f"line {number}: {line.strip()!r} is neither keys nor KEY=JSON (one key, no "
                "spaces, before the first '=')"
            )
        else:
            found.extend(KeyedValue(word, shared) for word in line.split())
    return found


def records_for(
    topic: str,
    views: Sequence[View],
    keyed: Iterable[KeyedValue],
    now_ms: int,
    max_ahead_ms: int,
    max_bytes: int | None = None,
) -> list[Record]:
    """The records of `keyed` for `topic`, read by `views`; ProduceInputError (naming the
    topic, the key and the value expected) for the first one a view would not accept, or
    when the views read keys or values this command does not write, for a key that is not
    UTF-8 text, and for a record of more than `max_bytes` (the producer's limit)."""
    _check_writable(topic, [v for v in views if v.topic == topic])
    decoding = [
        v for v in views if v.topic == topic and (v.event_time_field is not None or v.value_fields)
    ]
    records: list[Record] = []
    for item in keyed:
        if not item.key:
            raise ProduceInputError(f"topic {topic}: an empty key, which no lookup can read")
        key = _utf8(topic, item.key)
        if not decoding:
            value = b"" if item.json is None else item.json.encode("utf-8")
        else:
            value = _json_object(topic, decoding, item, now_ms, max_ahead_ms)
        if max_bytes is not None and len(key) + len(value) > max_bytes:
            raise ProduceInputError(
                f"topic {topic}: key {item.key!r} makes a record of {len(key) + len(value):,} "
                f"bytes, over the {max_bytes:,} the producer sends (message.max.bytes): send "
                "a smaller value, or raise STATEFED_KAFKA_MESSAGE_MAX_BYTES and the topic's "
                "max.message.bytes"
            )
        records.append(Record(item.key, value))
    return records


def _utf8(topic: str, key: str) -> bytes:
    """The key's UTF-8 bytes; ProduceInputError for text that came in another encoding (the
    bytes a UTF-8 reader could not decode stand in it as lone surrogates)."""
    try:
        return key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raw = key.encode("utf-8", "surrogateescape")
        raise ProduceInputError(
            f"topic {topic}: key {raw!r} is not UTF-8 text, and keys are written as UTF-8: "
            "convert the input first (e.g. `iconv -f latin1 -t utf-8`)"
        ) from exc


def _check_writable(topic: str, views: Sequence[View]) -> None:
    """statefed produce writes UTF-8 string keys and JSON values: refuse a topic whose views
    read other keys or values, whose records would all be dead letters."""
    for view in views:
        if view.key_type is not KeyType.STRING:
            raise ProduceInputError(
                f"topic {topic}: view {view.name} reads {view.key_type.value} keys, and this "
                f"command writes string keys; produce with Kafka's {view.key_type.serializer} "
                f"instead"
            )
        if view.value_format is not ValueFormat.JSON:
            raise ProduceInputError(
                f"topic {topic}: view {view.name} reads {view.value_format.value} values of "
                f"subject {view.subject}, and this command writes plain JSON; produce with "
                f"that format's serializer and the Schema Registry instead"
            )


def _json_object(
    topic: str, views: Sequence[View], item: KeyedValue, now_ms: int, max_ahead_ms: int
) -> bytes:
    document = None if item.json is None else orjson.loads(item.json)
    if not isinstance(document, dict):
        given = "no value" if item.json is None else f"the value {item.json}"
        raise ProduceInputError(
            f"topic {topic}: key {item.key!r} has {given}, but {_expected(views)}"
        )
    for view in views:
        field = view.event_time_field
        if field is None:
            continue
        moment = document.setdefault(field, now_ms)
        if not _whole_ms(moment):
            raise ProduceInputError(
                f"topic {topic}: key {item.key!r} has event time {field!r} = "
                f"{orjson.dumps(moment).decode()}, but view {view.name} needs a number of whole "
                f"ms since the epoch, 0 to {MAX_EVENT_MS - 1} (leave it out for now)"
            )
        if moment > now_ms + max_ahead_ms:  # the record's timestamp is about now
            raise ProduceInputError(
                f"topic {topic}: key {item.key!r} has event time {field!r} = {moment}, more "
                f"than {max_ahead_ms} ms after now ({now_ms}): the pipeline would make it a "
                f"dead letter, as it would move view {view.name}'s watermark past every event "
                f"to come (the bound is STATEFED_PIPELINE_MAX_AHEAD_MS)"
            )
    return orjson.dumps(document)


def _whole_ms(moment: Any) -> bool:
    if isinstance(moment, bool) or not isinstance(moment, int | float):
        return False
    return 0 <= moment < MAX_EVENT_MS and moment == int(moment)


def _expected(views: Sequence[View]) -> str:
    """What the views of a topic need of a value, with a --value that fits."""
    names = ", ".join(v.name for v in views)
    fields = {f.in_value: _example(f.type) for v in views for f in v.value_fields}
    times = sorted({v.event_time_field for v in views if v.event_time_field is not None})
    parts = [f"value fields {', '.join(fields)}"] if fields else []
    parts += [f"event time {t!r} in ms since the epoch, now when left out" for t in times]
    pairs = (f"{orjson.dumps(n).decode()}: {orjson.dumps(v).decode()}" for n, v in fields.items())
    example = "{" + ", ".join(pairs) + "}"
    return (
        f"views {names} read it as a JSON object ({'; '.join(parts)}): give one with "
        f"--value '{example}' or a line KEY={example}"
    )
