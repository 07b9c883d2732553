"""Each view kind's applier: one changelog record (as the pipeline writes it) becomes
store changes; a record it cannot read is an error the materializer skips."""

from __future__ import annotations

import pytest
from confluent_kafka import Message

from node.errors import SerializationError
from node.storage.changes import ChangeBatch
from node.storage.kinds import KINDS
from schema import (
    DEMO_DOMAIN,
    WORD_COUNTS,
    CountRow,
    EventRow,
    View,
    ViewKind,
    WindowRow,
    encode_count,
    encode_event,
    encode_window,
    event_record_key,
    pack,
    window_record_key,
)

WINDOWED, LATEST, HISTORY, AGGREGATE = DEMO_DOMAIN[1:5]


def apply(view: View, key: bytes, value: bytes | None) -> ChangeBatch:
    batch = ChangeBatch()
    message = Message(topic=view.changelog_topic, partition=0, offset=0, key=key, value=value)
    KINDS[view.kind].apply(batch, view, message)
    return batch


def _event(start: bytes) -> bytes:
    """An event changelog value that starts with `start` (its "key") and is whole after."""
    return start + b' "event_ms": 1, "source_partition": 0, "source_offset": 0, "fields": {}}'


def test_every_kind_is_served_and_only_windows_expire() -> None:
    assert set(KINDS) == set(ViewKind)
    expiring = [kind for kind, node_kind in KINDS.items() if node_kind.expire is not None]
    assert expiring == [ViewKind.WINDOWED_COUNT, ViewKind.WINDOWED_AGGREGATE]


def test_count_records() -> None:
    row = CountRow("kafka", 3, 7)
    assert apply(WORD_COUNTS, b"kafka", encode_count(row)).counts == {
        (WORD_COUNTS.name, "kafka"): row
    }
    assert apply(WORD_COUNTS, b"kafka", None).counts == {(WORD_COUNTS.name, "kafka"): None}


def test_window_records_and_tombstones() -> None:
    row = WindowRow("h", 60_000, 120_000, 4, 61_000)
    batch = apply(WINDOWED, window_record_key(row), encode_window(row))
    assert batch.windows == {(WINDOWED.name, "h", 60_000): row}
    tombstone = apply(WINDOWED, window_record_key(row), None)
    assert tombstone.windows == {(WINDOWED.name, "h", 60_000): None}


def test_latest_records_and_tombstones() -> None:
    row = EventRow("c", 5, 1, 2, {"trip": "x"})
    assert apply(LATEST, b"c", encode_event(row)).latest == {(LATEST.name, "c"): row}
    assert apply(LATEST, b"c", None).latest == {(LATEST.name, "c"): None}


def test_history_records_and_tombstones() -> None:
    row = EventRow("c", 5, 1, 2, {"trip": "x"})
    key = event_record_key(row)
    assert apply(HISTORY, key, encode_event(row)).events == {(HISTORY.name, "c", (5, 1, 2)): row}
    assert apply(HISTORY, key, None).events == {(HISTORY.name, "c", (5, 1, 2)): None}


@pytest.mark.parametrize(
    ("view", "key", "value"),
    [
        (WINDOWED, b"k", b"not json"),
        (WINDOWED, b"k", encode_window(WindowRow("k", 0, 0, 1, 0))),  # empty window
        (WINDOWED, pack("h"), None),  # tombstone without the window start
        (WINDOWED, pack("h", 1)[:-3], None),  # cut short
        (WINDOWED, b"\xff", None),
        (LATEST, b"c", b'{"key": "c"}'),
        (LATEST, b"c", encode_event(EventRow("c", -5, 0, 0))),
        (LATEST, b"\xff", None),
        (HISTORY, pack("c", 1, 2), None),
        (HISTORY, pack("c", "x", 2, 3), None),
        (
            HISTORY,
            b"c",
            b'{"key": "c", "event_ms": 1, "source_partition": 0, "source_offset": 0, "fields": []}',
        ),
        # valid JSON of the wrong shape: no object, or a "key" that is no text
        (WORD_COUNTS, b"k", b'{"key": 5, "count": 1, "last_event_ms": 1}'),
        (WORD_COUNTS, b"k", b'{"key": null, "count": 1, "last_event_ms": 1}'),
        (WORD_COUNTS, b"k", b'"not an object"'),
        (WINDOWED, pack("k", 0), b"[1, 2]"),
        (
            WINDOWED,
            pack("k", 0),
            b'{"key": 5, "start_ms": 0, "end_ms": 1, "count": 1, "last_event_ms": 0}',
        ),
        (LATEST, b"c", b"[1, 2]"),
        (LATEST, b"c", _event(b'{"key": 5,')),
        (HISTORY, pack("c", 1, 0, 0), b"null"),
        (HISTORY, pack("c", 1, 0, 0), _event(b'{"key": null,')),
        (AGGREGATE, b"c", _event(b'{"key": [],')),
        # integers beyond the store's signed 64-bit times
        (WORD_COUNTS, b"k", b'{"key": "k", "count": 1, "last_event_ms": 1e30}'),
        (WINDOWED, pack("k", 0), encode_window(WindowRow("k", 0, 2**63, 1, 0))),
        (
            WINDOWED,
            pack("k", 0),
            b'{"key": "k", "start_ms": 0, "end_ms": 1, "count": 1, "last_event_ms": -1e30}',
        ),
    ],
)
def test_unreadable_records_are_errors_the_materializer_skips(
    view: View, key: bytes, value: bytes | None
) -> None:
    with pytest.raises((ValueError, SerializationError)):
        apply(view, key, value)
