"""The changes of one poll batch for one partition store, of every view kind.

A `ChangeBatch` is what the materializer builds from the changelog records of one poll
and a store writes atomically. Every record is validated here, while the batch is built,
so one bad record is skipped by the materializer and never fails the whole write. Each
entry remembers the changelog offset of the record that set it (`reading`), so that the
changes a store's `apply` made take effect can go to the change feed (`changes`, node.feed)
as `schema.feed.Change`s whose rows are the changelog values' JSON objects.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from node.errors import SerializationError
from schema import MAX_UINT, CountRow, EventRow, WindowRow
from schema.feed import Change

__all__ = ["ChangeBatch", "EventPosition", "count_doc", "event_doc", "position", "window_doc"]

# (event_ms, source_partition, source_offset): the order of a key's events
EventPosition = tuple[int, int, int]


def position(row: EventRow) -> EventPosition:
    """Where `row` sorts among its key's events; the greatest is the latest."""
    return (row.event_ms, row.source_partition, row.source_offset)


def count_doc(row: CountRow) -> dict[str, Any]:
    """The JSON object of `row`'s changelog value (schema.encode_count)."""
    return {"key": row.key, "count": row.count, "last_event_ms": row.last_event_ms}


def window_doc(row: WindowRow) -> dict[str, Any]:
    """The JSON object of `row`'s changelog value (schema.encode_window)."""
    return {"key": row.key, "start_ms": row.start_ms, "end_ms": row.end_ms,
            "count": row.count, "last_event_ms": row.last_event_ms}  # fmt: skip


def event_doc(row: EventRow) -> dict[str, Any]:
    """The JSON object of `row`'s changelog value (schema.encode_event)."""
    return {"key": row.key, "event_ms": row.event_ms, "source_partition": row.source_partition,
            "source_offset": row.source_offset, "fields": row.fields}  # fmt: skip


def _check_uint(view: str, key: str, what: str, value: int) -> None:
    if not 0 <= value <= MAX_UINT:
        raise SerializationError(f"view {view}: key {key!r} has {what} {value}")


def _check_key(view: str, key: str) -> None:
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SerializationError(f"view {view}: key {key!r} is not UTF-8 text") from exc


def _check_event(view: str, row: EventRow) -> None:
    _check_key(view, row.key)
    for what, value in zip(("event_ms", "partition", "offset"), position(row), strict=True):
        _check_uint(view, row.key, what, value)


@dataclass
class ChangeBatch:
    """Upserts and deletes per view kind, window expiry horizons and new offsets.

    A later change of the same entry replaces an earlier one (changelog values are
    absolute), except for latest rows, where the event with the greatest position wins.
    `horizons[view]` expires that windowed view's windows with end <= the horizon.
    """

    counts: dict[tuple[str, str], CountRow | None] = field(default_factory=dict)
    windows: dict[tuple[str, str, int], WindowRow | None] = field(default_factory=dict)
    latest: dict[tuple[str, str], EventRow | None] = field(default_factory=dict)
    events: dict[tuple[str, str, EventPosition], EventRow | None] = field(default_factory=dict)
    horizons: dict[str, int] = field(default_factory=dict)
    offsets: dict[str, int] = field(default_factory=dict)
    # the offset of the record that set each entry, keyed (kind letter, *entry key)
    origins: dict[tuple[Any, ...], int] = field(default_factory=dict)
    # the offset of the record being added now (`reading`); 0 for batches built by hand
    _at: int = 0

    def reading(self, offset: int) -> None:
        """The changes added from now on come from the changelog record at `offset`."""
        self._at = offset

    def put_count(self, view: str, row: CountRow) -> None:
        _check_key(view, row.key)
        _check_uint(view, row.key, "count", row.count)
        self.counts[(view, row.key)] = row
        self.origins[("c", view, row.key)] = self._at

    def delete(self, view: str, key: str) -> None:
        """Delete the count row of `key`."""
        self.counts[(view, key)] = None
        self.origins[("c", view, key)] = self._at

    def put_window(self, view: str, row: WindowRow) -> None:
        _check_key(view, row.key)
        _check_uint(view, row.key, "count", row.count)
        _check_uint(view, row.key, "window start", row.start_ms)
        if row.end_ms <= row.start_ms:
            raise SerializationError(
                f"view {view}: key {row.key!r} has a window ending at {row.end_ms}, "
                f"not after its start {row.start_ms}"
            )
        self.windows[(view, row.key, row.start_ms)] = row
        self.origins[("w", view, row.key, row.start_ms)] = self._at

    def delete_window(self, view: str, key: str, start_ms: int) -> None:
        self.windows[(view, key, start_ms)] = None
        self.origins[("w", view, key, start_ms)] = self._at

    def expire_windows(self, view: str, horizon_ms: int) -> None:
        """Purge the windows of `view` that end at or before `horizon_ms`."""
        self.horizons[view] = max(horizon_ms, self.horizons.get(view, horizon_ms))

    def put_latest(self, view: str, row: EventRow) -> None:
        """Keep `row` as the latest event of its key unless this batch has a later one."""
        _check_event(view, row)
        current = self.latest.get((view, row.key))
        if current is None or position(row) > position(current):
            self.latest[(view, row.key)] = row
            self.origins[("l", view, row.key)] = self._at

    def delete_latest(self, view: str, key: str) -> None:
        self.latest[(view, key)] = None
        self.origins[("l", view, key)] = self._at

    def put_event(self, view: str, row: EventRow) -> None:
        _check_event(view, row)
        self.events[(view, row.key, position(row))] = row
        self.origins[("e", view, row.key, position(row))] = self._at

    def delete_event(self, view: str, key: str, at: EventPosition) -> None:
        self.events[(view, key, at)] = None
        self.origins[("e", view, key, at)] = self._at

    def advance(self, topic: str, next_offset: int) -> None:
        """Record that every record of `topic` before `next_offset` is applied."""
        self.offsets[topic] = next_offset

    def changes(self, stale: Collection[tuple[str, str]] = ()) -> list[Change]:
        """The batch's changes in offset order, as a store that applied it made them: all
        but the latest rows in `stale` (view, key), which the stored row outranked, and the
        windows the batch's own horizon expires (stored as nothing, never seen)."""
        origins = self.origins
        changes = [
            Change(view, key, origins[("c", view, key)], None if row is None else count_doc(row))
            for (view, key), row in self.counts.items()
        ]
        for (view, key, start_ms), window in self.windows.items():
            horizon = self.horizons.get(view)
            if window is not None and horizon is not None and window.end_ms <= horizon:
                continue
            doc = None if window is None else window_doc(window)
            changes.append(Change(view, key, origins[("w", view, key, start_ms)], doc, (start_ms,)))
        for (view, key), event in self.latest.items():
            if (view, key) not in stale:
                doc = None if event is None else event_doc(event)
                changes.append(Change(view, key, origins[("l", view, key)], doc))
        for (view, key, at), event in self.events.items():
            doc = None if event is None else event_doc(event)
            changes.append(Change(view, key, origins[("e", view, key, at)], doc, at))
        changes.sort(key=_offset)
        return changes


def _offset(change: Change) -> int:
    return change.offset
