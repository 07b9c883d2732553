"""The changes of one poll batch for one partition store, of every view kind.

A `ChangeBatch` is what the materializer builds from the changelog records of one poll
and a store writes atomically. Every record is validated here, while the batch is built,
so one bad record is skipped by the materializer and never fails the whole write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from node.errors import SerializationError
from schema import MAX_UINT, CountRow, EventRow, WindowRow

__all__ = ["ChangeBatch", "EventPosition", "position"]

# (event_ms, source_partition, source_offset): the order of a key's events
EventPosition = tuple[int, int, int]


def position(row: EventRow) -> EventPosition:
    """Where `row` sorts among its key's events; the greatest is the latest."""
    return (row.event_ms, row.source_partition, row.source_offset)


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

    def put_count(self, view: str, row: CountRow) -> None:
        _check_key(view, row.key)
        _check_uint(view, row.key, "count", row.count)
        self.counts[(view, row.key)] = row

    def delete(self, view: str, key: str) -> None:
        """Delete the count row of `key`."""
        self.counts[(view, key)] = None

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

    def delete_window(self, view: str, key: str, start_ms: int) -> None:
        self.windows[(view, key, start_ms)] = None

    def expire_windows(self, view: str, horizon_ms: int) -> None:
        """Purge the windows of `view` that end at or before `horizon_ms`."""
        self.horizons[view] = max(horizon_ms, self.horizons.get(view, horizon_ms))

    def put_latest(self, view: str, row: EventRow) -> None:
        """Keep `row` as the latest event of its key unless this batch has a later one."""
        _check_event(view, row)
        current = self.latest.get((view, row.key))
        if current is None or position(row) > position(current):
            self.latest[(view, row.key)] = row

    def delete_latest(self, view: str, key: str) -> None:
        self.latest[(view, key)] = None

    def put_event(self, view: str, row: EventRow) -> None:
        _check_event(view, row)
        self.events[(view, row.key, position(row))] = row

    def delete_event(self, view: str, key: str, at: EventPosition) -> None:
        self.events[(view, key, at)] = None

    def advance(self, topic: str, next_offset: int) -> None:
        """Record that every record of `topic` before `next_offset` is applied."""
        self.offsets[topic] = next_offset
