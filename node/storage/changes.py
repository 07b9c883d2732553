"""The changes of one poll batch for one partition store, of every view kind.

A `ChangeBatch` is what the materializer builds from the changelog records of one poll
and a store writes atomically. Every record is validated here, while the batch is built,
so one bad record is skipped by the materializer and never fails the whole write. Each
entry remembers the changelog offset of the record that set it (`reading`), so that the
changes a store's `apply` made take effect can go to the change feed (node.changelog.feed) as
`Effect`s. An effect is encoded as its `schema.feed.Change` JSON (`change_json`) only when
the feed first sends it: most changes of a restore are dropped from the feed's memory
unread, and the consumer thread applying them should not pay for their JSON.

A count record holds its key's absolute count, and Spark Real-Time Mode's Kafka output is
at-least-once: after a driver crash the records since the last checkpoint are written
again, so a key's counts may come as 15, 11, 12, ... 15. A count lower than the one the
key has (in the batch or the store) is such a replay and changes nothing: no row, index or
total is written and no effect reported. A tombstone still deletes the key, and the counts
after it start again from any value.

An event of a history view comes again the same way when the pipeline writes a
micro-batch again after a crash: the same record key and value at a later offset. The
store (or the batch) already holds that event as it is, so it changes nothing and reports
no effect: a follower sees each event once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from node.errors import SerializationError
from schema import MAX_UINT, CountRow, EventRow, WindowRow

__all__ = ["ChangeBatch", "Effect", "EventPosition", "Stored", "change_json", "position"]

# (event_ms, source_partition, source_offset): the order of a key's events
EventPosition = tuple[int, int, int]
_NO_EVENTS: Mapping[tuple[str, str], EventPosition] = {}
_NO_COUNTS: Mapping[tuple[str, str], int] = {}
_NO_FIELDS: Mapping[tuple[str, str, EventPosition], Mapping[str, Any]] = {}
# the range of the signed 64-bit times a store keeps (node.storage.layout: ">q")
_MIN_INT, _MAX_INT = -(2**63), 2**63 - 1


def position(row: EventRow) -> EventPosition:
    """Where `row` sorts among its key's events; the greatest is the latest."""
    return (row.event_ms, row.source_partition, row.source_offset)


def change_json(
    view: str,
    key: str,
    offset: int,
    row: CountRow | WindowRow | EventRow | None,
    at: tuple[int, ...] = (),
    snapshot: bool = False,
) -> bytes:
    """One change as `schema.feed.Change.to_json` writes it, encoded. orjson writes a row
    dataclass as the JSON object of its changelog value (schema.changelog: the same fields
    in the same order), in C, several times faster than building the dicts."""
    doc: dict[str, Any] = {"view": view, "key": key, "offset": offset, "row": row, "at": at}
    if snapshot:
        doc["snapshot"] = True
    return orjson.dumps(doc)


class Stored(NamedTuple):
    """What a store held of a batch's keys before it (view, key): the position of each
    latest row's event and each count, and the value fields of each of the batch's events
    (view, key, position) it held, which decide the batch's `effects`."""

    latest: Mapping[tuple[str, str], EventPosition] = _NO_EVENTS
    counts: Mapping[tuple[str, str], int] = _NO_COUNTS
    events: Mapping[tuple[str, str, EventPosition], Mapping[str, Any]] = _NO_FIELDS


_NOTHING_STORED = Stored()


class Effect(NamedTuple):
    """A change a store write made take effect: its record's offset and size (bytes of the
    record's value: about the size of the row's JSON), view, key, row (None: deleted) and
    where in the key (a window's start, an event's position)."""

    offset: int
    size: int
    view: str
    key: str
    row: CountRow | WindowRow | EventRow | None
    at: tuple[int, ...] = ()

    def json(self) -> bytes:
        """The change as the feed sends it (schema.feed.Change.to_json), encoded."""
        return change_json(self.view, self.key, self.offset, self.row, self.at)


def _check_uint(view: str, key: str, what: str, value: int) -> None:
    if not 0 <= value <= MAX_UINT:
        raise SerializationError(f"view {view}: key {key!r} has {what} {value}")


def _check_int(view: str, key: str, what: str, value: int) -> None:
    if not _MIN_INT <= value <= _MAX_INT:
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

    A later change of the same entry replaces an earlier one in what the store writes
    (changelog values are absolute), except for latest rows, where the event with the
    greatest position wins, and count rows, where a lower count than the key's is a
    replay and changes nothing (`keeps_count`). `horizons[view]` expires that windowed
    view's windows with end <= the horizon. A `tracked` batch still reports every
    record's change (`effects`): a follower sees one change per changelog record, however
    the records were batched, so a live follow and a replay of the same offsets give the
    same changes; but no change for a replayed count or latest row, nor for an event the
    store (or the batch) already held as it is. A batch built with `tracked=False` reports
    no effects: nobody follows its partition.
    """

    counts: dict[tuple[str, str], CountRow | None] = field(default_factory=dict)
    windows: dict[tuple[str, str, int], WindowRow | None] = field(default_factory=dict)
    latest: dict[tuple[str, str], EventRow | None] = field(default_factory=dict)
    events: dict[tuple[str, str, EventPosition], EventRow | None] = field(default_factory=dict)
    horizons: dict[str, int] = field(default_factory=dict)
    offsets: dict[str, int] = field(default_factory=dict)
    # the results of each view's latest rows or windows that the store ranks keys by
    # (aggregate and windowed aggregate views)
    ranked: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the (offset, value size) of the record that set each entry, keyed (kind, *entry key)
    origins: dict[tuple[Any, ...], tuple[int, int]] = field(default_factory=dict)
    # count keys the batch deletes, each with the length `_replaced` had at its first
    # delete: from there on the key's count starts again, unbounded by the stored count
    restarted: dict[tuple[str, str], int] = field(default_factory=dict)
    # the record being added now (`reading`); offset 0 for batches built by hand
    _at: tuple[int, int] = (0, 0)
    # changes a later record of the same entry replaced in this batch, with their entry's
    # origins key (a tracked batch reports them too)
    _replaced: list[tuple[tuple[Any, ...], Effect]] = field(default_factory=list)
    # whether `effects` is wanted: the change feed follows the partition
    tracked: bool = True

    def reading(self, offset: int, size: int = 0) -> None:
        """The changes added from now on come from the changelog record at `offset`, whose
        value has `size` bytes."""
        self._at = (offset, size)

    def put_count(self, view: str, row: CountRow) -> None:
        """Keep `row` as its key's count unless this batch has a greater one: a lower
        count is a replay of at-least-once output, not news."""
        _check_key(view, row.key)
        _check_uint(view, row.key, "count", row.count)
        _check_int(view, row.key, "last event time", row.last_event_ms)
        current = self.counts.get((view, row.key))
        if current is not None and row.count < current.count:
            return
        self._replace(("c", view, row.key), self.counts, (view, row.key))
        self.counts[(view, row.key)] = row
        self.origins[("c", view, row.key)] = self._at

    def delete(self, view: str, key: str) -> None:
        """Delete the count row of `key`; a count after it starts again, from any value."""
        self._replace(("c", view, key), self.counts, (view, key))
        self.counts[(view, key)] = None
        self.origins[("c", view, key)] = self._at
        self.restarted.setdefault((view, key), len(self._replaced))

    def keeps_count(self, view: str, key: str, stored: int) -> bool:
        """Whether a store keeps its count `stored` of `key` over the batch's change: when
        that is a lower count, a replay (unless the batch deleted the key before it)."""
        row = self.counts[(view, key)]
        return row is not None and (view, key) not in self.restarted and row.count < stored

    def put_window(self, view: str, row: WindowRow, ranked: tuple[str, ...] = ()) -> None:
        """Upsert a window; the store ranks the view's windows by the numeric values of
        their `ranked` results (windowed aggregate views)."""
        self._rank(view, ranked)
        _check_key(view, row.key)
        _check_uint(view, row.key, "count", row.count)
        _check_uint(view, row.key, "window start", row.start_ms)
        _check_int(view, row.key, "window end", row.end_ms)
        _check_int(view, row.key, "last event time", row.last_event_ms)
        if row.end_ms <= row.start_ms:
            raise SerializationError(
                f"view {view}: key {row.key!r} has a window ending at {row.end_ms}, "
                f"not after its start {row.start_ms}"
            )
        entry = (view, row.key, row.start_ms)
        self._replace(("w", *entry), self.windows, entry, (row.start_ms,))
        self.windows[entry] = row
        self.origins[("w", *entry)] = self._at

    def delete_window(
        self, view: str, key: str, start_ms: int, ranked: tuple[str, ...] = ()
    ) -> None:
        self._rank(view, ranked)
        self._replace(("w", view, key, start_ms), self.windows, (view, key, start_ms), (start_ms,))
        self.windows[(view, key, start_ms)] = None
        self.origins[("w", view, key, start_ms)] = self._at

    def expire_windows(self, view: str, horizon_ms: int) -> None:
        """Purge the windows of `view` that end at or before `horizon_ms`."""
        self.horizons[view] = max(horizon_ms, self.horizons.get(view, horizon_ms))

    def put_latest(self, view: str, row: EventRow, ranked: tuple[str, ...] = ()) -> None:
        """Keep `row` as the latest event of its key unless this batch has a later one;
        the store ranks the view's keys by the numeric values of `ranked` fields."""
        _check_event(view, row)
        self._rank(view, ranked)
        current = self.latest.get((view, row.key))
        if current is None or position(row) > position(current):
            self._replace(("l", view, row.key), self.latest, (view, row.key))
            self.latest[(view, row.key)] = row
            self.origins[("l", view, row.key)] = self._at

    def delete_latest(self, view: str, key: str, ranked: tuple[str, ...] = ()) -> None:
        self._rank(view, ranked)
        self._replace(("l", view, key), self.latest, (view, key))
        self.latest[(view, key)] = None
        self.origins[("l", view, key)] = self._at

    def _rank(self, view: str, ranked: tuple[str, ...]) -> None:
        if ranked:
            self.ranked[view] = ranked

    def put_event(self, view: str, row: EventRow) -> None:
        """Upsert an event; the same event again (a record written twice) changes nothing."""
        _check_event(view, row)
        at = position(row)
        if self.events.get((view, row.key, at)) == row:
            return
        self._replace(("e", view, row.key, at), self.events, (view, row.key, at), at)
        self.events[(view, row.key, at)] = row
        self.origins[("e", view, row.key, at)] = self._at

    def delete_event(self, view: str, key: str, at: EventPosition) -> None:
        self._replace(("e", view, key, at), self.events, (view, key, at), at)
        self.events[(view, key, at)] = None
        self.origins[("e", view, key, at)] = self._at

    def _replace(
        self,
        origin: tuple[Any, ...],
        entries: dict[Any, Any],
        entry: tuple[Any, ...],
        at: tuple[int, ...] = (),
    ) -> None:
        """Keep the change an entry set earlier in this batch is about to lose, when the
        batch is tracked: its follower sees it too."""
        if self.tracked and entry in entries:
            offset, size = self.origins[origin]
            replaced = Effect(offset, size, entry[0], entry[1], entries[entry], at)
            self._replaced.append((origin, replaced))

    def advance(self, topic: str, next_offset: int) -> None:
        """Record that every record of `topic` before `next_offset` is applied."""
        self.offsets[topic] = next_offset

    def effects(self, before: Stored = _NOTHING_STORED) -> list[Effect]:
        """The batch's changes in offset order, as a store that applied it made them: every
        record's change (also those a later record of the entry replaced), but no latest row
        whose event is not after, and no count below, what its key had `before` the batch
        (stored or seen), and no window the batch's own horizon expires (stored as nothing,
        never seen); none when the batch is not `tracked`."""
        if not self.tracked:
            return []
        origins = self.origins
        end = len(self._replaced)
        effects = [
            Effect(*origins[("c", view, key)], view, key, count)
            for (view, key), count in self.counts.items()
            if self._count_shows((view, key), count, end, before.counts)
        ]
        expired: set[tuple[Any, ...]] = set()
        for (view, key, start_ms), window in self.windows.items():
            horizon = self.horizons.get(view)
            if window is not None and horizon is not None and window.end_ms <= horizon:
                expired.add(("w", view, key, start_ms))
                continue
            effects.append(
                Effect(*origins[("w", view, key, start_ms)], view, key, window, (start_ms,))
            )
        for (view, key), event in self.latest.items():
            if _after(event, before.latest.get((view, key))):
                effects.append(Effect(*origins[("l", view, key)], view, key, event))
        # an event change is compared with what the store held only when it is the
        # batch's first change of that event: a later one follows the batch's own
        rewritten = {origin for origin, _ in self._replaced if origin[0] == "e"}
        for (view, key, at), event in self.events.items():
            made = ("e", view, key, at)
            if made in rewritten or not _held(event, before.events.get((view, key, at))):
                effects.append(Effect(*origins[made], view, key, event, at))
        # what a later record replaced, unless its window is expired by the batch, its
        # latest row was never the latest or its count was below the stored one
        compared: set[tuple[Any, ...]] = set()
        for index, (origin, replaced) in enumerate(self._replaced):
            if origin in expired:
                continue
            if origin[0] == "l" and not _after(replaced.row, before.latest.get(origin[1:])):
                continue
            if origin[0] == "e" and origin not in compared:
                compared.add(origin)
                if _held(replaced.row, before.events.get(origin[1:])):
                    continue
            if origin[0] == "c" and not self._count_shows(
                origin[1:], replaced.row, index, before.counts
            ):
                continue
            effects.append(replaced)
        effects.sort(key=_offset)
        return effects

    def _count_shows(
        self, entry: tuple[Any, ...], row: Any, index: int, stored: Mapping[Any, int]
    ) -> bool:
        """Whether a count change shows: a delete always, a count from the key's restart
        on (`index`: where in `_replaced` it is, their end for the batch's own rows) or
        not below the count it had before the batch."""
        restart = self.restarted.get(entry)
        if row is None or (restart is not None and index >= restart):
            return True
        count = stored.get(entry)
        return count is None or row.count >= count


def _held(row: Any, stored: Mapping[str, Any] | None) -> bool:
    """Whether an event change is one the store held as it is: a record written again."""
    return row is not None and stored is not None and row.fields == stored


def _after(row: Any, before: EventPosition | None) -> bool:
    """Whether a latest row change shows: a delete always, an event only after `before`."""
    return row is None or before is None or position(row) > before


def _offset(effect: Effect) -> int:
    return effect.offset
