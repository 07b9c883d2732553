"""The updates of one key subscription: the changes of its keys, merged from one feed stream
per partition, each delivered once, with the resume token that covers what was delivered.

The rule, per subscription: reached[p] starts at the token's offset and is then the
`applied` offset of p's last batch (every change below it was received); a snapshot row sets
covered[entry] to its offset; a change at offset o is delivered iff o >= reached[p] and
o >= covered[entry]; then covered[entry] = o + 1 (an entry is a key's row, or one window or
event of it). Once reached[p] passes covered[entry] the entry is forgotten: the first rule
covers it, and a history subscription's entries (one per event) do not pile up. Updates wait
in `pending` until the subscriber takes them, every change while the subscriber keeps up. A
row subscription (count, latest, windows) whose oldest waiting update has waited longer than
`max_wait_s` is behind: a new row of an entry then replaces the one waiting for it, so a
reader that cannot take every change gets each entry's newest row, never an ever older
backlog. Past `bound` waiting updates, a row subscription keeps only the newest row of each
entry: one row per key always fits, but each window of a key is an entry of its own, so a
windowed subscriber that takes nothing would hold a row for every window that changes; once
it is behind with max(`bound`, its number of keys) changes waiting besides its snapshot rows
(bounded by the windows a node keeps), it ends with SlowSubscriberError (one batch may bring
more distinct windows than that: a reader keeping up takes them). A history subscription
gets every event, paced by its reader while it reads from its own follow (below): a batch
of that follow waits until it fits in `bound` (or nothing waits), so a subscriber far behind
catches up at its own pace, holding a few batches (`_OWN_BATCHES`) however far behind it
is. Once it shares the partition's follow, which cannot wait for one subscriber, it ends as
soon as `bound` updates wait. Either way its token is then past every update held, so
resuming from the last update's token gets the rest. The pending update of the lowest
offset goes first, so the token of every message, per partition the lowest offset not
delivered yet, never skips a change nor repeats one.

Each partition's changes come first from a follow of the subscription's own (its snapshot,
or the replay from its token), then, once that follow has delivered every change below the
offset from which the partition's shared follow (`FeedHub.watch_keys`) holds them all,
from the shared follow: a thousand subscribers cost a node one follow per partition. A
history subscription hands over only when the shared follow's waiting events fit in its
bound; until then its own follow goes on, paced.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.model.errors import SlowSubscriberError
from gateway.nodes.hub import FeedBatch, FeedHub, FeedStream, KeyWatch
from gateway.subscriptions.tokens import ResumeToken
from schema import View
from schema.feed import Change

__all__ = ["KeyUpdate", "key_updates"]

_QUEUE = "STATEFED_GATEWAY_SUBSCRIPTION_QUEUE"
# shared batches a subscription keeps while its own follow catches up; past it the next
# batch is a new start (its `start` says from where the shared follow holds every change)
_HELD_BATCHES = 256
# batches a history subscription's own follow holds while its reader takes what waits: past
# them the follow stops, and starts again where it was once they are taken (a reader that
# stalls holds these, not a node's whole replay)
_OWN_BATCHES = 8
Entry = tuple[str, tuple[int, ...]]  # a key, and which of its rows (window, event): () = the key's
Slot = int  # a waiting update's place in arrival order


@dataclass(frozen=True)
class KeyUpdate:
    """One delivered change (or snapshot row) of a key, and the token covering it."""

    key: str
    at: tuple[int, ...]
    row: Mapping[str, Any] | None
    offset: int
    token: str
    freshness: Mapping[str, Any]
    snapshot: bool = False


@dataclass
class _Pending:
    change: Change
    partition: int
    freshness: Mapping[str, Any]
    since: float  # monotonic s it arrived at


class _Merge:
    """What one subscription has received and not yet delivered, and its token state."""

    def __init__(
        self,
        view: View,
        token: ResumeToken | None,
        conflate: bool,
        bound: int,
        max_wait_s: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        keys: int,
    ) -> None:
        self.view = view
        self.clock = clock
        self.floor: dict[int, int] = dict(token.offsets) if token is not None else {}
        self.reached: dict[int, int] = dict(self.floor)
        self.covered: dict[int, dict[Entry, int]] = {}  # per partition, above reached
        self.conflate = conflate
        self.bound = bound
        self.max_wait_s = max_wait_s
        self.pending: dict[Slot, _Pending] = {}  # in arrival order
        self.newest: dict[Entry, Slot] = {}  # each entry's newest waiting update
        self.snapshot_rows = 0  # of the waiting updates
        self.changes_bound = max(bound, keys)  # waiting changes of a row subscription
        self._serial = 0
        self.wake = asyncio.Event()  # an update arrived, or the subscription ended
        self.taken = asyncio.Event()  # the subscriber took an update, or it ended
        self.failure: list[BaseException] = []  # what ended it, after the updates before

    def fail(self, exc: BaseException) -> None:
        """End the subscription with `exc` once the updates before it are taken; nothing
        arriving after it is accepted (a gap would follow)."""
        if not self.failure:
            self.failure.append(exc)
        self.wake.set()
        self.taken.set()

    def has_room(self, changes: int) -> bool:
        """Whether `changes` more updates fit in `bound` beside those waiting."""
        return len(self.pending) + changes <= self.bound

    async def room_for(self, changes: int) -> None:
        """Wait until `changes` more updates fit in `bound` beside those waiting (or none
        waits), or the subscription ended. A history subscription's own follow (its replay
        from a token) waits here, so a subscriber far behind takes its replay at its own
        pace instead of ending past its bound: the follow holds the node's batches
        meanwhile, and past its own bound stops and starts again where it was."""
        while self.pending and not self.has_room(changes) and not self.failure:
            self.taken.clear()
            await self.taken.wait()

    def accept(
        self, partition: int, batch: FeedBatch, empty_snapshots: bool, paced: bool = False
    ) -> None:
        """Hold what `batch` brings that was not delivered yet. SlowSubscriberError when a
        history subscription is past `bound`: its token then stops at the change not held.
        A `paced` batch (one `room_for` let in) is held whole: it came when it fit, or when
        nothing waited, so the updates waiting stay under `bound` plus one batch."""
        if self.failure:
            return  # ended: what came after the failure is not delivered
        now = self.clock()
        seen = self.reached.get(partition, 0)
        covered = self.covered.setdefault(partition, {})
        for change in batch.changes:
            entry: Entry = (change.key, change.at)
            if change.snapshot:
                covered[entry] = change.offset
                if change.row is None and not empty_snapshots:
                    continue
            else:
                if change.offset < max(seen, covered.get(entry, 0)):
                    continue
                covered[entry] = change.offset + 1
                if change.row is None and not self.conflate:
                    continue  # a history event removed by retention: nothing to show
            if not self._hold(entry, _Pending(change, partition, batch.freshness, now), paced):
                # every change of the partition below this one is held or was skipped: the
                # tokens of those held pass them, and a resume starts at this one
                self.reached[partition] = max(seen, change.offset)
                limit = self.changes_bound if self.conflate else self.bound
                raise SlowSubscriberError(self.view.name, limit, _QUEUE)
        reached = self.reached[partition] = max(batch.applied, seen)
        self.covered[partition] = {e: o for e, o in covered.items() if o > reached}
        self.wake.set()

    def _hold(self, entry: Entry, pending: _Pending, paced: bool = False) -> bool:
        """Keep every change while the subscriber keeps up; a row subscription that is
        behind keeps the newest row of `entry` only, and past `bound` waiting conflates.
        False, holding nothing, when the subscription is too far behind (see the module)."""
        if self.conflate and self._behind(pending.since):
            superseded = self.newest.get(entry)
            if superseded is not None:
                self._pop(superseded)
        if len(self.pending) >= self.bound and not paced:
            if not self.conflate:
                return False
            self._conflate(entry)
            changes = len(self.pending) - self.snapshot_rows
            over = not pending.change.snapshot and changes >= self.changes_bound
            if over and self._behind(pending.since):  # not one large batch: a stalled reader
                return False
        self._serial += 1
        self.pending[self._serial] = pending
        self.newest[entry] = self._serial
        if pending.change.snapshot:
            self.snapshot_rows += 1
        return True

    def _pop(self, slot: Slot) -> _Pending:
        """Take the waiting update `slot` out."""
        held = self.pending.pop(slot)
        entry = _entry(held.change)
        if self.newest.get(entry) == slot:
            del self.newest[entry]
        if held.change.snapshot:
            self.snapshot_rows -= 1
        return held

    def _behind(self, now: float) -> bool:
        """Whether the oldest waiting update has waited longer than `max_wait_s`."""
        oldest = next(iter(self.pending.values()), None)
        return oldest is not None and now - oldest.since > self.max_wait_s

    def _conflate(self, entry: Entry) -> None:
        """Make room for a row of `entry`: drop what waits for `entry`; if nothing does, each
        entry's older rows. Rows of distinct entries all stay (a snapshot of a key's windows
        is one row a window), so the queue can pass `bound` by the entries waiting."""
        dropped = [slot for slot, p in self.pending.items() if _entry(p.change) == entry]
        if not dropped:
            newest = set(self.newest.values())
            dropped = [slot for slot in self.pending if slot not in newest]
        for slot in dropped:
            self._pop(slot)

    def take(self) -> KeyUpdate | None:
        if not self.pending:
            return None
        if len(self.pending) == 1:
            slot = next(iter(self.pending))
        else:
            slot = min(self.pending, key=lambda s: _shown_offset(self.pending[s].change))
        held = self._pop(slot)
        self.taken.set()
        change = held.change
        return KeyUpdate(
            change.key,
            change.at,
            change.row,
            _shown_offset(change),
            self.token(),
            held.freshness,
            change.snapshot,
        )

    def token(self) -> str:
        offsets = dict(self.reached)
        for held in self.pending.values():
            p = held.partition
            offsets[p] = min(offsets.get(p, held.change.offset), held.change.offset)
        return ResumeToken(self.view.name, offsets).text()


def _entry(change: Change) -> Entry:
    return (change.key, change.at)


def _shown_offset(change: Change) -> int:
    """The offset an update shows: a change's own; for a snapshot row, that of the last
    record it can hold (its offset is the next one), so a change at that next offset shows
    a greater one."""
    return change.offset - 1 if change.snapshot else change.offset


async def key_updates(
    hub: FeedHub,
    view: View,
    partitions: int,
    keys: Sequence[str],
    token: ResumeToken | None,
    max_lag: int | None,
    *,
    conflate: bool = True,
    snapshot: bool = True,
    empty_snapshots: bool = True,
    bound: int = 1000,
    max_wait_s: float = 0.1,
) -> AsyncGenerator[KeyUpdate, None]:
    """The updates of `keys` of `view` (P = `partitions`): without a token (and with
    `snapshot`) first each key's current rows, then every change, from the token's offsets
    when there is one. A row subscription is behind once an update waited `max_wait_s`."""
    by_partition: dict[int, list[str]] = {}
    for key in dict.fromkeys(keys):
        by_partition.setdefault(view.partition_of(key, partitions), []).append(key)
    merge = _Merge(view, token, conflate, bound, max_wait_s, keys=len(set(keys)))
    async with contextlib.AsyncExitStack() as stack:
        for partition, asked in sorted(by_partition.items()):
            source = _Source(partition, merge, empty_snapshots)
            source.shared = await stack.enter_async_context(
                hub.watch_keys(view, partition, max_lag, asked, source.take_shared)
            )
            after = merge.floor.get(partition)
            own = await stack.enter_async_context(
                hub.follow(
                    view,
                    partition,
                    asked,
                    after,
                    snapshot and after is None,
                    max_lag,
                    batches=None if conflate else _OWN_BATCHES,
                )
            )
            source.start(own)
            # at once: a follow of a later partition that fails must not leave it running
            stack.callback(_cancel, [source.task] if source.task is not None else [])
        while True:
            update = merge.take()
            if update is not None:
                yield update
                continue
            if merge.failure:
                raise merge.failure[0]
            merge.wake.clear()
            await merge.wake.wait()


class _Source:
    """Where one partition's changes of a subscription come from: the subscription's own
    follow of its keys (for the snapshot, or from its token) until that follow has reached
    the offset from which the partition's shared follow holds every change, then the
    shared follow (`FeedHub.watch_keys`) from the offset the own follow reached, and the
    own follow stops. Each change is delivered once: the own follow's below that offset,
    the shared follow's from it."""

    def __init__(self, partition: int, merge: _Merge, empty_snapshots: bool) -> None:
        self.partition = partition
        self.merge = merge
        self.empty_snapshots = empty_snapshots
        self.shared: KeyWatch | None = None
        self.own: FeedStream | None = None
        self.task: asyncio.Task[None] | None = None
        self.shared_from: int | None = None  # the first shared batch's start
        self.held: list[FeedBatch] = []  # shared batches before the hand-over
        self.joined_at: int | None = None  # from this offset on the shared follow delivers
        self.stopping: asyncio.Task[None] | None = None  # the own follow's end
        self.in_hand: FeedBatch | None = None  # an own batch waiting for room in the merge

    def start(self, own: FeedStream) -> None:
        self.own = own
        self.task = asyncio.get_running_loop().create_task(self._pump(own))

    async def _pump(self, own: FeedStream) -> None:
        try:
            async for batch in own:
                paced = not self.merge.conflate  # every event counts: the reader sets the pace
                if paced:
                    self.in_hand = batch
                    await self.merge.room_for(len(batch.changes))
                    self.in_hand = None
                self._accept(batch, paced)
                self._join()
                if self.joined_at is not None:
                    return
        except Exception as exc:
            self.merge.fail(exc)

    def take_shared(self, item: FeedBatch | Exception) -> None:
        """A batch of the shared follow (with the changes of the keys only)."""
        if isinstance(item, Exception):
            self.merge.fail(item)
        elif self.joined_at is not None:
            joined_at = self.joined_at
            if item.changes and item.changes[0].offset >= joined_at:  # offset order: all new
                self._accept(item)
                return
            changes = tuple(c for c in item.changes if c.offset >= joined_at)
            if changes:
                self._accept(dataclasses.replace(item, changes=changes))
        else:
            if self.shared_from is None:
                self.shared_from = item.start
            if item.changes:
                self.held.append(item)
            if len(self.held) > _HELD_BATCHES:  # a long replay: start over from the next one
                self.held, self.shared_from = [], None
            self._join()

    def _join(self) -> None:
        """Hand over to the shared follow once the own follow has delivered every change
        below the offset from which the shared follow holds them all."""
        own, shared = self.own, self.shared
        if own is None or shared is None or self.shared_from is None or self.joined_at is not None:
            return
        if self.in_hand is not None or own.held or own.reached is None:
            return
        if own.reached < self.shared_from:
            return
        if not self.merge.conflate and not self.merge.has_room(self._held_from(own.reached)):
            return  # the shared follow's events would not fit: the own follow goes on, paced
        self.joined_at = own.reached
        shared.settle()
        held, self.held = self.held, []
        for batch in held:
            self.take_shared(batch)
        if self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()  # what the own follow still brings is the shared follow's
        self.stopping = asyncio.get_running_loop().create_task(own.stop())

    def _held_from(self, offset: int) -> int:
        """How many changes of the held shared batches are at `offset` or after."""
        return sum(1 for batch in self.held for change in batch.changes if change.offset >= offset)

    def _accept(self, batch: FeedBatch, paced: bool = False) -> None:
        if self.merge.failure:
            return
        try:
            self.merge.accept(self.partition, batch, self.empty_snapshots, paced)
        except Exception as exc:  # a history subscriber too slow: it ends, the others go on
            self.merge.fail(exc)


def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
