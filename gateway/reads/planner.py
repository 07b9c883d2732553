"""Planning reads over partitions: lookups go to the owning nodes, one request per node;
a key's windows and history go to its owner; top-N (per window for windowed views) asks
every partition exactly once and merges the nodes' local tops; a page of a whole-view scan
asks every partition for its next slice from its own position and merges them
(gateway.model.scans), and totals add up every partition's.

Partitions that fail (NOT_OWNER, refused, timed out, unassigned) are retried after a routing
refresh, with backoff, inside the request's deadline. A partition without a live owner,
or whose owner failed it or is still restoring it, is read from a STANDBY copy (asked for
with the `readStandby` request extension; the node's freshness then says STANDBY): with
`max_lag` > 0 one at most `max_lag` records behind; with `max_lag` 0 any live one, or else
the restoring owner, which must then prove its copy current first (`readCurrent`,
node.reads.currency). A partition nobody claims and with no such standby is read from a standby
copy still restoring (one handed over after its node lost the group session may be behind
its new owner), which must prove itself current likewise. A read's `ReadOptions` may set
its own bound. A read with an `atLeast` token makes the nodes wait until they have applied what the
token needs (`appliedAtLeast`, gateway.cluster.consistency). What still fails is returned as one
`RoutingError` per partition next to the data for the rest: never a silently short answer.

Hedged reads: when an owner has not answered within its node's hedge delay
(gateway.nodes.hedging), the standby copies within `max_lag` of its partitions are asked too and
the first answer of each partition is taken; the calls still running are then cancelled.
Exactly one answer is taken per partition, with the freshness of the copy that gave it, so
a lookup never mixes rows and a top-N never counts a partition twice. A suspect owner
(missed heartbeats, or calls left unanswered) is not asked: its partitions go to a standby
at once, or fail at once with reason SUSPECT. `atLeast` reads are not hedged (they wait on
purpose), but suspect owners are avoided for them too.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar

import orjson

from gateway.cluster.routing import Disclaimers, NodeInfo, RoutingFeed, RoutingTable, group_keys
from gateway.config import GatewayConfig
from gateway.model import cursors, inputs
from gateway.model.errors import (
    BadRequestError,
    GatewayError,
    NodeSuspectError,
    NodeTimeoutError,
    NodeUnavailableError,
    NotOwnerError,
    RoutingError,
)
from gateway.model.prices import DEFAULT_SCAN_PAGE
from gateway.model.rows import Event, Page, PartialTotal, Ranked, Row, WindowCount
from gateway.model.scans import ScanSlice, merge_page
from gateway.nodes.coalesce import Coalescer
from gateway.nodes.documents import with_extensions
from gateway.nodes.hedging import NodeWatch
from gateway.nodes.reply import NodeReply, other_partitions, read_answer
from gateway.nodes.upstream import Upstream
from gateway.reads.cache import GatewayCache
from gateway.reads.kinds import view_queries
from gateway.reads.protocol import (
    DEFAULT_READ,
    SKIPPED,
    CacheHits,
    KeyRead,
    LookupResult,
    ReadOptions,
    ScanAsk,
    ScanResult,
    TopResult,
    TotalsResult,
)
from runtime.ranking import merge_top, rank, value_rank
from schema import APPLIED_AT_LEAST, CATALOGUE, READ_CURRENT, READ_STANDBY, View

__all__ = ["KeyRead", "LookupResult", "Planner", "ReadOptions", "ScanResult", "TopResult"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_Rows = dict[str, Row | Event | None]  # a lookup's rows by key
_Slices = dict[int, ScanSlice]  # a scan's rows by partition
_NOBODY: frozenset[str] = frozenset()
# of an `atLeast` lookup's time, what it waits for the cache's feed to reach the offsets
# before the nodes are asked (they then wait the rest themselves)
_FEED_WAIT_SHARE = 0.8


@dataclass(frozen=True)
class Piece(Generic[T]):
    """What one node call answered: the read's value, and the freshness of its partitions."""

    value: T
    freshness: list[dict[str, Any]]


class Route(NamedTuple):
    """One node request of a round: the node, its partitions, whether they are standby
    copies."""

    node: NodeInfo
    group: list[int]
    standby: bool


Ask = Callable[[NodeInfo, list[int], bool], Awaitable[Piece[T]]]
Result = Piece[T] | GatewayError
Called = tuple[Route, Result[T]]  # a call that completed, and what it gave


@dataclass(frozen=True)
class Taken(Generic[T]):
    """An answer taken for `partitions`: all those it was asked for when `whole`, else the
    ones a racing copy had not answered first."""

    value: T
    partitions: frozenset[int]
    whole: bool


@dataclass
class _Plan:
    """One round: the requests (each owner's with the standby requests that may race it),
    the partitions without a node to ask, and those of suspect nodes by node id."""

    routes: list[tuple[Route, list[Route]]] = field(default_factory=list)
    unassigned: list[int] = field(default_factory=list)
    suspect: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class _Read(Generic[T]):
    """One read across its rounds: the answers taken (one per partition), the partitions
    still pending, the failures of the others and what was learned about the nodes."""

    pending: set[int]
    keys_of: Mapping[int, list[str]]
    taken: list[Taken[T]] = field(default_factory=list)
    failures: dict[int, RoutingError] = field(default_factory=dict)
    freshness: list[dict[str, Any]] = field(default_factory=list)
    disclaimers: Disclaimers = field(default_factory=Disclaimers)
    failed_on: defaultdict[int, set[str]] = field(default_factory=lambda: defaultdict(set))

    def record(self, called: list[Called[T]]) -> None:
        """Take each answer for the partitions still pending (so a partition answered by
        two racing copies is taken once, with the freshness of the copy taken); then note
        the failures of the partitions nothing answered."""
        for route, result in called:
            if isinstance(result, Piece):
                self._take(route, result)
        for route, result in called:
            if isinstance(result, RoutingError):
                for partition in route.group:
                    self.failed_on[partition].add(route.node.node_id)
                    if partition in self.pending:
                        self.failures[partition] = result
                if isinstance(result, NotOwnerError):
                    self.disclaimers.add(route.node, result.partitions)

    def _take(self, route: Route, piece: Piece[T]) -> None:
        won = self.pending.intersection(route.group)
        if not won:
            return
        self.taken.append(Taken(piece.value, frozenset(won), len(won) == len(route.group)))
        self.freshness.extend(e for e in piece.freshness if e.get("partition") in won)
        self.pending.difference_update(won)
        for partition in won:
            self.failures.pop(partition, None)

    def unassigned(self, view: View, table: RoutingTable, partitions: list[int]) -> None:
        """No live node holds `partitions`: failed for now (naming the node last seen
        serving each), asked again next round."""
        for partition in partitions:
            keys = self.keys_of.get(partition, [])
            self.failures[partition] = table.unassigned_error(view.name, partition, keys)

    def suspected(self, view: View, suspect: Mapping[str, list[int]], max_lag: int) -> None:
        """Partitions of suspect nodes without a standby within `max_lag`: failed at once."""
        for node_id, group in suspect.items():
            keys = [k for p in group for k in self.keys_of.get(p, [])]
            error = NodeSuspectError(view.name, node_id, group, keys, max_lag)
            self.failures.update(dict.fromkeys(group, error))
            self.pending.difference_update(group)


class Planner:
    """Turns view reads into node requests, using the newest routing table of `feed`."""

    def __init__(
        self,
        feed: RoutingFeed,
        upstream: Upstream,
        config: GatewayConfig,
        catalogue: Iterable[View] = CATALOGUE,
        watch: NodeWatch | None = None,
        cache: GatewayCache | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        """`on_batch` is told how many lookups each node request carries."""
        self._feed = feed
        self._cache = cache
        self._upstream = upstream
        # key lookups go through the coalescer, which wraps the upstream's calls (the cache
        # sees their freshness as every read's: `_attempt`)
        self._lookups = Coalescer(upstream.post, on_batch=on_batch)
        self._config = config
        self._watch = watch or NodeWatch(config)
        self._queries = {view.name: view_queries(view) for view in catalogue}
        if cache is not None:  # a hit must not come from a node reads avoid
            cache.suspect = self._suspect_now

    def _suspect_now(self, node_id: str) -> bool:
        return self._watch.suspect(node_id, asyncio.get_running_loop().time())

    def suspects(self, table: RoutingTable, now: float | None = None) -> set[str]:
        """The nodes reads avoid at `now` (the event loop's clock, by default its time):
        those that missed heartbeats (the routing table's judgement) and those that left
        calls without an answer (the watch's)."""
        at = asyncio.get_running_loop().time() if now is None else now
        return {
            node_id
            for node_id, node in table.nodes.items()
            if node.suspect or self._watch.suspect(node_id, at)
        }

    @property
    def watch(self) -> NodeWatch:
        """What the planner learnt of each node (hedge delays, suspects, hedges started)."""
        return self._watch

    def deadline(self) -> float:
        """The event-loop time by which a request started now must be answered."""
        return asyncio.get_running_loop().time() + self._config.timeout_s

    def check_keys(self, view: View, keys: Sequence[str], *, counted: bool = True) -> None:
        """Reject what no node could answer: empty keys, keys that are no UTF-8 or too long,
        and (when `counted`) more keys than one lookup field takes."""
        max_keys = self._config.max_lookup_keys if counted else None
        inputs.check_keys(view, keys, max_keys, self._config.max_key_bytes)

    def check_representations(self, count: int) -> None:
        """Reject an `_entities` call with more representations than the gateway takes."""
        inputs.check_representations(count, self._config.max_entity_representations)

    def check_limit(self, view: View, limit: int) -> None:
        inputs.check_limit(view, limit, self._config.max_top_limit)

    def check_scan(self, view: View, ask: ScanAsk) -> None:
        self._scan_start(view, ask)

    def check_top(self, view: View, limit: int, window: datetime | None) -> datetime | None:
        """The window a top-N of `limit` reads (None: no windows), checked."""
        self.check_limit(view, limit)
        return inputs.top_window(view, window)

    def check_windows(
        self, view: View, key: str, since: datetime | None, until: datetime | None
    ) -> inputs.TimeRange:
        """The time range a read of `key`'s windows or events reads, checked with the key."""
        self.check_keys(view, [key])
        return inputs.time_range(view, since, until)

    def check_history(
        self,
        view: View,
        key: str,
        since: datetime | None,
        until: datetime | None,
        first: int,
        after: str | None,
    ) -> inputs.TimeRange:
        """The time range a page of `key`'s history reads, checked with the page's size and
        cursor."""
        span = self.check_windows(view, key, since, until)
        inputs.check_page_size(view, first)
        if after is not None:
            inputs.check_cursor(view, after)
        return span

    async def lookup(
        self,
        view: View,
        keys: Sequence[str],
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
        looked: CacheHits | None = None,
    ) -> LookupResult:
        """The rows of `keys` (count and latest views), asking each owning node once; the
        keys were checked with `check_keys` when the request asked for them. `looked`: what
        the cache answered of these keys (or more) already (`gateway.execute.fastpath`), so it
        is not asked again; `SKIPPED` when it found them not all held."""
        partitions, keys_of = group_keys(keys, self._feed.current.partition_count(view), view)
        cache = self._cache
        if cache is None or not cache.cacheable(view) or self._no_lag(options):
            return await self._read_rows(view, keys, partitions, keys_of, deadline, options)
        if options.at_least is not None:  # the feed says when the copies applied it
            now = asyncio.get_running_loop().time()
            until = now + (deadline - now) * _FEED_WAIT_SHARE
            await cache.reach(view, keys_of, options.at_least, until)
            looked = None  # looked up before the wait
        if looked is None:  # a read after a wait for the feed always looks: it may answer
            held = options.at_least is not None or cache.holds(view, keys)
            hits = cache.look(view, keys_of, options) if held else SKIPPED
        else:
            hits = looked.of(keys_of)
        if hits.skipped:  # not every key held: read as with the cache off, then say so
            result = await self._read_rows(view, keys, partitions, keys_of, deadline, options)
            cache.passed(view, keys_of, result, keys)
            return result
        cache.took(view, hits.rows)
        if not hits.missing:  # answered from memory: no await on the way
            rows = [hits.rows[key] for key in keys]
            return LookupResult(rows, partitions, {}, hits.freshness)
        cache.missed(sum(map(len, hits.missing.values())))
        result = await self._read_rows(view, keys, partitions, hits.missing, deadline, options)
        cache.fill(view, hits.missing, result, keys)
        if not hits.rows:
            return result
        rows = [hits.rows.get(k, r) for k, r in zip(keys, result.rows, strict=True)]
        freshness = sorted([*hits.freshness, *result.freshness], key=_partition_of)
        return LookupResult(rows, partitions, result.failures, freshness)

    async def _read_rows(
        self,
        view: View,
        keys: Sequence[str],
        partitions: list[int],
        keys_of: dict[int, list[str]],
        deadline: float,
        options: ReadOptions,
    ) -> LookupResult:
        """The rows of the keys of `keys_of` read from the nodes, in the order of `keys`
        (None for the others)."""
        queries = self._queries[view.name]

        async def ask(node: NodeInfo, group: list[int], standby: bool) -> Piece[_Rows]:
            # coalesced with other requests' lookups of the view on this node whose
            # request extensions are the same (gateway.nodes.coalesce)
            asked = list(dict.fromkeys(k for p in group for k in keys_of[p]))
            extensions = self._extensions(view, node, group, deadline, standby, options)
            rows, freshness = await self._lookups.lookup(
                node, queries, group, asked, extensions, deadline, options.caller
            )
            return Piece(dict(zip(asked, rows, strict=True)), freshness)

        read = await self._rounds(view, keys_of, ask, deadline, options, keys_of)
        found: _Rows = {}
        partition_of = dict(zip(keys, partitions, strict=True))
        for taken in read.taken:
            if taken.whole:
                found.update(taken.value)
            else:  # a hedge answered the rest: only the partitions this answer won
                found.update(
                    (k, r) for k, r in taken.value.items() if partition_of[k] in taken.partitions
                )
        rows = [found.get(key) for key in keys]
        return LookupResult(rows, partitions, read.failures, read.freshness)

    async def top(
        self,
        view: View,
        limit: int,
        deadline: float,
        window: datetime | None = None,
        options: ReadOptions = DEFAULT_READ,
        by: str | None = None,
    ) -> TopResult:
        """The global top `limit` rows (of one window for a windowed view; by the numeric
        field `by` for an aggregate view), merged from every partition's local top."""
        start = self.check_top(view, limit, window)
        count = self._feed.current.partition_count(view)
        cache = self._cache
        if cache is None or start is not None or by is not None or self._no_lag(options):
            return await self._read_top(view, limit, deadline, start, count, options, by)
        cached = cache.top(view, limit, count, options)
        if cached is not None:
            return cached
        reading = cache.top_reading(view, limit, count, options)
        result = None
        try:
            result = await self._read_top(view, limit, deadline, start, count, options)
        finally:
            if reading is not None:
                cache.top_read(reading, result)
        return result

    async def _read_top(
        self,
        view: View,
        limit: int,
        deadline: float,
        start: datetime | None,
        count: int,
        options: ReadOptions,
        by: str | None = None,
    ) -> TopResult:
        queries = self._queries[view.name]

        async def ask(node: NodeInfo, group: list[int], standby: bool) -> Piece[list[Ranked]]:
            body = queries.top_body(limit, group, start, by)
            reply = await self._post(
                node, body, view, group, deadline, standby=standby, options=options
            )
            return Piece(_read(queries.read_top, reply, view, node, group), reply.freshness)

        read = await self._rounds(view, range(count), ask, deadline, options)
        # A node's top of several partitions, cut to the partitions it won, still holds
        # every row of theirs in the global top: those rows are in the top of any subset.
        partials = [
            t.value
            if t.whole
            else [r for r in t.value if view.partition_of(r.key, count) in t.partitions]
            for t in read.taken
        ]
        if by is not None:  # a result its type cannot show (null) has no place in a ranking
            partials = [[r for r in p if _shown(r, by)] for p in partials]
        return TopResult(merge_top(partials, limit, _top_order(by)), read.failures, read.freshness)

    async def windows(
        self,
        view: View,
        key: str,
        since: datetime | None,
        until: datetime | None,
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
    ) -> KeyRead[list[WindowCount]]:
        """The windows of `key` with since <= start < until, in time order, from its owner."""
        span = self.check_windows(view, key, since, until)
        queries = self._queries[view.name]
        body = queries.windows_body(key, span)
        return await self._key_read(view, key, body, queries.read_windows, deadline, options)

    async def history(
        self,
        view: View,
        key: str,
        since: datetime | None,
        until: datetime | None,
        first: int,
        after: str | None,
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
        newest_first: bool = False,
    ) -> KeyRead[Page]:
        """One page of `key`'s events with since <= event time < until, from its owner:
        oldest first, or newest first."""
        span = self.check_history(view, key, since, until, first, after)
        queries = self._queries[view.name]
        body = queries.history_body(key, span, first, after, newest_first)
        return await self._key_read(view, key, body, queries.read_page, deadline, options)

    async def scan(
        self, view: View, ask: ScanAsk, deadline: float, options: ReadOptions = DEFAULT_READ
    ) -> ScanResult:
        """One page of the whole view in the order asked: every partition asked for its next slice
        (one row more than the page) from its own position, grouped by node; the slices
        merged (gateway.model.scans)."""
        start = self._scan_start(view, ask)
        size = ask.first or ask.last or DEFAULT_SCAN_PAGE
        queries = self._queries[view.name]

        async def read_slices(node: NodeInfo, group: list[int], standby: bool) -> Piece[_Slices]:
            starts = {p: start.positions[p] for p in group}
            body = queries.scan_body(
                starts, size + 1, start.backward, start.scan_filter, start.order
            )
            reply = await self._post(node, body, view, group, deadline, (), standby, options)
            slices = _read(queries.read_slices, reply, view, node, group)
            if sorted(slices) != sorted(group):
                raise other_partitions(view.name, {"partitions": group, "node": node.node_id})
            return Piece(slices, reply.freshness)

        read = await self._rounds(view, range(start.partitions), read_slices, deadline, options)
        slices = {
            p: rows
            for taken in read.taken
            for p, rows in taken.value.items()
            if p in taken.partitions
        }
        failed = set(range(start.partitions)) - set(slices)
        page = merge_page(start, slices, size, failed)
        return ScanResult(page, read.failures, read.freshness)

    def _scan_start(self, view: View, ask: ScanAsk) -> cursors.ScanCursor:
        """Where each partition's slice starts: from the cursor asked, else at the start
        (the end when paging backwards)."""
        inputs.check_scan(
            view, ask.first, ask.last, ask.after, ask.before, self._config.max_scan_page
        )
        spec = ask.scan_filter
        for name, value in (("prefix", spec.prefix), ("from", spec.since), ("to", spec.until)):
            inputs.check_key_bound(view, name, value, self._config.max_key_bytes)
        inputs.check_key_range(view, spec.since, spec.until)
        if ask.order != cursors.KEY_ORDER and spec.keyed:
            raise BadRequestError(
                view.name, f"prefix, from and to apply to the key order only, not {ask.order}"
            )
        if ask.order == cursors.KEY_ORDER and spec.timed:
            raise BadRequestError(view.name, "window starts bound the START and COUNT orders only")
        count = self._feed.current.partition_count(view)
        backward = ask.last is not None or ask.before is not None
        argument, text = ("before", ask.before) if backward else ("after", ask.after)
        if text is None:
            positions: tuple[bytes | None, ...] = (None,) * count
        else:
            cursor = cursors.decode(view, text, argument, ask.order, spec, count)
            if cursor.backward != backward and cursor.at is None:
                raise BadRequestError(
                    view.name,
                    f"{argument}: the cursor of a page without edges continues only in the "
                    "direction it was read",
                )
            positions = cursor.starts(backward)
        return cursors.ScanCursor(view.name, ask.order, spec, count, backward, None, positions)

    async def totals(
        self,
        view: View,
        since: datetime | None,
        until: datetime | None,
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
    ) -> TotalsResult:
        """Every partition's total (per window with since <= start < until, for windowed
        views), asked of each node once for its partitions."""
        span = inputs.time_range(view, since, until) if view.window is not None else None
        queries = self._queries[view.name]

        async def ask(node: NodeInfo, group: list[int], standby: bool) -> Piece[list[PartialTotal]]:
            body = queries.totals_body(group, span)
            reply = await self._post(node, body, view, group, deadline, (), standby, options)
            return Piece(_read(queries.read_totals, reply, view, node, group), reply.freshness)

        count = self._feed.current.partition_count(view)
        read = await self._rounds(view, range(count), ask, deadline, options)
        partials = [
            t for taken in read.taken for t in taken.value if t.partition in taken.partitions
        ]
        return TotalsResult(partials, read.failures, read.freshness)

    async def _key_read(
        self,
        view: View,
        key: str,
        body: bytes,
        read: Callable[[Any], T],
        deadline: float,
        options: ReadOptions,
    ) -> KeyRead[T]:
        partition = view.partition_of(key, self._feed.current.partition_count(view))

        async def ask(node: NodeInfo, group: list[int], standby: bool) -> Piece[T]:
            reply = await self._post(node, body, view, group, deadline, [key], standby, options)
            return Piece(_read(read, reply, view, node, group, [key]), reply.freshness)

        answered = await self._rounds(view, [partition], ask, deadline, options, {partition: [key]})
        value = answered.taken[0].value if answered.taken else None
        return KeyRead(key, partition, value, answered.failures.get(partition), answered.freshness)

    async def _post(
        self,
        node: NodeInfo,
        body: bytes,
        view: View,
        group: list[int],
        deadline: float,
        keys: Sequence[str] = (),
        standby: bool = False,
        options: ReadOptions = DEFAULT_READ,
    ) -> NodeReply:
        extensions = self._extensions(view, node, group, deadline, standby, options)
        if extensions:
            body = with_extensions(body, orjson.dumps(extensions))
        return await self._upstream.post(
            node,
            body,
            view=view.name,
            partitions=group,
            keys=keys,
            deadline=deadline,
            callers=(options.caller,),
        )

    def _max_lag(self, options: ReadOptions) -> int:
        return self._config.max_lag if options.max_lag is None else options.max_lag

    def _no_lag(self, options: ReadOptions) -> bool:
        return options.accepts_no_lag(self._config.max_lag)

    def _extensions(
        self,
        view: View,
        node: NodeInfo,
        group: list[int],
        deadline: float,
        standby: bool,
        options: ReadOptions,
    ) -> dict[str, Any]:
        """The request extensions of a node read of `group`: whether it may read STANDBY
        copies, whether the copy must prove itself current (any copy when the read accepts
        no lag, a standby one when it is still restoring), and what they must have applied
        (`atLeast`)."""
        no_lag = self._no_lag(options)
        if not standby and not no_lag and options.at_least is None:  # the usual read: none
            return {}
        extensions: dict[str, Any] = {READ_STANDBY: True} if standby else {}
        wait_s = deadline - asyncio.get_running_loop().time()
        if no_lag or (standby and any(node.restoring(p) for p in group)):
            extensions[READ_CURRENT] = {
                "topic": view.changelog_topic,
                "partitions": group,
                "waitMs": max(0, int(wait_s * 1000)),
            }
        if options.at_least is not None:
            wanted = options.at_least.extension(group, wait_s)
            if wanted is not None:
                extensions[APPLIED_AT_LEAST] = wanted
        return extensions

    async def _rounds(
        self,
        view: View,
        partitions: Iterable[int],
        ask: Ask[T],
        deadline: float,
        options: ReadOptions,
        keys_of: Mapping[int, list[str]] | None = None,
    ) -> _Read[T]:
        """Ask owners for `partitions`, one call per node per round (hedged by standbys
        within maxLag), until each partition is answered or the retries (their rounds and
        their backoffs' time) or the deadline run out. Exactly one answer is taken per
        partition. A node rejecting the arguments ends the read with that BadRequestError.
        Past the retries, a partition no node can be asked for waits for a routing table
        that has one until the deadline, as long as a rebalance is under way (it is being
        handed to an owner) or the table is stale (the broker did not answer membership:
        the group may have moved it meanwhile)."""
        loop = asyncio.get_running_loop()
        read: _Read[T] = _Read(set(partitions), keys_of or {})
        table = self._feed.current
        backoff = self._config.backoff_s
        max_lag = self._max_lag(options)
        # an `atLeast` read waits on purpose: neither hedged nor a latency sample
        timed = options.at_least is None
        hedged = self._config.hedge and max_lag > 0 and timed
        attempt = 0
        # the retries' backoffs in all: a round ends early when a newer routing table
        # comes, and tables come often while nodes rebalance (every heartbeat changes
        # one), so the rounds alone could run out in a fraction of it
        patient_until = loop.time() + backoff * (2**self._config.retries - 1)
        while True:
            plan = self._route(table, read, max_lag, loop.time(), hedged)
            read.unassigned(view, table, plan.unassigned)
            read.suspected(view, plan.suspect, max_lag)
            if len(plan.routes) == 1 and not plan.routes[0][1]:  # the usual point read
                route = plan.routes[0][0]
                called = [(route, await self._attempt(ask, route, timed))]
            else:
                calls = [self._call(ask, route, hedges, timed) for route, hedges in plan.routes]
                called = [c for some in await asyncio.gather(*calls) for c in some]
            rejected = [r for _, r in called if isinstance(r, BadRequestError)]
            if rejected:
                raise rejected[0]
            read.record(called)
            remaining = deadline - loop.time()
            if not read.pending or remaining <= 0:
                break
            handing_over = bool(plan.unassigned) and (
                table.rebalancing() or table.stale_since_ms is not None
            )
            out_of_retries = attempt >= self._config.retries and loop.time() >= patient_until
            if out_of_retries and not handing_over:
                break
            table = await self._feed.refresh(table.version, min(backoff, remaining))
            backoff *= 2
            attempt += 1
        return read

    def _route(
        self, table: RoutingTable, read: _Read[Any], max_lag: int, now: float, hedged: bool
    ) -> _Plan:
        """One request per node (and role) for the pending partitions: each to its owner, or,
        when it has no owner, its owner failed it, restores it or is suspect, to a standby
        within `max_lag` (any standby when `max_lag` is 0, or else the restoring owner,
        either asked to prove its copy current; with no owner, a restoring standby asked to
        prove it); with `hedged`, each owner's request with
        the standby requests that may race it. Also the partitions nobody can be asked for,
        and those of suspect owners without a standby."""
        suspects = self.suspects(table, now)
        plan = _Plan()
        routes: dict[tuple[str, bool], Route] = {}
        bound = max_lag if max_lag > 0 else sys.maxsize
        for partition in sorted(read.pending):
            node, standby = table.owner(partition, read.disclaimers), False
            failed = read.failed_on.get(partition, _NOBODY)
            shunned = node is not None and node.node_id in suspects
            if node is None or shunned or node.node_id in failed or node.restoring(partition):
                avoid = failed | suspects if suspects else failed
                copy = table.standby(partition, bound, read.disclaimers, avoid=avoid)
                if copy is None and node is None:
                    # nobody claims it: a copy still restoring, asked to prove it current
                    copy = table.restoring_copy(partition, read.disclaimers, avoid=avoid)
                if copy is not None:
                    node, standby, shunned = copy, True, False
                elif max_lag == 0 and node is not None and node.restoring(partition):
                    standby = True  # the owner, asked to prove its copy current
            if node is None:
                plan.unassigned.append(partition)
            elif shunned:
                plan.suspect.setdefault(node.node_id, []).append(partition)
            else:
                route = routes.setdefault((node.node_id, standby), Route(node, [], standby))
                route.group.append(partition)
        for route in routes.values():
            racing = hedged and not route.standby
            hedges = self._hedges(table, route, read, max_lag, suspects) if racing else []
            plan.routes.append((route, hedges))
        return plan

    @staticmethod
    def _hedges(
        table: RoutingTable, route: Route, read: _Read[Any], max_lag: int, suspects: set[str]
    ) -> list[Route]:
        """The standby requests that may race `route`: per partition the least lagging
        copy within `max_lag` on another node that has not failed it and is not suspect."""
        copies: dict[str, Route] = {}
        for partition in route.group:
            if not table.standbys.get(partition):
                continue
            avoid = {route.node.node_id, *read.failed_on.get(partition, ()), *suspects}
            copy = table.standby(partition, max_lag, read.disclaimers, avoid=avoid)
            if copy is not None:
                copies.setdefault(copy.node_id, Route(copy, [], True)).group.append(partition)
        return list(copies.values())

    async def _call(
        self, ask: Ask[T], route: Route, hedges: list[Route], timed: bool
    ) -> list[Called[T]]:
        """`route`'s answer or failure; raced by `hedges` when there are any."""
        if not hedges:
            return [(route, await self._attempt(ask, route, timed))]
        return await self._race(ask, route, hedges, timed)

    async def _race(
        self, ask: Ask[T], route: Route, hedges: list[Route], timed: bool
    ) -> list[Called[T]]:
        """`route`'s call, joined by `hedges` once its node's hedge delay has passed; what
        they answered in the order it came, until each partition of `route` has an answer
        (or the calls are over). The calls still running then are cancelled."""
        loop = asyncio.get_running_loop()
        running: dict[asyncio.Task[Result[T]], tuple[Route, float]] = {}

        def start(call: Route) -> None:
            running[loop.create_task(self._attempt(ask, call, timed))] = (call, loop.time())

        start(route)
        called: list[Called[T]] = []
        uncovered = set(route.group)
        try:
            done, _ = await asyncio.wait(running, timeout=self._watch.delay(route.node.node_id))
            if not done:
                self._watch.hedged(len(hedges))
                for hedge in hedges:
                    start(hedge)
            while True:
                for task in done:
                    call, _started = running.pop(task)
                    result = task.result()
                    called.append((call, result))
                    if isinstance(result, Piece):
                        uncovered.difference_update(call.group)
                    elif isinstance(result, BadRequestError):
                        uncovered.clear()  # the read ends with it
                if not uncovered or not running:
                    return called
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await self._abandon(running)

    async def _abandon(
        self, running: Mapping[asyncio.Task[Result[T]], tuple[Route, float]]
    ) -> None:
        """Cancel calls a faster copy made useless; a node that had its hedge delay to
        answer and did not is one call closer to suspect."""
        if not running:
            return
        now = asyncio.get_running_loop().time()
        for task, (route, started) in running.items():
            if task.cancel():
                self._note_unanswered(route.node.node_id, now - started, now)
        await asyncio.gather(*running, return_exceptions=True)

    def _note_unanswered(self, node_id: str, waited_s: float, now: float) -> None:
        if waited_s >= self._watch.delay(node_id):
            self._watch.unanswered(node_id, now)

    async def _attempt(self, ask: Ask[T], route: Route, timed: bool) -> Result[T]:
        """`ask` for `route`, its failures returned; what the node did is told to the watch,
        and the freshness it answered with to the cache."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        node_id = route.node.node_id
        try:
            piece = await ask(*route)
        except NodeTimeoutError as exc:
            now = loop.time()
            self._note_unanswered(node_id, now - started, now)
            return exc
        except NodeUnavailableError as exc:  # refused, reset, HTTP 5xx: failed fast anyway
            return exc
        except (RoutingError, BadRequestError) as exc:  # the node answered, with an error
            self._watch.answered(node_id, None)
            return exc
        self._watch.answered(node_id, loop.time() - started if timed else None)
        if self._cache is not None:
            # every node read comes back here, whatever its kind or copy: a later hit must not
            # answer older than what any of them showed a client (a lookup, a total, a scan...)
            self._cache.observe(piece.freshness)
        return piece


def _partition_of(entry: Mapping[str, Any]) -> int:
    partition = entry.get("partition")
    return partition if isinstance(partition, int) else -1


def _read(
    read: Callable[[Any], T],
    reply: NodeReply,
    view: View,
    node: NodeInfo,
    group: list[int],
    keys: Sequence[str] = (),
) -> T:
    """`read(reply.data)`, or the NodeProtocolError saying what the node answered."""
    where = {"partitions": group, "node": node.node_id, "keys": keys}
    return read_answer(read, reply, view.name, where)


def _shown(row: Ranked, by: str) -> bool:
    return isinstance(row, Event | WindowCount) and row.values.get(by) is not None


def _top_order(by: str | None) -> Callable[[Any], Any]:
    """How a top-N's rows are ordered: by count, or by the aggregate field `by`."""
    if by is None:
        return rank
    return lambda row: value_rank(row.values[by], row.key)
