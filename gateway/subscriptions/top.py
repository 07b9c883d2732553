"""The updates of a top-N subscription: the merged top of a view (of one window, for a
windowed view; by one numeric result, for an aggregate view), read again with the planner
when a change on any partition could alter it, pushed when it did, at most once per
interval.

Every partition is followed from now (no keys), by one follow per view, partition and
maxLag that all top-N subscriptions share (`FeedHub.watch`). A change can alter the top
only when it is of a row in the top, or the top is short, or it ranks at least as high as
the top's last row: its count, or its value of the result ranked by (and, for a windowed
view, it is of the window asked for). A change that comes while the top is being read is
judged again against the rows that read returns: a ranked value can go down, so the new
top may hold (or end above) a key whose change the old top made look irrelevant. Each update
carries the offsets the followed partitions had reached before the read, as a resume token (a
resubscription simply reads the top anew), and the freshness of the read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.model.rows import Event, Ranked, WindowCount, ranked_count
from gateway.model.timestamps import floor_ms
from gateway.nodes.hub import FeedBatch, FeedHub, FeedStream
from gateway.reads.protocol import ReadOptions, Reads
from gateway.subscriptions.tokens import ResumeToken
from runtime.ranking import is_rankable
from schema import View
from schema.feed import Change

__all__ = ["TopUpdate", "top_updates"]

_HELD = 1024  # changes held for judging against a running read's rows; past that, read again


@dataclass(frozen=True)
class TopUpdate:
    rows: list[Ranked]
    token: str
    freshness: list[dict[str, Any]]


class _Watch:
    """Whether the changes seen since the last read could alter the top."""

    def __init__(self, limit: int, window_ms: int | None, by: str | None) -> None:
        self.limit = limit
        self.window_ms = window_ms
        self.by = by
        self.rows: list[Ranked] | None = None
        self.changed = asyncio.Event()
        self.changed.set()  # the first read
        self.failure: Exception | None = None
        self._held: list[Change] | None = None  # while a read runs: the changes not judged yet

    def reading(self) -> None:
        """A read of the top starts: changes that do not alter `rows` wait for its rows."""
        self._held = []

    def read(self, rows: list[Ranked]) -> None:
        """The read returned `rows`: a change seen meanwhile that could alter them (the read
        may not hold it) asks for another read."""
        held, self._held = self._held, None
        self.rows = rows
        if held and any(self.matters(c) for c in held):
            self.changed.set()

    def matters(self, change: Change) -> bool:
        if self.window_ms is not None and change.at[:1] != (self.window_ms,):
            return False
        rows = self.rows
        if rows is None or len(rows) < self.limit or change.row is None:
            return True
        value = self._value(change.row)
        return any(r.key == change.key for r in rows) or (
            value is not None and value >= self._last(rows[-1])
        )

    def _value(self, row: Mapping[str, Any]) -> float | None:
        """What a changed row ranks by: its count, or its value of `by` (None: unranked)."""
        value = row.get("count") if self.by is None else (row.get("fields") or {}).get(self.by)
        return float(value) if value is not None and is_rankable(value) else None

    def _last(self, row: Ranked) -> float:
        if self.by is None:
            return ranked_count(row)
        assert isinstance(row, Event | WindowCount), row  # an aggregate's, or a window's
        return float(row.values[self.by])

    def seen(self, batch: FeedBatch | Exception) -> None:
        if isinstance(batch, Exception):  # the subscriber gets it with its next update
            self.failure = batch
            self.changed.set()
            return
        held = self._held
        for change in batch.changes:
            if self.changed.is_set():
                return  # a read is due: it comes after these changes
            if self.matters(change) or (held is not None and len(held) >= _HELD):
                self.changed.set()
            elif held is not None:
                held.append(change)


async def top_updates(
    hub: FeedHub,
    reads: Reads,
    view: View,
    partitions: int,
    limit: int,
    window: datetime | None,
    interval_s: float,
    options: ReadOptions,
    timeout_s: float,
    by: str | None = None,
) -> AsyncGenerator[TopUpdate, None]:
    """The top `limit` of `view` now (by the aggregate result `by`, for an aggregate
    view), then each time it changed, at most every `interval_s`."""
    loop = asyncio.get_running_loop()
    watch = _Watch(limit, None if window is None else floor_ms(window), by)
    async with contextlib.AsyncExitStack() as stack:
        streams = [
            await stack.enter_async_context(hub.watch(view, p, options.max_lag, watch.seen))
            for p in range(partitions)
        ]
        await _following(streams, timeout_s)  # changes from before the first read are in it
        pushed_at = None
        while True:
            await watch.changed.wait()
            if pushed_at is not None and loop.time() < pushed_at + interval_s:
                await asyncio.sleep(pushed_at + interval_s - loop.time())  # the rate bound
            watch.changed.clear()
            if watch.failure is not None:
                raise watch.failure
            reached = {s.partition: s.reached for s in streams if s.reached is not None}
            watch.reading()
            result = await reads.top(view, limit, loop.time() + timeout_s, window, options, by)
            fresh = result.rows != watch.rows
            watch.read(result.rows)
            if fresh:
                pushed_at = loop.time()
                token = ResumeToken(view.name, reached).text()
                yield TopUpdate(result.rows, token, result.freshness)


async def _following(streams: Sequence[FeedStream], timeout_s: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            for stream in streams:
                await stream.following.wait()
