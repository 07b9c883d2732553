"""Partition stores: the storage interface and its LevelDB (plyvel) implementation.

One store per partition p holds every view of p: the rows of each view kind under view
prefixes, the top-N indexes (count descending, then key ascending; per window for
windowed views) and the applied offset of each changelog topic of p. `apply` writes one
poll batch (rows, index updates, expiries, offsets) atomically, so a store is always
consistent with its offsets and restore resumes from them. The key layout is in
`node.storage.layout`.

A store keeps, per key, the greatest of what the changelog said: a latest row is replaced
only by a later event, and a count only by one at least as great (Spark Real-Time Mode's
Kafka output is at-least-once, so a lower count is a replay; `ChangeBatch.keeps_count`).
What a batch left unchanged is not among the effects `apply` reports to the change feed.

A store skips reading a row before overwriting it when it knows no old row exists: a
view whose rows were empty when this handle first wrote to it (a fresh store, i.e. a
restore from the beginning) records the keys it writes in an in-memory filter, and a key
the filter never saw has no old row and no old index entry (a `BitFilter`).

Time is a parameter: window reads take a `horizon_ms` (windows that end at or before it
are expired and never returned), and a batch's `horizons` purge expired windows. A view
found holding no window is not purged again until a batch writes one of its windows: a
purge opens several LevelDB iterators per windowed view, and the batches of a node that
receives no records of that view (10,000 records a second of another, in batches of a
few) spent about 6% of its CPU purging nothing.

Faults: `open` raises `StoreDamagedError` when the files are damaged (LevelDB's own checks
with `paranoid_checks`, the sizes of its table files, and the seal a clean `close` leaves:
the size of every file, so one truncated or removed while the node was stopped is found);
`set_aside` then moves the directory to `<dir>.damaged-<UTC time>`. A write that fails
raises `StoreWriteError` (`DiskFullError` when the disk is full) and wrote nothing; the
handle takes no more writes until `reopen` (LevelDB's log may end in a partial record).
A read that finds the files damaged raises one of `READ_DAMAGE` (node.changelog.partitions then
refuses the copy and has it rebuilt).
"""

from __future__ import annotations

import abc
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import orjson
import plyvel

from node.errors import (
    DiskFullError,
    SerializationError,
    StoreClosedError,
    StoreDamagedError,
    StoreError,
    StoreWriteError,
)
from node.storage import layout
from node.storage.changes import ChangeBatch, Effect, EventPosition, Stored, position
from runtime.bitfilter import BitFilter
from runtime.ranking import is_rankable
from schema import CountRow, EventRow, WindowRow, pack, pack_uint, unpack

_Row = TypeVar("_Row", CountRow, EventRow)

log = logging.getLogger(__name__)

# left by a clean close: {file name: size}; checked and removed by the next open
SEAL = "STATEFED-CLOSED"
# files that may change or go while the store is closed without harm
_UNSEALED = frozenset({"LOCK", "LOG", "LOG.old", SEAL, f"{SEAL}.tmp"})
# room a reopen needs beyond the log it replays into a table (LevelDB's 4 MiB write buffer)
_REOPEN_MARGIN_BYTES = 1 << 20

__all__ = ["READ_DAMAGE", "ChangeBatch", "LevelDBStore", "PartitionStore"]

# what a read of a store whose files are damaged raises (a bad block, a missing table file)
READ_DAMAGE: tuple[type[Exception], ...] = (plyvel.CorruptionError, StoreDamagedError)


class PartitionStore(abc.ABC):
    """The state of one partition: every view's rows, their indexes and offsets.

    Lifecycle: `open()` (or `with store:`) before use, `close()` after; data and
    offsets outlive `close()`. Reads and `apply` of an unopened store raise
    `StoreClosedError`. Implementations are safe for one writer thread plus readers
    that never overlap `close()`. Time bounds are ms since the epoch; `since_ms` is
    inclusive and `until_ms` exclusive, None = open.
    """

    @abc.abstractmethod
    def open(self) -> Self:
        """Open the store, creating it when missing; idempotent."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the store, keeping its data; idempotent."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool: ...

    def reopen(self) -> Self:
        """Close and open again: after a failed write, the only way to write again."""
        self.close()
        return self.open()

    @abc.abstractmethod
    def set_aside(self) -> str:
        """Close the store and move its (damaged) data out of the way, kept for
        inspection, so that `open()` starts empty; returns where the data went."""

    def room_to_write(self) -> bool:
        """Whether the disk seems to have room for `reopen` and a write; a guess, so
        that a full disk does not close a store that could still be read."""
        return True

    @abc.abstractmethod
    def apply(self, batch: ChangeBatch) -> list[Effect]:
        """Write every change, expiry and offset of `batch` atomically; returns the changes
        that took effect, in offset order (`ChangeBatch.effects`): a latest row replaces
        the stored one only when its event is later, a count only when not lower."""

    @abc.abstractmethod
    def pinned(self) -> AbstractContextManager[PartitionStore]:
        """A read-only view of the store as it is now: its reads and `offsets()` see one
        point in time, whatever is applied meanwhile (a snapshot follow, node.changelog.feed)."""

    @abc.abstractmethod
    def get(self, view: str, key: str) -> CountRow | None:
        """The count row of `key` in `view`, or None when unknown."""

    def get_many(self, view: str, keys: list[str]) -> list[CountRow | None]:
        """The count rows of `keys` in input order, None for unknown keys."""
        return [self.get(view, key) for key in keys]

    @abc.abstractmethod
    def top(self, view: str, limit: int) -> list[CountRow]:
        """The `limit` count rows of `view` with the highest counts, ties by key ascending."""

    @abc.abstractmethod
    def windows(
        self, view: str, key: str, since_ms: int | None, until_ms: int | None, horizon_ms: int
    ) -> list[WindowRow]:
        """The unexpired windows of `key` with since <= start < until, by start."""

    @abc.abstractmethod
    def top_window(
        self,
        view: str,
        start_ms: int,
        limit: int,
        horizon_ms: int,
        results: bool = False,
        by: str | None = None,
    ) -> list[WindowRow]:
        """The `limit` highest counts of the window starting at `start_ms`, ties by key
        ascending; empty when that window is expired. `results`: with each window's
        results (a windowed aggregate view's), which the index does not hold. `by`: the
        highest values of that numeric result instead (windows without a number there
        are out)."""

    @abc.abstractmethod
    def latest(self, view: str, key: str) -> EventRow | None:
        """The latest event of `key` in `view`, or None when unknown."""

    def latest_many(self, view: str, keys: list[str]) -> list[EventRow | None]:
        """The latest events of `keys` in input order, None for unknown keys."""
        return [self.latest(view, key) for key in keys]

    @abc.abstractmethod
    def aggregate_total(
        self, view: str, fields: tuple[str, ...]
    ) -> tuple[int, list[layout.ResultTotal]]:
        """An aggregate view's number of keys, and per numeric result in `fields` its sum
        (kept with every write), least and greatest value (the rank index's ends)."""

    @abc.abstractmethod
    def ranked(self, view: str, field: str, limit: int) -> list[EventRow]:
        """The first `limit` latest rows of `view` by the numeric `field` descending, then
        key ascending (`runtime.ranking.value_rank`); rows without a number there are out."""

    @abc.abstractmethod
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
        """Up to `limit` events of `key` with since <= event_ms < until and a position
        past `after`, in position order: greater than `after` oldest first, or, when
        `newest_first`, less than `after` and newest first."""

    @abc.abstractmethod
    def scan(
        self,
        view: str,
        table: layout.Table,
        span: layout.ScanSpan,
        limit: int,
        horizon_ms: int,
        results: bool = False,
    ) -> list[tuple[bytes, layout.ScannedRow]]:
        """Up to `limit` rows of `table` in `span`, in its order (reversed when backward),
        each with its position (its key's tail after the view head, `span.after` of the next
        slice); windows that end at or before `horizon_ms` are skipped. Reads no further.
        `results`: windows read by an index come with their results (see `top_window`)."""

    @abc.abstractmethod
    def total(self, view: str) -> layout.Total:
        """The number of keys of count view `view` and the sum of their counts, kept by
        `apply` (read without reading the rows)."""

    @abc.abstractmethod
    def window_totals(
        self, view: str, since_ms: int | None, until_ms: int | None, horizon_ms: int
    ) -> list[tuple[int, int, layout.Total]]:
        """(start, end, total) of each unexpired window of `view` with since <= start <
        until, by start then end: the keys whose window is exactly [start, end) (sessions
        of several keys may share a start and end apart: a total each)."""

    @abc.abstractmethod
    def offsets(self) -> dict[str, int]:
        """The next offset to read of each changelog topic applied so far."""

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# the row keys written to one view since its rows were empty: `add` says whether a key is
# surely new (never written, so no stored row); 2**23 bits (1 MiB): ~2% false positives (a
# needless read) at 170k keys
_WRITTEN_KEYS_BITS = 1 << 23


def _bound(ms: int | None) -> int | None:
    # stored times are never negative: an earlier bound means the same as 0
    return None if ms is None else max(0, ms)


class LevelDBStore(PartitionStore):
    """A partition store in one LevelDB directory, e.g. `<state_dir>/partition-3/`."""

    def __init__(self, path: Path, cache_mb: int = 32):
        self.path = path
        self.cache_mb = cache_mb
        self._db: plyvel.DB | None = None
        # per row prefix (kind and view) checked since open: its filter while the rows
        # were empty when first written, else None (every overwrite reads the old row)
        self._written: dict[bytes, BitFilter | None] = {}
        # a write failed: LevelDB's log may end in a partial record, so reopen first
        self._write_failed = False
        # windowed views found holding no window since open, and not written to since
        self._windowless: set[str] = set()

    def open(self) -> Self:
        if self._db is not None:
            return self
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._write_error("create", exc) from exc
        damage = _damage_while_closed(self.path)
        if damage is not None:
            raise self._damaged(damage)
        db = self._open_db()
        try:
            damage = _table_damage(db, self.path)
            if damage is not None:
                raise self._damaged(damage)
            # its first reads: a table block failing its checksum shows here (sizes intact)
            self._check_format(db)
        except plyvel.CorruptionError as exc:
            db.close()
            raise self._damaged(exc) from exc
        except BaseException:
            db.close()
            raise
        self._db = db
        self._write_failed = False
        self._windowless.clear()
        return self

    def _open_db(self) -> plyvel.DB:
        try:
            return plyvel.DB(
                str(self.path),
                create_if_missing=True,
                # a corrupt record in the log or a table fails the open (or the read)
                # instead of being skipped
                paranoid_checks=True,
                lru_cache_size=self.cache_mb * 1024 * 1024,
                bloom_filter_bits=10,
            )
        except plyvel.CorruptionError as exc:
            raise self._damaged(exc) from exc
        except plyvel.IOError as exc:
            if _disk_full(exc):
                raise self._write_error("open", exc) from exc
            # most often the LOCK of another process that uses the same state directory
            raise StoreError(f"cannot open partition store {self.path}: {exc}") from exc
        except (plyvel.Error, OSError) as exc:
            raise StoreError(f"cannot open partition store {self.path}: {exc}") from exc

    def _check_format(self, db: plyvel.DB) -> None:
        stored_format = db.get(layout.FORMAT_KEY)
        if stored_format is None:
            try:
                db.put(layout.FORMAT_KEY, layout.FORMAT)
            except plyvel.IOError as exc:
                raise self._write_error("open", exc) from exc
        elif stored_format != layout.FORMAT:
            raise SerializationError(
                f"partition store {self.path} has format {stored_format!r}, "
                f"expected {layout.FORMAT!r}"
            )
        for marker, build in (
            (layout.TOTALS_KEY, _count_totals),
            (layout.WINDOW_TOTALS_KEY, _count_window_totals),
            (layout.WINDOW_STARTS_KEY, _index_starts),
        ):
            if db.get(marker) is None:
                try:
                    build(db)
                except plyvel.IOError as exc:
                    raise self._write_error("open", exc) from exc

    def close(self) -> None:
        if self._close_db():
            self._seal()

    def _close_db(self) -> bool:
        """Close LevelDB; whether it was open."""
        self._written.clear()
        if self._db is None:
            return False
        self._db.close()
        self._db = None
        return True

    def reopen(self) -> Self:
        self._close_db()  # no seal: open would check and remove it at once
        return self.open()

    def _seal(self) -> None:
        """Record the size of every file: the next open finds one truncated or removed."""
        tmp = self.path / f"{SEAL}.tmp"
        try:
            tmp.write_bytes(orjson.dumps(_store_files(self.path)))
            os.replace(tmp, self.path / SEAL)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            log.warning(
                "partition store %s: no seal written (%s): the next open cannot check its files",
                self.path,
                exc,
            )

    def set_aside(self) -> str:
        self._close_db()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        serial = 1
        while target.exists():
            serial += 1
            target = self.path.with_name(f"{self.path.name}.damaged-{stamp}-{serial}")
        try:
            self.path.rename(target)
        except OSError as exc:
            raise StoreError(
                f"cannot move damaged partition store {self.path} aside to {target}: {exc}"
            ) from exc
        return str(target)

    def room_to_write(self) -> bool:
        try:
            free = shutil.disk_usage(self.path).free
            logs = sum(f.stat().st_size for f in self.path.glob("*.log"))
        except OSError:
            return True  # let the reopen say what is wrong
        return free >= logs + _REOPEN_MARGIN_BYTES

    def _damaged(self, what: object) -> StoreDamagedError:
        """The error of damage found in the store's files: moved aside and rebuilt."""
        return StoreDamagedError(f"partition store {self.path} is damaged: {what}")

    def _write_error(self, action: str, exc: BaseException) -> StoreWriteError:
        """The error of a failed write (or open, which writes), naming the free space."""
        if not _disk_full(exc):
            return StoreWriteError(f"cannot {action} partition store {self.path}: {exc}")
        try:
            free = f"{shutil.disk_usage(self.path).free} bytes free"
        except OSError:
            free = "free space unknown"
        return DiskFullError(
            f"disk full: cannot {action} partition store {self.path} ({free} there): {exc}"
        )

    @property
    def closed(self) -> bool:
        return self._db is None

    def _require_open(self) -> plyvel.DB:
        if self._db is None:
            raise StoreClosedError(f"partition store {self.path} is closed")
        return self._db

    @contextmanager
    def pinned(self) -> Iterator[PartitionStore]:
        with self._require_open().snapshot() as snapshot:
            yield _PinnedStore(self.path, snapshot)

    # -- writes ----------------------------------------------------------------------------

    def apply(self, batch: ChangeBatch) -> list[Effect]:
        db = self._require_open()
        if self._write_failed:
            raise StoreWriteError(
                f"partition store {self.path}: a write failed earlier; reopen it before writing"
            )
        try:
            before = self._write(db, batch)
        except plyvel.CorruptionError as exc:
            raise self._damaged(exc) from exc
        except plyvel.IOError as exc:
            self._write_failed = True
            raise self._write_error("write", exc) from exc
        return batch.effects(before)

    def _write(self, db: plyvel.DB, batch: ChangeBatch) -> Stored:
        """Write `batch`; returns what was stored of the (view, key)s the batch has a
        latest or count row for: their event positions and counts, where one was."""
        # transaction=True: an exception while building the batch writes nothing
        with db.write_batch(transaction=True) as wb:
            counts = self._write_counts(db, wb, batch)
            # purge before writing: a window rewritten by this batch must not be deleted
            self._purge_windows(db, wb, batch.horizons)
            self._write_windows(db, wb, batch)
            latest = self._write_latest(db, wb, batch)
            held = self._write_events(db, wb, batch)
            for topic, next_offset in batch.offsets.items():
                wb.put(layout.offset_key(topic), layout.encode_offset(next_offset))
        return Stored(latest, counts, held)

    def _write_events(
        self, db: plyvel.DB, wb: plyvel.WriteBatch, batch: ChangeBatch
    ) -> dict[tuple[str, str, EventPosition], dict[str, Any]]:
        """Write the batch's events; returns the value fields of those the store held. An
        event held as it is was written again (the pipeline's output after a crash): it is
        not written again, and `ChangeBatch.effects` reports no change for it."""
        old_rows = self._old_rows_by_view(db, layout.events_prefix)
        held = {}
        for (view, key, at), event in batch.events.items():
            row_key = layout.event_key(view, key, at)
            old_value = old_rows(view)(row_key)
            if old_value is not None:
                held[(view, key, at)] = orjson.loads(old_value)
            if event is None:
                wb.delete(row_key)
            elif old_value is None or held[(view, key, at)] != event.fields:
                wb.put(row_key, layout.encode_event(event))
        return held

    def _old_rows_by_view(
        self, db: plyvel.DB, head: Callable[[str], bytes]
    ) -> Callable[[str], Callable[[bytes], bytes | None]]:
        """Per view, `_old_rows` of the rows under `head(view)`, made once per view."""
        readers: dict[str, Callable[[bytes], bytes | None]] = {}

        def of(view: str) -> Callable[[bytes], bytes | None]:
            found = readers.get(view)
            if found is None:
                found = readers[view] = self._old_rows(db, head(view))
            return found

        return of

    def _old_rows(self, db: plyvel.DB, head: bytes) -> Callable[[bytes], bytes | None]:
        """How to read the stored row of a key under `head` before it is overwritten,
        skipping the read for keys the `BitFilter` proves new; a key asked about counts
        as written from then on (at worst a needless read later)."""
        if head not in self._written:
            with db.iterator(prefix=head, include_value=False) as rows:
                empty = next(rows, None) is None
            self._written[head] = BitFilter(_WRITTEN_KEYS_BITS) if empty else None
        written = self._written[head]
        if written is None:
            return db.get

        def old_row(key: bytes) -> bytes | None:
            return None if written.add(key) else db.get(key)

        return old_row

    def _write_counts(
        self, db: plyvel.DB, wb: plyvel.WriteBatch, batch: ChangeBatch
    ) -> dict[tuple[str, str], int]:
        """Write the batch's count rows, except where the stored count is kept (a lower
        count is a replay); returns the stored count of each key the batch has, if any."""
        per_view: dict[str, tuple[layout.CountKeys, Callable[[bytes], bytes | None], list[int]]]
        per_view = {}
        before: dict[tuple[str, str], int] = {}
        for (view, key), row in batch.counts.items():
            found = per_view.get(view)
            if found is None:
                found = per_view[view] = (
                    layout.CountKeys(view),
                    self._old_rows(db, layout.count_prefix(view)),
                    [0, 0],  # the change of the view's total: keys, count
                )
            keys, old_row, change = found
            row_key = keys.row(key)
            old = old_row(row_key)
            if old is not None:
                old_count = before[(view, key)] = layout.decode_count(view, key, old).count
                if batch.keeps_count(view, key, old_count):
                    continue
                wb.delete(keys.top(old_count, row_key))
                change[0] -= 1
                change[1] -= old_count
            if row is None:
                wb.delete(row_key)
                continue
            # ints, not a Total per row: a frozen dataclass costs ~0.5 us to make, and three
            # per row were 15% of a restore
            change[0] += 1
            change[1] += row.count
            value = layout.encode_count(row)
            wb.put(row_key, value)
            wb.put(keys.top(row.count, row_key), value + key.encode("utf-8"))
        for view, (_, _, (keys_change, count_change)) in per_view.items():
            _add_total(db, wb, layout.total_key(view), layout.Total(keys_change, count_change))
        return before

    def _holds_no_total(self, db: plyvel.DB, view: str) -> bool:
        """Whether `view` holds no window total."""
        with db.iterator(prefix=layout.window_total_prefix(view), include_value=False) as totals:
            return next(totals, None) is None

    def _write_windows(self, db: plyvel.DB, wb: plyvel.WriteBatch, batch: ChangeBatch) -> None:
        self._windowless.difference_update(view for view, _, _ in batch.windows)
        old_rows = self._old_rows_by_view(db, layout.window_prefix)
        changes: dict[tuple[str, int, int], layout.Total] = {}
        for (view, key, start_ms), row in batch.windows.items():
            row_key = layout.window_key(view, key, start_ms)
            old = old_rows(view)(row_key)
            ranked = batch.ranked.get(view, ())
            horizon = batch.horizons.get(view)
            if old is not None:
                old_window = layout.decode_window(view, key, start_ms, old)
                wb.delete(layout.window_top_key(view, start_ms, old_window.count, key))
                _rerank_window(wb, view, ranked, old_window, None)
                _change_window_total(changes, view, old_window, horizon, -1)
            start_key = layout.window_start_key(view, start_ms, key)
            if row is None or (horizon is not None and row.end_ms <= horizon):
                wb.delete(row_key)
                wb.delete(start_key)
                continue
            _change_window_total(changes, view, row, horizon, 1)
            wb.put(row_key, layout.encode_window(row))
            indexed = layout.encode_window_index(row)
            wb.put(layout.window_top_key(view, start_ms, row.count, key), indexed)
            wb.put(start_key, indexed)
            _rerank_window(wb, view, ranked, None, row)
        for (view, start_ms, end_ms), change in changes.items():
            _add_total(db, wb, layout.window_total_key(view, start_ms, end_ms), change)

    def _purge_windows(
        self, db: plyvel.DB, wb: plyvel.WriteBatch, horizons: dict[str, int]
    ) -> None:
        """Delete every window (row and index entries) that ends at or before its horizon."""
        for view, horizon in horizons.items():
            if horizon <= 0:  # windows start at 0 or later, so none ends at 0 or before
                continue
            if view in self._windowless:  # found empty, and no window written since
                continue
            for field in _ranked_results(db, view):  # those the view had, too
                _purge_index(db, wb, layout.window_rank_prefix(view, field), horizon)
            base = layout.window_top_prefix(view)
            held = False  # whether the view holds any window
            with db.iterator(start=base, stop=layout.prefix_end(base)) as entries:
                for index_key, value in entries:
                    held = True
                    start_ms = layout.int_at(index_key, len(base))
                    if start_ms >= horizon:  # it ends after the horizon, as every later one
                        break
                    row = layout.decode_window_top(start_ms, value)
                    if row.end_ms <= horizon:
                        wb.delete(index_key)
                        wb.delete(layout.window_key(view, row.key, start_ms))
                        wb.delete(layout.window_start_key(view, start_ms, row.key))
            totals = layout.window_total_prefix(view)
            with db.iterator(
                start=totals, stop=layout.window_total_prefix(view, horizon), include_value=False
            ) as kept:
                for total_key in kept:
                    if layout.window_total_span(total_key, len(totals))[1] <= horizon:
                        wb.delete(total_key)
            if not held and self._holds_no_total(db, view):
                self._windowless.add(view)  # until one of its windows is written

    def _write_latest(
        self, db: plyvel.DB, wb: plyvel.WriteBatch, batch: ChangeBatch
    ) -> dict[tuple[str, str], EventPosition]:
        old_rows = self._old_rows_by_view(db, layout.latest_prefix)
        before = {}
        totals: dict[str, layout.AggregateTotal] = {}
        for (view, key), row in batch.latest.items():
            row_key = layout.latest_key(view, key)
            ranked = batch.ranked.get(view, ())
            if row is None and not ranked:
                wb.delete(row_key)
                continue
            old_value = old_rows(view)(row_key)
            old = None if old_value is None else layout.decode_latest(view, key, old_value)
            if old is not None:
                before[(view, key)] = position(old)
            # replays and out-of-order records must never replace a later event
            if row is None or old is None or position(row) > before[(view, key)]:
                _rerank(wb, view, ranked, old, row)
                if ranked:
                    change = _total_change(ranked, old, row)
                    totals[view] = totals.get(view, layout.AggregateTotal()) + change
                if row is None:
                    wb.delete(row_key)
                else:
                    wb.put(row_key, layout.encode_latest(row))
        for view, change in totals.items():
            _add_aggregate_total(db, wb, view, change)
        return before

    # -- reads -----------------------------------------------------------------------------

    def get(self, view: str, key: str) -> CountRow | None:
        value = self._require_open().get(layout.count_key(view, key))
        return None if value is None else layout.decode_count(view, key, value)

    def get_many(self, view: str, keys: list[str]) -> list[CountRow | None]:
        return self._read_many(view, keys, layout.count_keys, layout.decode_count)

    def _read_many(
        self,
        view: str,
        keys: list[str],
        keys_of: Callable[[str, list[str]], list[bytes]],
        decode: Callable[[str, str, bytes], _Row],
    ) -> list[_Row | None]:
        """The rows of `keys` in input order, None for unknown keys, as of one point in
        time: a batch applied meanwhile is seen by all keys or by none."""
        values = self._get_all(keys_of(view, keys))
        return [
            None if value is None else decode(view, key, value)
            for key, value in zip(keys, values, strict=True)
        ]

    def _get_all(self, stored_keys: list[bytes]) -> list[bytes | None]:
        """The values of `stored_keys`, read from one snapshot; one key by a plain get,
        which sees a batch whole or not at all by itself."""
        db = self._require_open()
        if len(stored_keys) == 1:
            return [db.get(stored_keys[0])]
        with db.snapshot() as snapshot:
            return [snapshot.get(key) for key in stored_keys]

    def top(self, view: str, limit: int) -> list[CountRow]:
        db = self._require_open()
        rows: list[CountRow] = []
        if limit <= 0:
            return rows
        prefix = layout.count_top_prefix(view)
        with db.iterator(prefix=prefix, include_key=False) as entries:
            for value in entries:
                rows.append(layout.decode_count_top(value))
                if len(rows) >= limit:
                    break
        return rows

    def windows(
        self, view: str, key: str, since_ms: int | None, until_ms: int | None, horizon_ms: int
    ) -> list[WindowRow]:
        db = self._require_open()
        since_ms, until_ms = _bound(since_ms), _bound(until_ms)
        prefix = layout.window_prefix(view, key)
        start = prefix if since_ms is None else layout.window_key(view, key, since_ms)
        stop = (
            layout.prefix_end(prefix)
            if until_ms is None
            else layout.window_key(view, key, until_ms)
        )
        rows = []
        with db.iterator(start=start, stop=stop) as entries:
            for row_key, value in entries:
                row = layout.decode_window(view, key, layout.int_at(row_key, len(prefix)), value)
                if row.end_ms > horizon_ms:
                    rows.append(row)
        return rows

    def top_window(
        self,
        view: str,
        start_ms: int,
        limit: int,
        horizon_ms: int,
        results: bool = False,
        by: str | None = None,
    ) -> list[WindowRow]:
        db = self._require_open()
        if limit <= 0 or start_ms < 0:
            return []
        prefix = (
            layout.window_top_prefix(view, start_ms)
            if by is None
            else layout.window_rank_prefix(view, by, start_ms)
        )
        if not results:
            return _top_window(db, prefix, start_ms, limit, horizon_ms)
        with db.snapshot() as snapshot:  # the rows as the index saw them
            return _with_results(
                snapshot, view, _top_window(snapshot, prefix, start_ms, limit, horizon_ms)
            )

    def latest(self, view: str, key: str) -> EventRow | None:
        value = self._require_open().get(layout.latest_key(view, key))
        return None if value is None else layout.decode_latest(view, key, value)

    def latest_many(self, view: str, keys: list[str]) -> list[EventRow | None]:
        return self._read_many(view, keys, layout.latest_keys, layout.decode_latest)

    def aggregate_total(
        self, view: str, fields: tuple[str, ...]
    ) -> tuple[int, list[layout.ResultTotal]]:
        db = self._require_open()
        stored = db.get(layout.aggregate_total_key(view))
        total = (
            layout.AggregateTotal()
            if stored is None
            else layout.decode_aggregate_total(view, stored)
        )
        sums = dict(total.sums)
        results = []
        for field in fields:
            prefix = layout.rank_prefix(view, field)
            ends = []
            for reverse in (True, False):  # the least value is last, the greatest first
                with db.iterator(prefix=prefix, reverse=reverse) as entries:
                    entry = next(entries, None)
                if entry is not None:
                    row = layout.decode_ranked(view, entry[0][len(prefix) :], entry[1])
                    ends.append(float(row.fields[field]))
            least, greatest = (ends[0], ends[1]) if ends else (None, None)
            steps = sums.get(field) if ends else None
            total_sum = None if steps is None else layout.rounded_sum(steps)
            results.append(layout.ResultTotal(field, total_sum, least, greatest))
        return total.keys, results

    def ranked(self, view: str, field: str, limit: int) -> list[EventRow]:
        db = self._require_open()
        rows: list[EventRow] = []
        if limit <= 0:
            return rows
        prefix = layout.rank_prefix(view, field)
        cut = len(prefix)
        with db.iterator(prefix=prefix) as entries:
            for index_key, value in entries:
                rows.append(layout.decode_ranked(view, index_key[cut:], value))
                if len(rows) >= limit:
                    break
        return rows

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
        db = self._require_open()
        if limit <= 0:
            return []
        since_ms, until_ms = _bound(since_ms), _bound(until_ms)
        prefix = layout.event_prefix(view, key)
        start = prefix if since_ms is None else layout.event_prefix(view, key, since_ms)
        stop = (
            layout.prefix_end(prefix)
            if until_ms is None
            else layout.event_prefix(view, key, until_ms)
        )
        if after is not None and newest_first:
            stop = min(stop, layout.event_key(view, key, after))
        elif after is not None:
            # the smallest key after `after`'s own key: no key extends a full event key
            start = max(start, layout.event_key(view, key, after) + b"\x00")
        if start >= stop:
            return []
        return list(self._events(db, view, key, len(prefix), start, stop, limit, newest_first))

    @staticmethod
    def _events(
        db: plyvel.DB,
        view: str,
        key: str,
        cut: int,
        start: bytes,
        stop: bytes,
        limit: int,
        backward: bool,
    ) -> Iterator[EventRow]:
        # backwards, the lower bound is checked here (plyvel 1.5's reverse iterator with
        # `start` yields nothing when the only key in range is `start`, as for scans)
        with db.iterator(start=None if backward else start, stop=stop, reverse=backward) as entries:
            for count, (event_key, value) in enumerate(entries, start=1):
                if event_key < start:
                    return
                yield layout.decode_event(view, key, event_key[cut:], value)
                if count >= limit:
                    return

    def scan(
        self,
        view: str,
        table: layout.Table,
        span: layout.ScanSpan,
        limit: int,
        horizon_ms: int,
        results: bool = False,
    ) -> list[tuple[bytes, layout.ScannedRow]]:
        db = self._require_open()
        head = table.head(view, span.by)
        bounds = span.bounds(head, table.keyed, table.timed)
        if limit <= 0 or bounds is None:
            return []
        cut = len(head)
        if not (results and table.timed):
            return _scan(db, table, view, bounds, cut, span.backward, limit, horizon_ms)
        with db.snapshot() as snapshot:  # windows by an index: fill in their results
            rows = _scan(snapshot, table, view, bounds, cut, span.backward, limit, horizon_ms)
            windows = [row for _, row in rows if isinstance(row, WindowRow)]
            filled = _with_results(snapshot, view, windows)
        return [(tail, row) for (tail, _), row in zip(rows, filled, strict=True)]

    def total(self, view: str) -> layout.Total:
        value = self._require_open().get(layout.total_key(view))
        return layout.Total() if value is None else layout.decode_total(value)

    def window_totals(
        self, view: str, since_ms: int | None, until_ms: int | None, horizon_ms: int
    ) -> list[tuple[int, int, layout.Total]]:
        db = self._require_open()
        since_ms, until_ms = _bound(since_ms), _bound(until_ms)
        base = layout.window_total_prefix(view)
        start = base if since_ms is None else layout.window_total_prefix(view, since_ms)
        stop = (
            layout.prefix_end(base)
            if until_ms is None
            else layout.window_total_prefix(view, until_ms)
        )
        found = []
        with db.iterator(start=start, stop=stop) as entries:
            for total_key, value in entries:
                start_ms, end_ms = layout.window_total_span(total_key, len(base))
                if end_ms > horizon_ms:
                    found.append((start_ms, end_ms, layout.decode_total(value)))
        return found

    def offsets(self) -> dict[str, int]:
        db = self._require_open()
        offset_prefix = layout.offset_prefix()
        cut = len(offset_prefix)
        result: dict[str, int] = {}
        try:
            with db.iterator(prefix=offset_prefix) as entries:
                for key, value in entries:
                    (topic,) = unpack(key[cut:])
                    result[str(topic)] = layout.decode_offset(value)
        except plyvel.CorruptionError as exc:
            raise self._damaged(exc) from exc
        return result


class _PinnedStore(LevelDBStore):
    """The reads of a LevelDBStore from one LevelDB snapshot; writes are refused."""

    def __init__(self, path: Path, snapshot: plyvel.Snapshot):
        super().__init__(path)
        self._snapshot = snapshot

    def _require_open(self) -> plyvel.DB:
        return self._snapshot  # a snapshot reads like the DB: get and iterator

    @property
    def closed(self) -> bool:
        return False

    def open(self) -> Self:
        return self

    def close(self) -> None:
        pass  # the snapshot ends with `pinned`'s block

    def apply(self, batch: ChangeBatch) -> list[Effect]:
        raise StoreError(f"partition store {self.path}: a pinned view takes no writes")

    def _get_all(self, stored_keys: list[bytes]) -> list[bytes | None]:
        return [self._snapshot.get(key) for key in stored_keys]  # pinned: one snapshot already


def _rerank(
    wb: plyvel.WriteBatch,
    view: str,
    ranked: tuple[str, ...],
    old: EventRow | None,
    row: EventRow | None,
) -> None:
    """Move a latest row's entries in the rank index of each of its `ranked` fields from
    the `old` row's values to the new `row`'s (None: no row)."""
    for field in ranked:
        if old is not None and is_rankable(old.fields.get(field)):
            wb.delete(layout.rank_key(view, field, old.fields[field], old.key))
        if row is not None and is_rankable(row.fields.get(field)):
            wb.put(
                layout.rank_key(view, field, row.fields[field], row.key), layout.encode_latest(row)
            )


def _total_change(
    ranked: tuple[str, ...], old: EventRow | None, row: EventRow | None
) -> layout.AggregateTotal:
    """What replacing `old` by `row` (None: none) adds to an aggregate view's total."""
    keys = (row is not None) - (old is not None)
    sums = []
    for field in ranked:
        change = 0
        if row is not None and is_rankable(row.fields.get(field)):
            change += layout.exact_steps(float(row.fields[field]))
        if old is not None and is_rankable(old.fields.get(field)):
            change -= layout.exact_steps(float(old.fields[field]))
        sums.append((field, change))
    return layout.AggregateTotal(keys, tuple(sorted(sums)))


def _add_aggregate_total(
    db: plyvel.DB, wb: plyvel.WriteBatch, view: str, change: layout.AggregateTotal
) -> None:
    key = layout.aggregate_total_key(view)
    stored = db.get(key)
    total = change if stored is None else layout.decode_aggregate_total(view, stored) + change
    if total.keys <= 0:
        wb.delete(key)
    else:
        wb.put(key, layout.encode_aggregate_total(total))


def _top_window(
    reader: plyvel.DB | plyvel.Snapshot, prefix: bytes, start_ms: int, limit: int, horizon_ms: int
) -> list[WindowRow]:
    """The first `limit` unexpired windows under `prefix`: of the "wtop" or a "wrank"
    index, for one window start."""
    rows: list[WindowRow] = []
    with reader.iterator(prefix=prefix, include_key=False) as entries:
        for value in entries:
            row = layout.decode_window_top(start_ms, value)
            if row.end_ms <= horizon_ms:
                continue
            rows.append(row)
            if len(rows) >= limit:
                break
    return rows


def _scan(
    reader: plyvel.DB | plyvel.Snapshot,
    table: layout.Table,
    view: str,
    bounds: tuple[bytes, bytes],
    cut: int,
    backward: bool,
    limit: int,
    horizon_ms: int,
) -> list[tuple[bytes, layout.ScannedRow]]:
    """Up to `limit` rows of `table` within `bounds`, each with its key's tail after `cut`
    bytes; windows ending at or before `horizon_ms` skipped (see `PartitionStore.scan`)."""
    low, high = bounds
    rows: list[tuple[bytes, layout.ScannedRow]] = []
    # backwards, the lower bound is checked here: plyvel's reverse iterator with `start`
    # yields nothing when the only key in range is `start` itself (plyvel 1.5)
    with reader.iterator(start=None if backward else low, stop=high, reverse=backward) as entries:
        for stored_key, value in entries:
            if stored_key < low:
                break
            tail = stored_key[cut:]
            row = layout.decode_scanned(table, view, tail, value)
            if isinstance(row, WindowRow) and row.end_ms <= horizon_ms:
                continue
            rows.append((tail, row))
            if len(rows) >= limit:
                break
    return rows


def _rerank_window(
    wb: plyvel.WriteBatch,
    view: str,
    ranked: tuple[str, ...],
    old: WindowRow | None,
    row: WindowRow | None,
) -> None:
    """Remove `old`'s entries from the index of each `ranked` result, or add `row`'s."""
    for field in ranked:
        if old is not None and is_rankable(old.fields.get(field)):
            wb.delete(layout.window_rank_key(view, field, old.start_ms, old.fields[field], old.key))
        if row is not None and is_rankable(row.fields.get(field)):
            entry = layout.window_rank_key(view, field, row.start_ms, row.fields[field], row.key)
            wb.put(entry, layout.encode_window_index(row))


def _ranked_results(db: plyvel.DB, view: str) -> list[str]:
    """The results the "wrank" index of `view` holds entries of: one seek per result."""
    found: list[str] = []
    start = layout.window_ranks_prefix(view)
    end = layout.prefix_end(start)
    while True:
        with db.iterator(start=start, stop=end, include_value=False) as entries:
            index_key = next(entries, None)
        if index_key is None:
            return found
        field = str(unpack(index_key)[2])
        found.append(field)
        start = layout.prefix_end(layout.window_rank_prefix(view, field))


def _purge_index(db: plyvel.DB, wb: plyvel.WriteBatch, base: bytes, horizon: int) -> None:
    """Delete the entries of a window index by start (`base`, then the start) of windows
    that end at or before `horizon`; one starting at or after it ends after it."""
    with db.iterator(start=base, stop=base + pack_uint(horizon)) as entries:
        for index_key, value in entries:
            start_ms = layout.int_at(index_key, len(base))
            if layout.decode_window_top(start_ms, value).end_ms <= horizon:
                wb.delete(index_key)


def _with_results(
    reader: plyvel.DB | plyvel.Snapshot, view: str, windows: list[WindowRow]
) -> list[WindowRow]:
    """`windows`, read by an index, with the results their rows hold (none when a row is
    gone, which a snapshot taken with the index read rules out)."""
    filled = []
    for window in windows:
        value = reader.get(layout.window_key(view, window.key, window.start_ms))
        stored = (
            None
            if value is None
            else layout.decode_window(view, window.key, window.start_ms, value)
        )
        filled.append(window if stored is None else stored)
    return filled


def _change_window_total(
    changes: dict[tuple[str, int, int], layout.Total],
    view: str,
    window: WindowRow,
    horizon: int | None,
    sign: int,
) -> None:
    """Add (`sign` 1) or remove (-1) `window` in the change of its (start, end)'s total;
    not if it ends at or before the batch's `horizon`: the purge deletes that total."""
    if horizon is not None and window.end_ms <= horizon:
        return
    span = (view, window.start_ms, window.end_ms)
    changes[span] = changes.get(span, layout.Total()) + layout.Total(sign, sign * window.count)


def _add_total(db: plyvel.DB, wb: plyvel.WriteBatch, key: bytes, change: layout.Total) -> None:
    """Add `change` to the total stored under `key` (a view's or a window's)."""
    if change == layout.Total():
        return
    stored = db.get(key)
    total = change if stored is None else layout.decode_total(stored) + change
    if total.keys <= 0:
        wb.delete(key)
    else:
        wb.put(key, layout.encode_total(total))


def _count_totals(db: plyvel.DB) -> None:
    """Write the totals of every count view from their rows, once: a store made before
    totals were kept (a new store has no rows, and only gets the marker)."""
    totals: dict[bytes, layout.Total] = {}
    with db.iterator(prefix=pack("row")) as rows:
        for stored_key, value in rows:
            _, view, _key = unpack(stored_key)
            view_total = layout.total_key(str(view))
            count = layout.Total(1, layout.decode_count(str(view), "", value).count)
            totals[view_total] = totals.get(view_total, layout.Total()) + count
    with db.write_batch(transaction=True) as wb:
        for stored, total in totals.items():
            wb.put(stored, layout.encode_total(total))
        wb.put(layout.TOTALS_KEY, b"1")


def _count_window_totals(db: plyvel.DB) -> None:
    """Write the totals of every window, per (start, end), from the rows, once: a store
    made before totals were kept, or when they were kept per start with one end (wrong
    for sessions that share a start), which are deleted."""
    totals: dict[bytes, layout.Total] = {}
    with db.iterator(prefix=pack("win")) as rows:
        for stored_key, value in rows:
            _, view, window_of, start_ms = unpack(stored_key)
            window = layout.decode_window(str(view), str(window_of), int(start_ms), value)
            total_key = layout.window_total_key(str(view), window.start_ms, window.end_ms)
            one = layout.Total(1, window.count)
            totals[total_key] = totals.get(total_key, layout.Total()) + one
    with db.write_batch(transaction=True) as wb:
        with db.iterator(prefix=pack("wtotal"), include_value=False) as stale:
            for total_key in stale:
                wb.delete(total_key)
        for stored, total in totals.items():
            wb.put(stored, layout.encode_total(total))
        wb.put(layout.WINDOW_TOTALS_KEY, b"1")


def _index_starts(db: plyvel.DB) -> None:
    """Write the "wstart" index of every window from the "wtop" index, once: a store made
    before it was kept (a new store has no windows, and only gets the marker)."""
    base = pack("wtop")
    with db.write_batch(transaction=True) as wb:
        with db.iterator(prefix=base) as entries:
            for index_key, value in entries:
                _, view, start_ms, _rank, key = unpack(index_key)
                wb.put(layout.window_start_key(str(view), int(start_ms), str(key)), value)
        wb.put(layout.WINDOW_STARTS_KEY, b"1")


def _disk_full(exc: BaseException) -> bool:
    # plyvel's IOError carries LevelDB's message, not an errno
    text = str(exc)
    return "No space left on device" in text or "Disk quota exceeded" in text


def _store_files(path: Path) -> dict[str, int]:
    """The size of each LevelDB file of the store at `path`."""
    return {
        entry.name: entry.stat().st_size
        for entry in os.scandir(path)
        if entry.is_file() and entry.name not in _UNSEALED
    }


def _damage_while_closed(path: Path) -> str | None:
    """What was removed or truncated since the store's last clean close (None: nothing
    found); removes the seal, which only describes the files until LevelDB opens them."""
    files = _store_files(path)
    if files and "CURRENT" not in files:
        # LevelDB would create a new empty store and delete the old tables
        return "its CURRENT file is missing"
    seal = path / SEAL
    try:
        sealed = orjson.loads(seal.read_bytes())
    except FileNotFoundError:
        return None  # never closed cleanly (a crash): LevelDB's own checks only
    except (OSError, orjson.JSONDecodeError) as exc:
        return f"its seal {SEAL} is unreadable ({exc})"
    for name, size in sorted(sealed.items()):
        if name not in files:
            return f"{name} was removed (it had {size} bytes at the last clean close)"
        if files[name] != size:
            return f"{name} has {files[name]} bytes, {size} at the last clean close"
    seal.unlink()
    return None


_TABLE = re.compile(rb"^\s*(\d+):(\d+)\[", re.MULTILINE)


def _table_damage(db: plyvel.DB, path: Path) -> str | None:
    """A table file whose size is not the one LevelDB recorded (LevelDB itself would only
    fail on reading it), or None. A missing one failed the open already; one missing now
    was compacted away since (compactions run in the background)."""
    for number, size in _TABLE.findall(db.get_property(b"leveldb.sstables") or b""):
        for name in (f"{int(number):06d}.ldb", f"{int(number):06d}.sst"):  # new, old name
            try:
                actual = (path / name).stat().st_size
            except FileNotFoundError:
                continue
            if actual != int(size):
                return f"table {name} has {actual} bytes, {int(size)} recorded"
    return None
