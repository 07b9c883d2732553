"""The changelog records: what the pipeline writes and the nodes materialize.

Topic `statefed.<view>.changelog`, same partition count as the view's input topic,
explicit partition = `partition_for(entity key, P)`, value = JSON. A record is always an
idempotent upsert, so replaying a micro-batch is harmless:
- count: the FULL current count of a key (never a delta); record key = entity key.
- windowed_count: the full count of one (key, window); record key = pack(key, start).
- windowed_aggregate: as windowed_count, with the window's results (`fields`).
- latest: the newest event of a key by event time; record key = entity key.
- history: one event, identified by (key, event time, source partition, source offset);
  record key = pack(key, event time, source partition, source offset).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from schema.keycodec import pack

__all__ = [
    "DEADLETTER_TOPIC",
    "CountRow",
    "EventRow",
    "WindowRow",
    "decode_count",
    "decode_event",
    "decode_window",
    "encode_count",
    "encode_event",
    "encode_window",
    "event_record_key",
    "window_record_key",
]

DEADLETTER_TOPIC = "statefed.deadletter"

_DECODE_ERRORS = (orjson.JSONDecodeError, KeyError, TypeError, ValueError)


def _document(value: bytes) -> dict[str, Any]:
    """A changelog value's JSON object, whose "key" is text."""
    doc = orjson.loads(value)
    if not isinstance(doc, dict):
        raise TypeError("it is not a JSON object")
    if not isinstance(doc["key"], str):
        raise TypeError('its "key" is not text')
    return doc


def _undecodable(kind: str, value: bytes, exc: Exception) -> ValueError:
    """The error for a `kind` changelog value that `exc` showed to be of the wrong shape."""
    why = f"it has no {exc} field" if isinstance(exc, KeyError) else str(exc)
    return ValueError(f"undecodable {kind} changelog value {value[:200]!r}: {why}")


@dataclass(frozen=True)
class CountRow:
    """Events seen for one key, and the newest event time among them (ms since epoch)."""

    key: str
    count: int
    last_event_ms: int


@dataclass(frozen=True)
class WindowRow:
    """Events of one key in the window [start_ms, end_ms); and, of a windowed aggregate
    view, the window's results by name (`fields`)."""

    key: str
    start_ms: int
    end_ms: int
    count: int
    last_event_ms: int
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EventRow:
    """One input event of a key (latest and history views): its event time, where it was
    read from (the tie-break among equal event times: later offset wins) and its decoded
    value fields."""

    key: str
    event_ms: int
    source_partition: int
    source_offset: int
    fields: dict[str, Any] = field(default_factory=dict)


def encode_count(row: CountRow) -> bytes:
    return orjson.dumps({"key": row.key, "count": row.count, "last_event_ms": row.last_event_ms})


def decode_count(value: bytes) -> CountRow:
    try:
        doc = _document(value)
        return CountRow(doc["key"], int(doc["count"]), int(doc["last_event_ms"]))
    except _DECODE_ERRORS as exc:
        raise _undecodable("count", value, exc) from exc


def window_record_key(row: WindowRow) -> bytes:
    return pack(row.key, row.start_ms)


def encode_window(row: WindowRow) -> bytes:
    return orjson.dumps(
        {
            "key": row.key,
            "start_ms": row.start_ms,
            "end_ms": row.end_ms,
            "count": row.count,
            "last_event_ms": row.last_event_ms,
            "fields": row.fields,  # a windowed aggregate view's results; {} for counts
        }
    )


def decode_window(value: bytes) -> WindowRow:
    try:
        doc = _document(value)
        fields = doc.get("fields", {})  # absent from windows written before windowed aggregates
        if not isinstance(fields, dict):
            raise TypeError("fields is not an object")
        return WindowRow(
            doc["key"],
            int(doc["start_ms"]),
            int(doc["end_ms"]),
            int(doc["count"]),
            int(doc["last_event_ms"]),
            fields,
        )
    except _DECODE_ERRORS as exc:
        raise _undecodable("window", value, exc) from exc


def event_record_key(row: EventRow) -> bytes:
    return pack(row.key, row.event_ms, row.source_partition, row.source_offset)


def encode_event(row: EventRow) -> bytes:
    return orjson.dumps(
        {
            "key": row.key,
            "event_ms": row.event_ms,
            "source_partition": row.source_partition,
            "source_offset": row.source_offset,
            "fields": row.fields,
        }
    )


def decode_event(value: bytes) -> EventRow:
    try:
        doc = _document(value)
        fields = doc["fields"]
        if not isinstance(fields, dict):
            raise TypeError("fields is not an object")
        return EventRow(
            doc["key"],
            int(doc["event_ms"]),
            int(doc["source_partition"]),
            int(doc["source_offset"]),
            fields,
        )
    except _DECODE_ERRORS as exc:
        raise _undecodable("event", value, exc) from exc
