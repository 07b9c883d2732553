"""An in-memory PartitionStore: the reference model the store contract suite also runs on."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Self, TypeVar

from node.errors import StoreClosedError
from node.storage.changes import ChangeBatch, Effect, EventPosition, Stored, position
from node.storage.layout import ResultTotal, ScannedRow, ScanSpan, Table, Total, order_of
from node.storage.store import PartitionStore
from runtime.ranking import is_rankable, rank, value_rank
from schema import MAX_UINT, CountRow, EventRow, KeyPart, WindowRow, pack, unpack

K = TypeVar("K")
V = TypeVar("V")


def _within(ms: int, since_ms: int | None, until_ms: int | None) -> bool:
    return (since_ms is None or since_ms <= ms) and (until_ms is None or ms < until_ms)


class MemoryStore(PartitionStore):
    """Rows and offsets in dicts; they survive close() like files on disk would."""

    def __init__(self) -> None:
        self._rows: dict[str, dict[str, CountRow]] = {}
        self._windows: dict[str, dict[tuple[str, int], WindowRow]] = {}
        self._latest: dict[str, dict[str, EventRow]] = {}
        self._events: dict[str, dict[tuple[str, EventPosition], EventRow]] = {}
        self._offsets: dict[str, int] = {}
        self._open = False

    def open(self) -> Self:
        self._open = True
        return self

    def close(self) -> None:
        self._open = False

    @property
    def closed(self) -> bool:
        return not self._open

    def set_aside(self) -> str:
        self._open = False
        for table in (self._rows, self._windows, self._latest, self._events, self._offsets):
            table.clear()
        return "discarded"

    def _require_open(self) -> None:
        if not self._open:
            raise StoreClosedError("memory store is closed")

    @contextmanager
    def pinned(self) -> Iterator[PartitionStore]:
        self._require_open()
        yield copy.deepcopy(self)

    def apply(self, batch: ChangeBatch) -> list[Effect]:
        self._require_open()
        before, counts = {}, {}
        for (view, key), row in batch.counts.items():
            rows = self._rows.setdefault(view, {})
            stored = rows.get(key)
            if stored is not None:
                counts[(view, key)] = stored.count
            if stored is None or not batch.keeps_count(view, key, stored.count):
                _put(rows, key, row)
        for view, horizon in batch.horizons.items():
            windows = self._windows.setdefault(view, {})
            for window_at in [at for at, w in windows.items() if w.end_ms <= horizon]:
                del windows[window_at]
        for (view, key, start_ms), window in batch.windows.items():
            view_horizon = batch.horizons.get(view)
            expired = (
                window is not None and view_horizon is not None and window.end_ms <= view_horizon
            )
            _put(self._windows.setdefault(view, {}), (key, start_ms), None if expired else window)
        for (view, key), event in batch.latest.items():
            latest = self._latest.setdefault(view, {})
            old = latest.get(key)
            if old is not None:
                before[(view, key)] = position(old)
            if event is None or old is None or position(event) > position(old):
                _put(latest, key, event)
        held = {}
        for (view, key, at), event in batch.events.items():
            events = self._events.setdefault(view, {})
            old_event = events.get((key, at))
            if old_event is not None:
                held[(view, key, at)] = old_event.fields
            _put(events, (key, at), event)
        self._offsets.update(batch.offsets)
        return batch.effects(Stored(before, counts, held))

    def get(self, view: str, key: str) -> CountRow | None:
        self._require_open()
        return self._rows.get(view, {}).get(key)

    def top(self, view: str, limit: int) -> list[CountRow]:
        self._require_open()
        ranked = sorted(self._rows.get(view, {}).values(), key=rank)
        return ranked[: max(limit, 0)]

    def windows(
        self, view: str, key: str, since_ms: int | None, until_ms: int | None, horizon_ms: int
    ) -> list[WindowRow]:
        self._require_open()
        return sorted(
            (
                w
                for (k, start), w in self._windows.get(view, {}).items()
                if k == key and _within(start, since_ms, until_ms) and w.end_ms > horizon_ms
            ),
            key=lambda w: w.start_ms,
        )

    def top_window(
        self,
        view: str,
        start_ms: int,
        limit: int,
        horizon_ms: int,
        results: bool = False,  # its windows always hold their results
        by: str | None = None,
    ) -> list[WindowRow]:
        self._require_open()
        rows = [
            w
            for (_, start), w in self._windows.get(view, {}).items()
            if start == start_ms and w.end_ms > horizon_ms
        ]
        if by is not None:
            ranked = [w for w in rows if is_rankable(w.fields.get(by))]
            return sorted(ranked, key=lambda w: value_rank(w.fields[by], w.key))[: max(limit, 0)]
        return sorted(rows, key=rank)[: max(limit, 0)]

    def latest(self, view: str, key: str) -> EventRow | None:
        self._require_open()
        return self._latest.get(view, {}).get(key)

    def aggregate_total(self, view: str, fields: tuple[str, ...]) -> tuple[int, list[ResultTotal]]:
        self._require_open()
        rows = list(self._latest.get(view, {}).values())
        results = []
        for field in fields:
            values = [float(r.fields[field]) for r in rows if is_rankable(r.fields.get(field))]
            if not values:
                results.append(ResultTotal(field, None, None, None))
            else:
                results.append(ResultTotal(field, _rounded(values), min(values), max(values)))
        return len(rows), results

    def ranked(self, view: str, field: str, limit: int) -> list[EventRow]:
        self._require_open()
        rows = [r for r in self._latest.get(view, {}).values() if is_rankable(r.fields.get(field))]
        return sorted(rows, key=lambda r: value_rank(r.fields[field], r.key))[: max(limit, 0)]

    def history(
        self,
        view: str,
        key: str,
        since_ms: int | None,
        until_ms: int | None,
        after: EventPosition | None,
        limit: int,
        newest_first: bool = False,
    ) -> list[EventRow]:
        self._require_open()
        events = sorted(
            (
                e
                for (k, at), e in self._events.get(view, {}).items()
                if k == key
                and _within(e.event_ms, since_ms, until_ms)
                and (after is None or (at < after if newest_first else at > after))
            ),
            key=position,
            reverse=newest_first,
        )
        return events[: max(limit, 0)]

    def scan(
        self,
        view: str,
        table: Table,
        span: ScanSpan,
        limit: int,
        horizon_ms: int,
        results: bool = False,  # its windows always hold their results
    ) -> list[tuple[bytes, ScannedRow]]:
        """The model: rows sorted by (UTF-8 key, the rest of the position) as Python tuples,
        filtered by comparing strings' UTF-8, not by the byte bounds LevelDB uses."""
        self._require_open()
        found = sorted(
            (_order(position), pack(*position), row)
            for position, row in self._table(view, table, span.by)
            if (not table.keyed or _in_span(span, position[0]))
            and (not table.timed or _in_times(span, int(position[0])))
            and not (isinstance(row, WindowRow) and row.end_ms <= horizon_ms)
        )
        if span.after is not None:
            after = _order(unpack(span.after))
            found = [r for r in found if (r[0] < after if span.backward else r[0] > after)]
        if span.backward:
            found.reverse()
        return [(packed, row) for _, packed, row in found[: max(limit, 0)]]

    def _table(
        self, view: str, table: Table, by: str = ""
    ) -> list[tuple[tuple[KeyPart, ...], ScannedRow]]:
        if table is Table.RANK:  # the model of the index: a result's order, as layout's
            ranked = [
                r for r in self._latest.get(view, {}).values() if is_rankable(r.fields.get(by))
            ]
            return [((MAX_UINT - order_of(r.fields[by]), r.key), r) for r in ranked]
        if table is Table.COUNT:
            return [((k,), r) for k, r in self._rows.get(view, {}).items()]
        if table is Table.LATEST:
            return [((k,), r) for k, r in self._latest.get(view, {}).items()]
        if table is Table.TOP:
            return [((MAX_UINT - r.count, k), r) for k, r in self._rows.get(view, {}).items()]
        windows = self._windows.get(view, {}).items()
        if table is Table.WINDOW:
            return [((k, s), r) for (k, s), r in windows]
        if table is Table.WINDOW_TOP:
            return [((s, MAX_UINT - r.count, k), r) for (k, s), r in windows]
        if table is Table.WINDOW_START:
            return [((s, k), r) for (k, s), r in windows]
        return [((k, *at), r) for (k, at), r in self._events.get(view, {}).items()]

    def total(self, view: str) -> Total:
        self._require_open()
        rows = self._rows.get(view, {}).values()
        return Total(len(rows), sum(r.count for r in rows))

    def window_totals(
        self, view: str, since_ms: int | None, until_ms: int | None, horizon_ms: int
    ) -> list[tuple[int, int, Total]]:
        self._require_open()
        found: dict[tuple[int, int], Total] = {}
        for (_, start), w in self._windows.get(view, {}).items():
            if _within(start, since_ms, until_ms) and w.end_ms > horizon_ms:
                found[(start, w.end_ms)] = found.get((start, w.end_ms), Total()) + Total(1, w.count)
        return [(start, end, total) for (start, end), total in sorted(found.items())]

    def offsets(self) -> dict[str, int]:
        self._require_open()
        return dict(self._offsets)


def _order(position: tuple[KeyPart, ...]) -> tuple[bytes | int, ...]:
    return tuple(part.encode("utf-8") if isinstance(part, str) else part for part in position)


def _in_span(span: ScanSpan, key: KeyPart) -> bool:
    data = str(key).encode("utf-8")
    return (
        data.startswith(span.prefix.encode("utf-8"))
        and (span.since is None or data >= span.since.encode("utf-8"))
        and (span.until is None or data < span.until.encode("utf-8"))
    )


def _in_times(span: ScanSpan, start_ms: int) -> bool:
    return _within(start_ms, span.since_ms, span.until_ms)


def _put(rows: dict[K, V], key: K, row: V | None) -> None:
    if row is None:
        rows.pop(key, None)
    else:
        rows[key] = row


def _rounded(values: list[float]) -> float:
    """The exact sum of `values` rounded once (an infinity past the largest double)."""
    exact = sum(map(Fraction, values), Fraction(0))
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf
