"""The gateway cache: point and multi-key lookups of count, latest and aggregate views answered
from gateway memory while the nodes' change feeds (`schema.feed`) prove the cached rows current.

Per partition the cache follows every view of the catalogue, unkeyed, on the RUNNING ACTIVE
owner the routing table names (`_Partition`): it sees each change that copy applies, and
the copy's applied and end offsets per changelog topic, the same the node sums in a read's
freshness. It keeps, per (view, key), the row and `as_of`, the next changelog offset of
the view's topic it holds every record below: a change at offset o >= as_of replaces the
row (as_of = o + 1), one below is already in it.

A lookup that misses is read from the nodes as before; its keys are then filled, batched
and in the background, by a keyed snapshot follow on the same copy (a snapshot row is
exact as of its offset). The keys are registered with their partition's follow before the
snapshot is asked for: a change of theirs the follow sees meanwhile is kept, and replaces
the snapshot row when it is at or after the snapshot's offset. A snapshot whose offset is
below what the follow had reached when it was asked for is dropped (a change already
passed by could be missing from it), so a key evicted and filled again never comes back
older than what the cache has seen.

An entry answers only while its partition's follow is live on the RUNNING ACTIVE copy the
routing table names now (not suspect, not restoring, membership not stalled and no
lagUnknownSince reported: the feed does not carry it), with no frame waiting to be handled,
has reached the entry's `as_of` and at least the applied offsets node reads of the
partition reported through this gateway (reads of every kind, on any copy: so a hit never
answers older than a read before it), and the read's `atLeast` is met. Anything else is a
miss, answered by the nodes. When the follow ends (a lost connection, `gone`, the table
names another owner) the partition's entries are never answered again (a generation count:
they leave memory as the LRU evicts them) and the follow starts over on the new owner. An
owner that stays but cannot vouch for a while (suspect, restoring, lagUnknownSince,
membership stalled) keeps its follow: the copy's feed goes on without a gap (a new copy ends
it with `gone`), so its entries stay exact, misses until it is fit again; ending it on every
new routing table (one a heartbeat) would drop them and load that struggling node with
snapshots again and again.

Top-N: a count view's merged top is kept per (view, limit) when every partition's follow
vouched for the read from start to end and no change seen meanwhile could alter it; it is
dropped at the first change that could (`_matters`). An `atLeast` lookup first waits,
woken by each frame (`reach`), for the follows to reach the offsets the write needs.

A lookup looks in the cache only when an entry of every key it asks is held (`holds`: a
dict lookup per key); any other lookup cannot be answered whole, so it reads the nodes as
with the cache off and costs the cache nothing more than counting its keys (`passed`).

Admission (`gateway.reads.admission`): the keys of lookups are counted in a frequency sketch
(those of a multi-key lookup that did not look one time in `MULTI_KEY_COUNT_EVERY`); a key is
filled only once it was asked `admit_after` times lately (3 by default) and, when the cache is
full, only if it was asked more often than the least recently used row it would evict. A
partition is followed once one of its keys is admitted (or a top-N read wants it). So a key
read once costs one node read, as with the cache off, and a one-off scan of many keys does
not push out the rows asked again and again.

Memory: entries are kept in LRU order and evicted past `max_bytes` (an estimate of each
entry's size: key and row JSON plus a fixed overhead); at most MAX_TOPS tops.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.cluster.consistency import AppliedAtLeast
from gateway.cluster.routing import NodeInfo, RoutingFeed
from gateway.model.rows import Ranked, ranked_count
from gateway.nodes.hub import FeedHub
from gateway.nodes.links import FeedLink, LinkError
from gateway.reads.admission import Admission
from gateway.reads.entries import (
    AS_OF,
    ENTRY_OVERHEAD_BYTES,
    GENERATION,
    SIZE,
    Entry,
    change_entry,
    least_size,
    read_entry,
    unpacked,
)
from gateway.reads.kinds import cacheable, kind_of
from gateway.reads.protocol import (
    DEFAULT_READ,
    CachedRow,
    CacheHits,
    LookupResult,
    ReadOptions,
    TopResult,
)
from gateway.reads.whole import WholePart, WholeView, WholeViews, views_to_hold
from runtime.tasks import cancelled
from schema import NodeState, View
from schema.feed import Change, FeedFrameError, offsets_of

__all__ = ["MULTI_KEY_COUNT_EVERY", "GatewayCache", "TopRead"]

log = logging.getLogger(__name__)

_TYPICAL_ENTRY_BYTES = 300  # to size the admission sketch for the entries max_bytes holds
_FILL_TIMEOUT_S = 5.0
_WHOLE_TIMEOUT_S = 30.0
_WHOLE_SLICE = 2_000  # snapshot rows of a view held whole taken in per loop turn
# a multi-key lookup that does not look counts its keys one time in this many (`passed`)
MULTI_KEY_COUNT_EVERY = 16
_RETRY_S = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
_ROUTING: dict[str, Any] = {"type": "routing"}
MAX_TOPS = 256  # merged tops kept (view, limit); the oldest goes first
_TOP_READ_CHANGES = 10_000  # changes a top read in flight keeps to judge; past it, not kept
# a follow answers only while the owner's position heartbeats (node.replication.feedsocket, every
# 0.5 s) keep coming with its lease held: three missed ones and its entries are misses. A frozen
# node falls silent well before its session can expire and its partitions move.
FEED_SILENCE_S = 1.5


@dataclass
class _Fill:
    """Keys of one view of a partition waiting for a snapshot, and the changes of theirs the
    follow saw since they were registered."""

    keys: set[str] = field(default_factory=set)
    seen: dict[str, Change] = field(default_factory=dict)


@dataclass
class _Top:
    rows: list[Ranked]
    generations: tuple[int, ...]  # of each partition's follow when it was read


@dataclass(eq=False)
class TopRead:
    """A top-N read from the nodes in flight, and the changes of its view seen meanwhile."""

    view: str
    limit: int
    generations: tuple[int, ...]
    seen: list[Change] = field(default_factory=list)
    overflow: bool = False


class _Partition:
    """The follow of one partition on its RUNNING ACTIVE owner, and what it reached."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.generation = 0
        self.node: str | None = None
        self.link: FeedLink | None = None
        self.frames: asyncio.Queue[Mapping[str, Any]] | None = None
        self.live = False  # following on an ACTIVE RUNNING copy
        self.checked_version = -1  # the routing table version the copy was checked against
        self.owned = False  # whether that table names the copy the RUNNING owner
        self.applied: dict[str, int] = {}
        self.end: dict[str, int] = {}
        self.freshness: dict[str, Any] = {"partition": partition}
        self.applied_sum = 0
        self.observed = 0  # the highest appliedOffset node reads of it reported
        # and the highest position of each view's topic they reported: the rows a lookup
        # answers are its topic's, whatever the other topics' offsets add up to
        self.observed_at: dict[str, int] = {}
        self.heard = -math.inf  # loop time of the last heartbeat sent with the lease held
        self.fills: dict[str, _Fill] = {}  # by view name
        self.filling: dict[str, asyncio.Task[None]] = {}
        self.waiters: list[asyncio.Future[None]] = []  # woken by every frame handled

    def advanced(self) -> asyncio.Future[None]:
        """A future done once the follow handled its next frame or ended."""
        waiter = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        return waiter

    def wake(self) -> None:
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def begin(self, node: str, link: FeedLink, frames: asyncio.Queue[Mapping[str, Any]]) -> None:
        self.generation += 1
        self.node, self.link, self.frames = node, link, frames
        self.live, self.checked_version, self.owned = False, -1, False
        self.applied, self.end = {}, {}
        self.heard = -math.inf
        self.fills = {}

    def end_follow(self) -> None:
        self.generation += 1
        self.live = False
        self.frames = None
        self.link = None
        self.fills = {}
        self.wake()

    def said(self, frame: Mapping[str, Any], now: float) -> None:
        self.live = frame.get("role") == "ACTIVE" and frame.get("state") == "RUNNING"
        if frame.get("type") == "progress" and frame.get("leased") is True:
            self.heard = now
        if "applied" in frame:
            self.reach(offsets_of(frame["applied"], "applied"))
        if "end" in frame:
            self.end.update(offsets_of(frame["end"], "end"))
        self.freshen()

    def reach(self, applied: Mapping[str, int]) -> None:
        """Raise the offsets the follow reached; a topic reported at 0 (nothing written to
        it yet) is recorded too: a view held whole waits for its topic to be reported."""
        for topic, offset in applied.items():
            if offset > self.applied.get(topic, -1):
                self.applied[topic] = offset

    def freshen(self) -> None:
        """The freshness a node read of this copy gives: sums over its changelog topics."""
        applied = sum(self.applied.values())
        end = sum(max(self.end.get(t, -1), n) for t, n in self.applied.items())
        self.applied_sum = applied
        if self.waiters:
            self.wake()
        self.freshness = {
            "partition": self.partition,
            "node": self.node,
            "role": "ACTIVE",
            "appliedOffset": applied,
            "lag": end - applied,
            "positions": dict(self.applied),
        }


class GatewayCache:
    """Lookups of count, latest and aggregate views from memory, kept exact by the nodes'
    feeds.
    Lives on the event loop from `start` to `stop`."""

    def __init__(
        self,
        hub: FeedHub,
        routing: RoutingFeed,
        catalogue: Iterable[View],
        max_bytes: int,
        admit_after: int = 3,
        rng: random.Random | None = None,
        whole: Iterable[str] = (),
    ) -> None:
        """`rng`: the draws of the multi-key lookups that count their keys without looking
        (`passed`), seeded to replay them. `whole`: the names of the views to hold whole
        (`gateway.reads.whole`); ValueError names one that is not a cached view."""
        self._hub = hub
        self._routing = routing
        self._views = tuple(catalogue)
        self._cached = {view.name: view for view in self._views if cacheable(view)}
        self._whole = WholeViews(views_to_hold(self._views, whole))
        self._wholes = self._whole.views  # by name: a dict lookup on every lookup's path
        self._max_bytes = max_bytes
        self._admission = Admission(max(1, max_bytes // _TYPICAL_ENTRY_BYTES), admit_after)
        self._draw = (rng or random.Random()).random
        self.skipped = 0  # lookups read from the nodes without looking: not every key held
        # whether reads avoid a node now (gateway.nodes.hedging; the planner sets it)
        self.suspect: Callable[[str], bool] = _never
        self._entries: OrderedDict[tuple[str, str], Entry] = OrderedDict()
        self._bytes = 0
        self._partitions: dict[int, _Partition] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._watcher: asyncio.Task[None] | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stopped = False
        self.hits = 0
        self.misses = 0
        self.top_hits = 0
        self.filled_from_reads = 0  # keys filled from the node read that missed them
        self.filled_by_snapshots = 0  # keys filled by a snapshot follow
        self._tops: OrderedDict[tuple[str, int], _Top] = OrderedDict()
        self._top_reads: list[TopRead] = []

    # -- life -----------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._watcher = loop.create_task(self._watch_routing())
        if self._wholes:
            self._holder = loop.create_task(self._hold_whole(), context=contextvars.Context())

    async def stop(self) -> None:
        self._stopped = True
        tasks = [t for t in (self._watcher, self._holder, *self._tasks.values()) if t is not None]
        for state in self._partitions.values():
            tasks.extend(state.filling.values())
        await cancelled(tasks, "the gateway cache")
        self._entries.clear()
        self._bytes = 0

    def stats(self) -> dict[str, int]:
        """Keys answered from memory and not, entries held (those of whole views too) and
        their estimated bytes, and the views held whole now."""
        whole = self._whole
        return {
            "hits": self.hits,
            "misses": self.misses,
            "entries": len(self._entries) + whole.entries,
            "bytes": self._bytes + whole.bytes,
            "whole_views": whole.complete,
            "top_hits": self.top_hits,
            "tops": len(self._tops),
            "refused": self._admission.refused,
            "skipped": self.skipped,
            "filled_from_reads": self.filled_from_reads,
            "filled_by_snapshots": self.filled_by_snapshots,
        }

    def cacheable(self, view: View) -> bool:
        return cacheable(view)

    # -- the lookup path (synchronous: a hit awaits nothing) ------------------------------

    def holds(self, view: View, keys: Iterable[str]) -> bool:
        """Whether an entry of every one of `keys` of `view` is held (current or not: `look`
        judges that). Only then can a look answer the lookup whole, which is what saves a
        node read; a lookup of a key not held reads the nodes without looking, then says so
        (`passed`). So a lookup the cache cannot answer costs it a dict lookup per key."""
        name = view.name
        whole = self._wholes.get(name)
        if whole is not None and whole.complete:
            return True  # every key's row, or that it has none
        entries = self._entries
        # a loop, not all() of a generator (0.5 against 0.14 us for one key): every lookup
        for key in keys:  # noqa: SIM110
            if (name, key) not in entries:
                return False
        return True

    def passed(
        self,
        view: View,
        keys_of: Mapping[int, Sequence[str]],
        read: LookupResult,
        keys: Sequence[str],
    ) -> None:
        """A lookup of `keys` (by partition: `keys_of`) that did not look (`holds` said no)
        was `read` from the nodes. Its keys are counted for admission, the partitions of
        admitted ones followed, and when every key is admitted they are filled, from `read`
        when it is exact: so a key is admitted at its `admit_after`-th ask and answered from
        memory soon after. While the cache has room, keys not admitted yet are filled from
        `read` too, when it is exact and their partitions are followed (`_fill_room`).
        The keys of a multi-key lookup are counted (and filled) one time in
        `MULTI_KEY_COUNT_EVERY`, at random: such a lookup is worth filling only when its
        keys are asked together again and again, which those draws count soon enough, and
        counting ten keys on every request cost about 5% of the gateway's CPU."""
        self.skipped += 1
        self.misses += len(keys)
        if len(keys) > 1 and self._draw() * MULTI_KEY_COUNT_EVERY >= 1.0:
            return
        admission = self._admission
        name = view.name
        refused = 0
        for partition, asked in keys_of.items():
            frequent = False
            for key in asked:
                if admission.asked(name, key):
                    frequent = True
                else:
                    refused += 1
            if frequent:
                self._follow(partition)
        if not refused:
            self.fill(view, keys_of, read, keys)
        elif not self._fill_room(view, keys_of, read, keys):
            admission.refused += refused

    def look(
        self, view: View, keys_of: Mapping[int, Sequence[str]], options: ReadOptions = DEFAULT_READ
    ) -> CacheHits:
        """The rows of `keys_of` (keys by partition) the cache can answer now, partition by
        partition (a partition is answered whole or not at all), and the rest, whose
        partitions it starts to follow once a key of theirs is asked often enough to be
        admitted. The one cache call of a lookup: it counts the keys asked (for admission)
        and keeps nothing, so whoever answers from it says what it used (`took`, `missed`).
        A view held whole is not counted: its rows are not admitted one by one, and all of
        its partitions are followed already (counting its keys was 12% of the gateway's CPU
        on ten-key lookups of it)."""
        rows: dict[str, CachedRow] = {}
        freshness: list[dict[str, Any]] = []
        missing: dict[int, list[str]] = {}
        topic = view.changelog_topic
        admission = self._admission
        whole = self._wholes.get(view.name)
        counted = whole is None or not whole.complete
        for partition, keys in keys_of.items():
            frequent = False
            if counted:
                for key in keys:
                    frequent = admission.asked(view.name, key) or frequent
            state = self._usable(partition, topic, options)
            found = None if state is None else self._found(view, state, topic, keys)
            if found is None or state is None:
                missing[partition] = list(keys)
                if frequent:
                    self._follow(partition)
                continue
            rows.update(found)
            freshness.append(state.freshness)
        return CacheHits(rows, freshness, missing)

    def took(self, view: View, keys: Collection[str]) -> None:
        """`keys` of `view`, found by `look`, were answered: hits, kept longest (those still
        held). The rows looked are answered even when their entries went since: each was
        current, with the follow's freshness, at the look, a moment within the request, as a
        node read answered then would be; a later eviction or lost follow does not make that
        answer wrong, it only keeps later lookups from the entries."""
        whole = self._wholes.get(view.name)
        if whole is None or not whole.complete:  # a whole view's rows are not in the LRU
            self._touch(view, keys)
        self.hits += len(keys)

    def missed(self, keys: int) -> None:
        """`keys` found missing by `look` were read from the nodes."""
        self.misses += keys

    def _usable(self, partition: int, topic: str, options: ReadOptions) -> _Partition | None:
        state = self._partitions.get(partition)
        if state is None or not state.live or state.frames is None or not state.frames.empty():
            return None
        if not self._vouches(state):
            return None
        if asyncio.get_running_loop().time() - state.heard > FEED_SILENCE_S:
            return None  # the owner fell silent (frozen?) or its lease lapsed
        if state.applied_sum < state.observed:
            return None
        if state.applied.get(topic, 0) < state.observed_at.get(topic, 0):
            return None  # a read showed rows of this topic the follow has not reached
        if options.at_least is not None:
            wanted = dict(options.at_least.offsets).get(partition)
            if options.at_least.topic != topic or (
                wanted is not None and state.applied.get(topic, 0) < wanted
            ):
                return None
        return state

    def _vouches(self, state: _Partition) -> bool:
        """Whether the followed copy may vouch for its entries now: the routing table names
        it the fit owner (`_owns`, judged once per table) and reads do not avoid its node."""
        version = self._routing.current.version
        if state.checked_version != version:
            state.owned = self._owns(state, state.partition)
            state.checked_version = version
        return state.owned and state.node is not None and not self.suspect(state.node)

    def _owns(self, state: _Partition, partition: int) -> bool:
        """Whether the routing table names the followed copy the RUNNING owner, and nothing
        says its lag is unknown: the membership is not stalled (the broker answers) and the
        owner did not report lagUnknownSince (which the feed does not carry)."""
        table = self._routing.current
        owner = table.owner(partition)
        return (
            owner is not None
            and table.stale_since_ms is None
            and owner.node_id == state.node
            and owner.state is NodeState.RUNNING
            and not owner.restoring(partition)
            and not owner.suspect
            and not any(
                p.partition == partition and p.lag_unknown_since_ms is not None
                for p in owner.partitions
            )
        )

    def _found(
        self, view: View, state: _Partition, topic: str, keys: Sequence[str]
    ) -> dict[str, CachedRow] | None:
        """The rows of `keys` when the entries of all are current in `state`'s follow."""
        reached = state.applied.get(topic, 0)
        whole = self._wholes.get(view.name)
        if whole is not None and whole.complete:
            return self._whole.rows(whole, state.partition, state.generation, reached, keys)
        found: dict[str, CachedRow] = {}
        entries = self._entries
        generation = state.generation
        for key in keys:
            entry = entries.get((view.name, key))
            if entry is None or entry[GENERATION] != generation or entry[AS_OF] > reached:
                return None
            found[key] = unpacked(key, entry)
        return found

    def _touch(self, view: View, keys: Iterable[str]) -> None:
        """Keep `keys` of `view` longest (the LRU order); a key no longer held is skipped:
        other tasks ran since the look (an eviction, a lost follow; or the view, held whole
        when looked, is no more, and its keys were never entries)."""
        entries = self._entries
        name = view.name
        for key in keys:
            try:
                entries.move_to_end((name, key))
            except KeyError:
                continue

    async def reach(
        self, view: View, partitions: Iterable[int], at_least: AppliedAtLeast, until: float
    ) -> None:
        """Wait, woken by the feed, until the live follows of `partitions` have reached what
        `at_least` needs of `view`, or loop time `until`; at once for a partition whose
        follow is not live or whose owner cannot vouch (the nodes wait for it then)."""
        if at_least.topic != view.changelog_topic:
            return
        loop = asyncio.get_running_loop()
        wanted = dict(at_least.offsets)
        for partition in partitions:
            state = self._partitions.get(partition)
            need = wanted.get(partition)
            while (
                need is not None
                and state is not None
                and state.live
                and state.applied.get(at_least.topic, 0) < need
                and self._vouches(state)
            ):
                remaining = until - loop.time()
                if remaining <= 0:
                    return
                try:
                    async with asyncio.timeout(remaining):
                        await state.advanced()
                except TimeoutError:
                    return

    def observe(self, freshness: Iterable[Mapping[str, Any]]) -> None:
        """Node reads answered with `freshness` (the planner tells every one): a hit must not
        answer older than them. Whatever copy answered counts: a STANDBY's appliedOffset
        sums the same changelog partitions' offsets as the owner's, and an offset is the same
        record on every copy, so a standby (hedged to, or read while the owner cannot be) that
        is ahead of the follow showed the client rows the follow has not reached."""
        for entry in freshness:
            partition = entry.get("partition")
            if not isinstance(partition, int) or partition < 0:
                continue
            # kept from before the follow starts: the read that admits a key starts it
            state = self._partitions.get(partition)
            if state is None:
                state = self._partitions[partition] = _Partition(partition)
            applied = entry.get("appliedOffset")
            if isinstance(applied, int) and applied > state.observed:
                state.observed = applied
            positions = entry.get("positions")
            if not isinstance(positions, dict):
                continue
            for topic, position in positions.items():  # a batch being written included
                if isinstance(position, int) and position > state.observed_at.get(topic, 0):
                    state.observed_at[topic] = position

    def fill(
        self,
        view: View,
        missing: Mapping[int, Sequence[str]],
        read: LookupResult | None = None,
        keys: Sequence[str] = (),
    ) -> None:
        """Fill the entries of `missing` (keys by partition: what one lookup missed) when
        admission admits every one of them and their partitions are followed. A lookup
        saves a node read only when the cache answers all of it: filling some of its keys
        would cost the fills, and the looks, for no saving. A partition the lookup's node
        `read` (of `keys`, its rows in their order) answered exactly, from the followed
        copy, is filled from that read's rows at once (`_fill_from`); the others in the
        background, by a snapshot. While the cache has room, an exact `read` fills them
        whether admitted or not (`_fill_room`), as it fills a lookup that did not look."""
        if self._fills_nothing(view):
            return
        if read is not None and self._fill_room(view, missing, read, keys):
            return
        fills: list[tuple[_Partition, list[str]]] = []
        for partition, asked in missing.items():
            state = self._followed(partition)
            if state is None:
                return  # the lookup would miss this partition next time all the same
            wanted = [k for k in asked if not self._held(view, state, k)]
            if not all([self._admits(view, k) for k in wanted]):  # each refusal counted
                return
            fills.append((state, wanted))
        rows = {} if read is None else dict(zip(keys, read.rows, strict=True))
        for state, wanted in fills:
            if not wanted:
                continue
            if read is None or not self._fill_from(view, state, wanted, read, rows):
                self._fill_later(state, view, wanted)

    def _fills_nothing(self, view: View) -> bool:
        """Whether no lookup of `view` is filled now: the cache stopped, the view is not
        cached, or it is held whole (every key's row already)."""
        whole = self._wholes.get(view.name)
        return self._stopped or not self.cacheable(view) or (whole is not None and whole.complete)

    def _followed(self, partition: int) -> _Partition | None:
        """`partition`'s state while its follow is live on a linked copy: fills come from it."""
        state = self._partitions.get(partition)
        return None if state is None or not state.live or state.link is None else state

    def _fill_from(
        self,
        view: View,
        state: _Partition,
        keys: list[str],
        read: LookupResult,
        rows: Mapping[str, CachedRow],
    ) -> bool:
        """Fill `keys` of `state`'s partition from the node read that missed them, when
        that read is exact (`_exact_at`). Else False: a snapshot fills them."""
        at = self._exact_at(view, state, read)
        if at is None:
            return False
        self._put_read(view, state, {key: read_entry(key, rows.get(key)) for key in keys}, at)
        return True

    def _exact_at(self, view: View, state: _Partition, read: LookupResult) -> int | None:
        """The position of `view`'s topic at which the node `read` holds the rows of
        `state`'s partition exactly, and the follow brings every change after it: the
        followed copy answered it as ACTIVE; it wrote no batch of the topic meanwhile (its
        position, which covers a batch being written, is what it had applied of the topic:
        `applied`, per topic; a node that does not report it, the sum of its positions is
        its appliedOffset), so its rows are exact as of its position; and the follow has
        not passed that position (a change between could have gone by). Else None."""
        # plain loops, not generators: this runs for every miss filled while the cache has room
        partition = state.partition
        for entry in read.freshness:
            if entry.get("partition") == partition:
                break
        else:
            return None
        if partition in read.failures:
            return None
        if entry.get("node") != state.node or entry.get("role") != "ACTIVE":
            return None
        positions = entry.get("positions")
        if not isinstance(positions, dict):
            return None
        topic = view.changelog_topic
        at = positions.get(topic, 0)
        applied = entry.get("applied")
        if isinstance(applied, dict):
            if applied.get(topic) != at:
                return None
        elif _summed(positions) != entry.get("appliedOffset"):
            return None
        if not isinstance(at, int) or state.applied.get(topic, 0) > at:
            return None
        return at

    def _put_read(
        self, view: View, state: _Partition, made: Mapping[str, tuple[Entry, int]], at: int
    ) -> None:
        """Hold the entries `made` of a node read exact at `at`, of keys not held now (both
        callers keep only those): no newer entry of this generation to keep, as `_put`
        must check for a change or a snapshot row."""
        for key, row in made.items():
            self._place(view, state, key, row, at)
        self._evict()
        self.filled_from_reads += len(made)

    def _fill_room(
        self,
        view: View,
        keys_of: Mapping[int, Sequence[str]],
        read: LookupResult,
        keys: Sequence[str],
    ) -> bool:
        """While the cache has room, fill the keys of a lookup that admission did not admit
        yet from the node `read` that missed them, when that read is exact for each of their
        partitions and those are followed already (`_exact_at`): such a fill costs no second
        read, starts no follow and evicts nothing, so a key missed once is answered from
        memory when asked again. All of the lookup's keys or none, as `fill` fills. Once
        the cache is full, admission alone decides (`fill`). Whether every key is held now."""
        room = self._max_bytes - self._bytes - self._whole.bytes
        # full: eviction keeps the bytes just below the bound, so some room is nearly always
        # left, too little for the lookup's keys (their sizes before their rows): without
        # this check every miss made its entries, to throw them away (6% of the gateway's
        # samples under uniform lookups once full)
        if room < sum(map(least_size, keys)) or self._fills_nothing(view):
            return False
        rows = dict(zip(keys, read.rows, strict=True))
        fills: list[tuple[_Partition, dict[str, tuple[Entry, int]], int]] = []
        for partition, asked in keys_of.items():
            state = self._followed(partition)
            if state is None:
                return False  # not followed: its keys are worth a follow once admitted
            wanted = [k for k in asked if not self._held(view, state, k)]
            if not wanted:
                continue
            at = self._exact_at(view, state, read)
            if at is None:
                return False
            made = {key: read_entry(key, rows.get(key)) for key in wanted}
            room -= sum(size for _, size in made.values())
            if room < 0:
                return False
            fills.append((state, made, at))
        for state, made, at in fills:
            self._put_read(view, state, made, at)
        return True

    def _fill_later(self, state: _Partition, view: View, keys: list[str]) -> None:
        """Add `keys` to what the fill task of `state` and `view` snapshots; start it."""
        pending = state.fills.setdefault(view.name, _Fill())
        pending.keys.update(keys)
        task = state.filling.get(view.name)
        if task is None or task.done():
            # a fresh context: the fill serves no one request, so its node calls must
            # not carry the request id and trace of the lookup that happened to start it
            state.filling[view.name] = asyncio.get_running_loop().create_task(
                self._guard_fill(state, view), context=contextvars.Context()
            )

    # -- top-N ------------------------------------------------------------------------------

    def top(
        self, view: View, limit: int, partitions: int, options: ReadOptions, counted: bool = True
    ) -> TopResult | None:
        """The merged top `limit` of a count view from memory, with every partition's
        freshness now; None when it is not cached or a partition's follow cannot vouch. A
        hit is counted unless not `counted` (whoever answers from it then says so:
        `top_answered`)."""
        top = self._tops.get((view.name, limit))
        if top is None or options.at_least is not None or len(top.generations) != partitions:
            return None
        freshness = []
        for partition, generation in enumerate(top.generations):
            state = self._usable(partition, view.changelog_topic, options)
            if state is None or state.generation != generation:
                return None
            freshness.append(state.freshness)
        if counted:
            self.top_hits += 1
        return TopResult(list(top.rows), {}, freshness)

    def top_answered(self, tops: int) -> None:
        """`tops` top-N found by `top(..., counted=False)` were answered: hits."""
        self.top_hits += tops

    def top_reading(
        self, view: View, limit: int, partitions: int, options: ReadOptions
    ) -> TopRead | None:
        """A top-N read of `view` starts: what `top_read` needs to keep its answer, or None
        when it cannot be kept (not a count view, `atLeast`, a partition not followed)."""
        if not kind_of(view).cached_top or options.at_least is not None or self._stopped:
            return None
        generations = []
        for partition in range(partitions):
            state = self._usable(partition, view.changelog_topic, options)
            if state is None:
                self._follow(partition)
            else:
                generations.append(state.generation)
        if len(generations) != partitions:
            return None
        read = TopRead(view.name, limit, tuple(generations))
        self._top_reads.append(read)
        return read

    def top_read(self, read: TopRead, result: TopResult | None) -> None:
        """Keep `result` of `read` unless it failed somewhere, a follow ended meanwhile, a
        node other than the followed owner answered, or a change seen meanwhile could have
        altered it."""
        self._top_reads.remove(read)
        if result is None or result.failures or read.overflow:
            return
        answered = {e.get("partition"): (e.get("node"), e.get("role")) for e in result.freshness}
        for partition, generation in enumerate(read.generations):
            state = self._partitions.get(partition)
            if state is None or state.generation != generation or not state.live:
                return
            if answered.get(partition) != (state.node, "ACTIVE"):
                return
        if any(_matters(result.rows, read.limit, change) for change in read.seen):
            return
        self._tops[(read.view, read.limit)] = _Top(list(result.rows), read.generations)
        while len(self._tops) > MAX_TOPS:
            self._tops.popitem(last=False)

    def _top_changed(self, view: View, change: Change) -> None:
        for ident in [i for i in self._tops if i[0] == view.name]:
            if _matters(self._tops[ident].rows, ident[1], change):
                del self._tops[ident]
        for read in self._top_reads:
            if read.view == view.name and not read.overflow:
                read.seen.append(change)
                if len(read.seen) > _TOP_READ_CHANGES:
                    read.overflow, read.seen = True, []

    def _admits(self, view: View, key: str) -> bool:
        """Whether admission fills `key`, against the row it would evict when full."""
        victim = None
        held = self._bytes + self._whole.bytes
        if held + ENTRY_OVERHEAD_BYTES > self._max_bytes and self._entries:
            victim = next(iter(self._entries))
        return self._admission.admits(view.name, key, victim)

    def _held(self, view: View, state: _Partition, key: str) -> bool:
        return self._current(view, state, key) is not None

    def _current(self, view: View, state: _Partition, key: str) -> Entry | None:
        """The entry of `key` when it is of `state`'s follow now (not an older generation)."""
        entry = self._entries.get((view.name, key))
        return entry if entry is not None and entry[GENERATION] == state.generation else None

    # -- following ------------------------------------------------------------------------

    def _follow(self, partition: int) -> None:
        """Start following `partition` unless it is followed."""
        if self._stopped or partition in self._tasks:
            return
        state = self._partitions.setdefault(partition, _Partition(partition))
        self._tasks[partition] = asyncio.get_running_loop().create_task(
            self._guarded(state),
            context=contextvars.Context(),  # not the starting request's
        )

    async def _guarded(self, state: _Partition) -> None:
        try:
            await self._run(state)
        except Exception:  # a bug: the partition is a miss until a lookup follows it again
            log.exception("cache, partition %d: following failed", state.partition)
            state.end_follow()
            self._tasks.pop(state.partition, None)

    async def _run(self, state: _Partition) -> None:
        attempt = 0
        unreachable = False  # said since the last follow began: the retries go to debug
        while True:
            node = await self._owner(state.partition, attempt)
            try:
                link = self._hub.link(node)
                ident, frames = await link.follow(
                    {"partition": state.partition, "views": [v.name for v in self._views],
                     "keys": None, "from": None, "snapshot": False, "heartbeat": True}
                )  # fmt: skip
            except LinkError as exc:
                level = logging.DEBUG if unreachable else logging.INFO
                log.log(level, "cache, partition %d: %s", state.partition, exc)
                unreachable = True
                attempt += 1
                continue
            unreachable = False
            state.begin(node.node_id, link, frames)
            self._load_wholes(state)
            try:
                why = await self._pump(state, frames)
            except FeedFrameError as exc:
                log.warning("node %s sent a bad feed frame: %s", node.node_id, exc)
                why = "error"
            finally:
                state.end_follow()
                for whole in self._wholes.values():
                    self._whole.lose(whole, state.partition)
                await link.unfollow(ident)
            attempt = attempt + 1 if why in ("lost", "gone", "error") else 0

    async def _owner(self, partition: int, attempt: int) -> NodeInfo:
        """The RUNNING ACTIVE owner of `partition`; waits for the routing table to name one."""
        feed = self._routing
        if attempt:
            await feed.newer_within(feed.current.version, _RETRY_S[min(attempt, 6) - 1])
        while True:
            table = feed.current
            owner = table.owner(partition)
            running = owner is not None and owner.state is NodeState.RUNNING
            if owner is not None and running and not owner.restoring(partition):
                return owner
            await feed.newer_within(table.version, _RETRY_S[-1])

    async def _pump(self, state: _Partition, frames: asyncio.Queue[Mapping[str, Any]]) -> str:
        while True:
            frame = await frames.get()
            kind = frame.get("type")
            if kind in ("following", "progress"):
                state.said(frame, asyncio.get_running_loop().time())
            elif kind == "changes":
                self._changes(state, frame)
            elif kind == "routing":
                if self._moved(state):
                    return "moved"
            elif kind in ("lost", "gone", "error"):
                if kind != "lost":
                    log.info("node %s on the cache's feed: %s", state.node, frame)
                return str(kind)

    def _moved(self, state: _Partition) -> bool:
        """Whether the routing table names another node the owner of `state`'s partition.
        The same node unfit to vouch (`_owns`), or no owner named for now, keeps the follow:
        its entries are misses meanwhile (`_usable`), and its copy's feed stays exact."""
        owner = self._routing.current.owner(state.partition)
        return owner is not None and owner.node_id != state.node

    def _changes(self, state: _Partition, frame: Mapping[str, Any]) -> None:
        raw = frame.get("changes")
        if not isinstance(raw, list):
            raise FeedFrameError("changes must be a list")
        cached, entries, wholes = self._cached, self._entries, self._wholes
        tops = bool(self._tops or self._top_reads)
        for doc in raw:
            view = cached.get(str(doc.get("view"))) if isinstance(doc, dict) else None
            if view is None:  # windows and events are not cached: their offsets come below
                continue
            key, offset = doc.get("key"), doc.get("offset")
            if type(key) is not str or type(offset) is not int or offset < 0:
                Change.from_json(doc)  # the FeedFrameError naming what is wrong
            topic = view.changelog_topic
            if offset + 1 > state.applied.get(topic, 0):
                state.applied[topic] = offset + 1
            change = None  # made once, of the changes someone keeps
            whole = wholes.get(view.name) if wholes else None
            if whole is not None:
                change = Change.from_json(doc)
                self._whole.changed(whole, state.partition, state.generation, change)
            pending = state.fills.get(view.name)
            waited = pending if pending is not None and key in pending.keys else None
            # most changes are of keys the cache does not hold: no Change is made of them
            if waited is None and not tops and (view.name, key) not in entries:
                continue
            change = change or Change.from_json(doc)
            if waited is not None:
                waited.seen[key] = change
            entry = self._current(view, state, key)
            if entry is not None and offset >= entry[AS_OF]:
                made = change_entry(view, key, change.row)
                self._set(view, key, entry, made, offset + 1)
            if tops:
                self._top_changed(view, change)
        state.reach(offsets_of(frame.get("applied") or {}, "applied"))
        state.freshen()
        if self._bytes + self._whole.bytes > self._max_bytes:  # rows grew
            self._evict()

    # -- filling --------------------------------------------------------------------------

    async def _guard_fill(self, state: _Partition, view: View) -> None:
        try:
            await self._fill(state, view)
        except Exception:  # a bug, or a row it cannot read: the keys stay misses
            log.exception("cache, partition %d: filling %s failed", state.partition, view.name)
            state.fills.pop(view.name, None)

    async def _fill(self, state: _Partition, view: View) -> None:
        """Snapshot the keys waiting in `state.fills[view]` until none wait."""
        while not self._stopped:
            pending = state.fills.get(view.name)
            link = state.link
            if pending is None or not pending.keys or link is None or not state.live:
                return
            generation = state.generation
            topic = view.changelog_topic
            registered_at = state.applied.get(topic, 0)
            keys = sorted(pending.keys)
            try:
                snapshot = await self._snapshot(link, state.partition, view, keys)
            except (LinkError, TimeoutError, FeedFrameError) as exc:
                log.info(
                    "cache, partition %d: no snapshot of %s: %s", state.partition, view.name, exc
                )
                if state.generation == generation:
                    state.fills.pop(view.name, None)
                    return
            if state.generation != generation:
                continue  # the follow ended: the keys a new one waits for are asked on its link
            state.fills.pop(view.name, None)  # keys missed meanwhile are asked again
            if not snapshot or snapshot[0].offset < registered_at:
                continue
            for change in snapshot:
                seen = pending.seen.get(change.key)
                if seen is not None and seen.offset >= change.offset:
                    made = change_entry(view, change.key, seen.row)
                    placed = self._put(view, state, change.key, made, seen.offset + 1)
                else:
                    made = change_entry(view, change.key, change.row)
                    placed = self._put(view, state, change.key, made, change.offset)
                self.filled_by_snapshots += placed

    async def _snapshot(
        self, link: FeedLink, partition: int, view: View, keys: list[str]
    ) -> list[Change]:
        frame = {"partition": partition, "views": [view.name], "keys": keys, "from": None,
                 "snapshot": True}  # fmt: skip
        changes: list[Change] = []

        async def take(docs: list[Any], _applied: Mapping[str, Any]) -> None:
            changes.extend(Change.from_json(doc) for doc in docs)

        await _snapshot_frames(link, frame, _FILL_TIMEOUT_S, take)
        return [c for c in changes if c.snapshot]

    # -- views held whole -----------------------------------------------------------------

    async def _hold_whole(self) -> None:
        """Follow every partition of the views held whole once the routing table knows how
        many they have, and load those already followed."""
        feed = self._routing
        waiting = dict(self._wholes)
        while waiting:
            table = feed.current
            for name, whole in list(waiting.items()):
                count = table.partition_counts.get(name)
                if not count:
                    continue
                whole.partitions = count
                del waiting[name]
                for partition in range(count):
                    state = self._partitions.get(partition)
                    if state is not None and state.link is not None:
                        self._load_whole(state, whole)
                    self._follow(partition)
            if waiting:
                await feed.newer(table.version)

    def _load_wholes(self, state: _Partition) -> None:
        """A follow of `state`'s partition began: load the views held whole from it."""
        for whole in self._wholes.values():
            if state.partition < whole.partitions:
                self._load_whole(state, whole)

    def _load_whole(self, state: _Partition, whole: WholeView) -> None:
        """Load `whole`'s rows of `state`'s partition from the follow now: a load for an
        earlier follow, still waiting for its snapshot, is cancelled."""
        name = f"whole {whole.view.name}"  # beside the key fills of the view, by name
        task = state.filling.get(name)
        if task is not None:
            task.cancel()
        state.filling[name] = asyncio.get_running_loop().create_task(
            self._guard_load(state, whole), context=contextvars.Context()
        )

    async def _guard_load(self, state: _Partition, whole: WholeView) -> None:
        try:
            await self._load(state, whole)
        except Exception:  # a bug: the view is cached key by key from now
            log.exception(
                "cache, partition %d: loading %s failed", state.partition, whole.view.name
            )
            self._let_go(whole, "loading it failed")

    async def _load(self, state: _Partition, whole: WholeView) -> None:
        """Load the rows of `whole` in `state`'s partition from a snapshot of every key,
        for the follow generation now; again after a snapshot that failed or came from below
        what the follow had reached when it was asked for."""
        generation, view = state.generation, whole.view
        topic, attempt = view.changelog_topic, 0
        limit = self._max_bytes // ENTRY_OVERHEAD_BYTES  # more rows could never fit
        while not self._stopped and state.generation == generation:
            if attempt:
                await asyncio.sleep(_RETRY_S[min(attempt, len(_RETRY_S)) - 1])
            attempt += 1
            link = state.link
            if link is None or topic not in state.applied:  # no `following` yet
                await state.advanced()
                continue
            if self._wholes.get(view.name) is not whole or state.generation != generation:
                return
            part = self._whole.begin(whole, state.partition, generation)
            registered_at = state.applied[topic]
            try:
                offset = await self._snapshot_whole(link, state, whole, part, limit, registered_at)
            except _TooLarge as exc:
                self._let_go(whole, str(exc))
                return
            except _Behind as exc:  # a change between the two could be missing from both
                log.info(
                    "cache, partition %d: the snapshot of %s is from offset %d, below the %d "
                    "the follow had reached: asking again", state.partition, view.name,
                    exc.offset, registered_at,
                )  # fmt: skip
                continue
            except (LinkError, TimeoutError, FeedFrameError) as exc:
                log.info(
                    "cache, partition %d: no snapshot of %s: %s", state.partition, view.name, exc
                )
                continue
            if whole.parts.get(state.partition) is not part or state.generation != generation:
                return  # the follow ended, or a load for a newer one took over
            self._whole.loaded(whole, part, offset)
            self._evict()
            return

    async def _snapshot_whole(
        self,
        link: FeedLink,
        state: _Partition,
        whole: WholeView,
        part: WholePart,
        limit: int,
        registered_at: int,
    ) -> int:
        """Take a snapshot of every key of `whole`'s view in `state`'s partition into `part`,
        a frame at a time as each comes (a partition of a million rows comes in hundreds: the
        parsed changes of one are let go before the next, so a garbage collection never walks
        a whole partition's of them); returns the offset it was read at. _Behind when that is
        below `registered_at`, where the follow stood when the load registered."""
        view = whole.view
        topic = view.changelog_topic
        frame = {"partition": state.partition, "views": [view.name], "keys": None, "from": None,
                 "snapshot": True, "limit": limit}  # fmt: skip

        async def take(changes: list[Any], applied: Mapping[str, Any]) -> None:
            offset = offsets_of(applied, "applied").get(topic, 0)
            if offset < registered_at:
                raise _Behind(offset)
            for start in range(0, len(changes), _WHOLE_SLICE):  # no long pause of the loop
                if whole.parts.get(state.partition) is not part:
                    return  # superseded: `_load` sees it once the follow is let go
                self._whole.take(whole, part, offset, changes[start : start + _WHOLE_SLICE])
                await asyncio.sleep(0)
            self.filled_by_snapshots += len(changes)

        applied = await _snapshot_frames(link, frame, _WHOLE_TIMEOUT_S, take)
        return offsets_of(applied, "applied").get(topic, 0)

    # -- entries --------------------------------------------------------------------------

    def _put(
        self, view: View, state: _Partition, key: str, made: tuple[Entry, int], as_of: int
    ) -> bool:
        """Hold `made` as `key`'s entry as of `as_of`, unless the follow brought it further;
        whether it was placed."""
        current = self._current(view, state, key)
        if current is not None and current[AS_OF] >= as_of:
            return False  # the follow already brought it further
        self._place(view, state, key, made, as_of)
        self._evict()
        return True

    def _place(
        self, view: View, state: _Partition, key: str, made: tuple[Entry, int], as_of: int
    ) -> None:
        """Set `key`'s entry to `made`, of `state`'s follow generation, in the LRU place of
        the entry it replaces (of any generation: its size is given back), else last."""
        entry = self._entries.get((view.name, key), (state.generation, 0, 0))
        self._set(view, key, (state.generation, *entry[1:]), made, as_of)

    def _set(self, view: View, key: str, entry: Entry, made: tuple[Entry, int], as_of: int) -> None:
        """Replace `entry` (kept in its place in the LRU order, or added last) with the
        packed row and size `made`."""
        held, size = made
        self._bytes += size - entry[SIZE]
        self._entries[(view.name, key)] = (entry[GENERATION], as_of, size, *held)

    def _evict(self) -> None:
        """Evict least recently used rows past the bound; let go of the views held whole
        whose rows alone outgrew it, the largest first."""
        while self._whole.bytes > self._max_bytes and self._wholes:
            self._let_go(max(self._wholes.values(), key=lambda whole: whole.bytes))
        entries = self._entries
        bound = self._max_bytes - self._whole.bytes
        while self._bytes > bound and entries:
            _, dropped = entries.popitem(last=False)
            self._bytes -= dropped[SIZE]

    def _let_go(self, whole: WholeView, why: str = "") -> None:
        """Hold `whole` no more; once only (two partitions' loads may both find it too large)."""
        if self._wholes.get(whole.view.name) is not whole:
            return
        log.warning(
            "the gateway cache holds view %s whole no more: %s; it is cached key by key. "
            "Raise STATEFED_GATEWAY_CACHE_MB, or take %s out of STATEFED_GATEWAY_CACHE_WHOLE_VIEWS",
            whole.view.name,
            why or f"its rows took {whole.bytes} bytes, past the cache's {self._max_bytes}",
            whole.view.name,
        )
        self._whole.drop(whole)

    # -- routing --------------------------------------------------------------------------

    async def _watch_routing(self) -> None:
        version = self._routing.current.version
        while True:
            table = await self._routing.newer(version)
            version = table.version
            for state in self._partitions.values():
                if state.frames is not None:
                    state.frames.put_nowait(_ROUTING)


class _TooLarge(Exception):
    """A partition holds more rows of a view than a snapshot of every key may take."""


class _Behind(Exception):
    """A snapshot read below where the follow stood when its load registered."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"snapshot read at offset {offset}")
        self.offset = offset


async def _snapshot_frames(
    link: FeedLink,
    frame: dict[str, Any],
    timeout_s: float,
    take: Callable[[list[Any], Mapping[str, Any]], Awaitable[None]],
) -> Mapping[str, Any]:
    """Hand `take` the snapshot changes' JSON of the snapshot follow `frame` asks for, and
    its `applied`, a `changes` frame at a time up to the one without `more`; returns that
    `applied` (the follow is let go then). LinkError when the follow ends first, TimeoutError
    when no frame comes for `timeout_s`, _TooLarge when the node refuses its size."""
    ident, frames = await link.follow(frame)
    try:
        while True:
            async with asyncio.timeout(timeout_s):
                got = await frames.get()
            kind = got.get("type")
            if kind == "changes":
                applied = got.get("applied") or {}
                await take(got.get("changes") or [], applied)
                if got.get("more") is not True:
                    return applied
                continue
            if kind == "error" and got.get("tooLarge") is True:
                raise _TooLarge(str(got.get("message")))
            if kind in ("lost", "gone", "error"):
                raise LinkError(f"snapshot follow ended: {got.get('message', kind)}")
    finally:
        await link.unfollow(ident)


def _summed(positions: Mapping[str, Any]) -> int | None:
    """The sum of `positions` (None when one is no offset): a node that reports no applied
    offsets per topic is exact when it equals its appliedOffset."""
    total = 0
    for offset in positions.values():
        if not isinstance(offset, int):
            return None
        total += offset
    return total


def _matters(rows: Sequence[Ranked], limit: int, change: Change) -> bool:
    """Whether `change` could alter the merged top `rows` of `limit` (gateway.subscriptions.top)."""
    if len(rows) < limit or change.row is None:
        return True
    count = change.row.get("count")
    return any(r.key == change.key for r in rows) or (
        isinstance(count, int) and count >= ranked_count(rows[-1])
    )


def _never(_node: str) -> bool:
    return False
