"""Planning reads over partitions: lookups go to the owning nodes, one request per node;
a key's windows and history go to its owner; top-N (per window for windowed views) asks
every partition exactly once and merges the nodes' local tops.

Partitions that fail (NOT_OWNER, refused, timed out, unassigned) are retried after a routing
refresh, with backoff, inside the request's deadline. A partition without a live owner,
or whose owner failed it or is still restoring it, is read from a STANDBY copy (asked for
with the `readStandby` request extension; the node's freshness then says STANDBY): with
`max_lag` > 0 one at most `max_lag` records behind; with `max_lag` 0 any live one, or else
the restoring owner, which must then prove its copy current first (`readCurrent`,
node.currency). A read's `ReadOptions` may set its own bound. A read with
an `atLeast` token makes the nodes wait until they have applied what the token needs
(`appliedAtLeast`, gateway.consistency). What still fails is returned as one `RoutingError` per
partition next to the data for the rest: never a silently short answer.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import orjson

from gateway import inputs
from gateway.config import GatewayConfig
from gateway.documents import with_extensions
from gateway.errors import (
    BadRequestError,
    GatewayError,
    NodeProtocolError,
    NotOwnerError,
    PartitionUnassignedError,
    RoutingError,
)
from gateway.kinds import view_queries
from gateway.reads import DEFAULT_READ, KeyRead, LookupResult, ReadOptions, TopResult
from gateway.reply import NodeReply
from gateway.routing import Disclaimers, NodeInfo, RoutingFeed, RoutingTable
from gateway.rows import Event, Page, Ranked, Row, WindowCount
from gateway.upstream import Upstream
from runtime.ranking import merge_top
from schema import APPLIED_AT_LEAST, CATALOGUE, READ_CURRENT, READ_STANDBY, View, partition_for

__all__ = ["KeyRead", "LookupResult", "Planner", "ReadOptions", "TopResult"]

log = logging.getLogger(__name__)

T = TypeVar("T")


Ask = Callable[[NodeInfo, list[int], bool], Awaitable[list[dict[str, Any]]]]
# one node request of a round: the node, its partitions, whether they are standby copies
Route = tuple[NodeInfo, list[int], bool]

# the request extension by which a node reads its STANDBY copies (node.graphql_http)


class Planner:
    """Turns view reads into node requests, using the newest routing table of `feed`."""

    def __init__(
        self,
        feed: RoutingFeed,
        upstream: Upstream,
        config: GatewayConfig,
        catalogue: Iterable[View] = CATALOGUE,
    ) -> None:
        self._feed = feed
        self._upstream = upstream
        self._config = config
        self._queries = {view.name: view_queries(view) for view in catalogue}

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

    async def lookup(
        self,
        view: View,
        keys: Sequence[str],
        deadline: float,
        options: ReadOptions = DEFAULT_READ,
    ) -> LookupResult:
        """The rows of `keys` (count and latest views), asking each owning node once; the
        keys were checked with `check_keys` when the request asked for them."""
        count = self._feed.current.partition_count(view)
        partitions = [partition_for(key, count) for key in keys]
        keys_of: dict[int, list[str]] = {}
        for key, partition in zip(keys, partitions, strict=True):
            keys_of.setdefault(partition, []).append(key)
        found: dict[str, Row | Event | None] = {}
        queries = self._queries[view.name]

        async def ask(node: NodeInfo, group: list[int], standby: bool) -> list[dict[str, Any]]:
            # coalesced with other requests' lookups of the view on this node whose
            # request extensions are the same (gateway.coalesce)
            asked = list(dict.fromkeys(k for p in group for k in keys_of[p]))
            extensions = self._extensions(view, group, deadline, standby, options)
            rows, freshness = await self._upstream.lookups.lookup(
                node, queries, group, asked, extensions, deadline, options.caller
            )
            found.update(zip(asked, rows, strict=True))
            return freshness

        failures, freshness = await self._rounds(view, keys_of, ask, deadline, options, keys_of)
        rows = [found.get(key) for key in keys]
        return LookupResult(rows, partitions, failures, freshness)

    async def top(
        self,
        view: View,
        limit: int,
        deadline: float,
        window: datetime | None = None,
        options: ReadOptions = DEFAULT_READ,
    ) -> TopResult:
        """The global top `limit` rows (of one window for a windowed view), merged from every
        partition's local top."""
        self.check_limit(view, limit)
        start = inputs.top_window(view, window)
        count = self._feed.current.partition_count(view)
        partials: list[list[Ranked]] = []
        queries = self._queries[view.name]

        async def ask(node: NodeInfo, group: list[int], standby: bool) -> list[dict[str, Any]]:
            body = queries.top_body(limit, group, start)
            reply = await self._post(
                node, body, view, group, deadline, standby=standby, options=options
            )
            partials.append(_read(queries.read_top, reply, view, node, group))
            return reply.freshness

        failures, freshness = await self._rounds(view, range(count), ask, deadline, options)
        return TopResult(merge_top(partials, limit), failures, freshness)

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
        self.check_keys(view, [key])
        span = inputs.time_range(view, since, until)
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
    ) -> KeyRead[Page]:
        """One page of `key`'s events with since <= event time < until, from its owner."""
        self.check_keys(view, [key])
        span = inputs.time_range(view, since, until)
        inputs.check_page_size(view, first)
        if after is not None:
            inputs.check_cursor(view, after)
        queries = self._queries[view.name]
        body = queries.history_body(key, span, first, after)
        return await self._key_read(view, key, body, queries.read_page, deadline, options)

    async def _key_read(
        self,
        view: View,
        key: str,
        body: bytes,
        read: Callable[[Any], T],
        deadline: float,
        options: ReadOptions,
    ) -> KeyRead[T]:
        partition = partition_for(key, self._feed.current.partition_count(view))
        answers: list[T] = []

        async def ask(node: NodeInfo, group: list[int], standby: bool) -> list[dict[str, Any]]:
            reply = await self._post(node, body, view, group, deadline, [key], standby, options)
            answers.append(_read(read, reply, view, node, group, [key]))
            return reply.freshness

        failures, freshness = await self._rounds(
            view, [partition], ask, deadline, options, {partition: [key]}
        )
        value = answers[-1] if answers else None
        return KeyRead(key, partition, value, failures.get(partition), freshness)

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
        extensions = self._extensions(view, group, deadline, standby, options)
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

    def _extensions(
        self, view: View, group: list[int], deadline: float, standby: bool, options: ReadOptions
    ) -> dict[str, Any]:
        """The request extensions of a node read of `group`: whether it may read STANDBY
        copies (which must be proved current when the read accepts no lag), and what they
        must have applied (`atLeast`)."""
        extensions: dict[str, Any] = {READ_STANDBY: True} if standby else {}
        wait_s = deadline - asyncio.get_running_loop().time()
        if standby and self._max_lag(options) == 0:
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
        ask: Ask,
        deadline: float,
        options: ReadOptions,
        keys_of: dict[int, list[str]] | None = None,
    ) -> tuple[dict[int, RoutingError], list[dict[str, Any]]]:
        """Ask owners for `partitions`, one call per node per round, until each partition is
        answered or the retries or the deadline run out; return the failures and freshness.
        A node rejecting the arguments ends the read with that BadRequestError."""
        loop = asyncio.get_running_loop()
        pending = set(partitions)
        failures: dict[int, RoutingError] = {}
        freshness: list[dict[str, Any]] = []
        disclaimers = Disclaimers()
        failed_on: defaultdict[int, set[str]] = defaultdict(set)
        table = self._feed.current
        backoff = self._config.backoff_s
        max_lag = self._max_lag(options)
        for attempt in range(self._config.retries + 1):
            routes, unassigned = self._route(table, pending, disclaimers, failed_on, max_lag)
            for partition in unassigned:
                keys = keys_of.get(partition, []) if keys_of else []
                failures[partition] = PartitionUnassignedError(view.name, [partition], keys)
            if len(routes) == 1:  # the usual point read: no task for gather to wrap it in
                results = [await _attempt(ask, *routes[0])]
            else:
                results = await asyncio.gather(*(_attempt(ask, *route) for route in routes))
            rejected = [r for r in results if isinstance(r, BadRequestError)]
            if rejected:
                raise rejected[0]
            for (node, group, _standby), result in zip(routes, results, strict=True):
                if isinstance(result, RoutingError):
                    failures.update(dict.fromkeys(group, result))
                    for partition in group:
                        failed_on[partition].add(node.node_id)
                    if isinstance(result, NotOwnerError):
                        disclaimers.add(node, result.partitions)
                elif isinstance(result, list):
                    freshness.extend(result)
                    pending.difference_update(group)
                    for partition in group:
                        failures.pop(partition, None)
            remaining = deadline - loop.time()
            if not pending or attempt == self._config.retries or remaining <= 0:
                break
            table = await self._feed.refresh(table.version, min(backoff, remaining))
            backoff *= 2
        return failures, freshness

    def _route(
        self,
        table: RoutingTable,
        partitions: Iterable[int],
        disclaimers: Disclaimers,
        failed_on: Mapping[int, set[str]],
        max_lag: int,
    ) -> tuple[list[Route], list[int]]:
        """One request per node (and role) for `partitions`: each to its owner, or, when it
        has no owner or its owner failed it or restores it, to a standby within `max_lag`
        (any standby when `max_lag` is 0, or else the restoring owner, either asked to prove
        its copy current); also return the partitions nobody can be asked for."""
        routes: dict[tuple[str, bool], Route] = {}
        unassigned: list[int] = []
        for partition in sorted(set(partitions)):
            node, standby = table.owner(partition, disclaimers), False
            failed = failed_on.get(partition, set())
            if node is None or node.node_id in failed or node.restoring(partition):
                bound = max_lag if max_lag > 0 else sys.maxsize
                copy = table.standby(partition, bound, disclaimers, avoid=failed)
                if copy is not None:
                    node, standby = copy, True
                elif max_lag == 0 and node is not None and node.restoring(partition):
                    standby = True  # the owner, asked to prove its copy current
            if node is None:
                unassigned.append(partition)
            else:
                routes.setdefault((node.node_id, standby), (node, [], standby))[1].append(partition)
        return list(routes.values()), unassigned


async def _attempt(
    ask: Ask, node: NodeInfo, group: list[int], standby: bool
) -> list[dict[str, Any]] | GatewayError:
    try:
        return await ask(node, group, standby)
    except (RoutingError, BadRequestError) as exc:
        return exc


def _read(
    read: Callable[[Any], T],
    reply: NodeReply,
    view: View,
    node: NodeInfo,
    group: list[int],
    keys: Sequence[str] = (),
) -> T:
    """`read(reply.data)`, or the NodeProtocolError saying what the node answered."""
    try:
        return read(reply.data)
    except (ValueError, TypeError) as exc:  # what it answered is for the log, not the client
        log.warning("node %s answered %.200s: %s", node.node_id, reply.data, exc)
        raise NodeProtocolError(
            view.name,
            "answered data the gateway cannot read",
            partitions=group,
            node=node.node_id,
            keys=keys,
        ) from exc
