"""Planning reads over partitions: point and multi-key lookups go to the owning nodes, one
request per node; top-N asks every partition exactly once and merges the nodes' local tops.

Partitions that fail (NOT_OWNER, refused, timed out, unassigned) are retried after a routing
refresh, with backoff, inside the request's deadline. What still fails is returned as one
`RoutingError` per partition next to the data for the rest: never a silently short answer.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.config import GatewayConfig
from gateway.errors import (
    BadRequestError,
    NodeProtocolError,
    NotOwnerError,
    PartitionUnassignedError,
    RoutingError,
)
from gateway.routing import Disclaimers, NodeInfo, RoutingFeed
from gateway.upstream import NodeReply, Upstream, ViewQueries
from schema import CATALOGUE, View, partition_for

__all__ = ["LookupResult", "Planner", "Row", "TopResult", "rank"]


@dataclass(frozen=True)
class Row:
    """One entity of a COUNT view."""

    key: str
    count: int


def rank(row: Row) -> tuple[int, str]:
    """Top-N order: count descending, then key ascending."""
    return (-row.count, row.key)


@dataclass(frozen=True)
class LookupResult:
    """Rows in the order of the keys asked (None = unknown or unavailable)."""

    rows: list[Row | None]
    partitions: list[int]  # the partition of each key
    failures: dict[int, RoutingError] = field(default_factory=dict)
    freshness: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class TopResult:
    rows: list[Row]
    failures: dict[int, RoutingError] = field(default_factory=dict)
    freshness: list[dict[str, Any]] = field(default_factory=list)


Ask = Callable[[NodeInfo, list[int]], Awaitable[list[dict[str, Any]]]]


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
        self._queries = {view.name: ViewQueries(view) for view in catalogue}

    def deadline(self) -> float:
        """The event-loop time by which a request started now must be answered."""
        return asyncio.get_running_loop().time() + self._config.timeout_s

    def check_keys(self, view: View, keys: Sequence[str]) -> None:
        """Reject what no node could answer: empty keys, keys that are no UTF-8, too many."""
        if len(keys) > self._config.max_lookup_keys:
            raise BadRequestError(
                view.name, f"at most {self._config.max_lookup_keys} {view.keys_arg} per request"
            )
        for index, key in enumerate(keys):
            if not key:
                where = f" (position {index})" if len(keys) > 1 else ""
                raise BadRequestError(view.name, f"{view.key_field} must not be empty{where}")
            try:
                key.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise BadRequestError(view.name, f"{view.key_field} {key!r} is no text") from exc

    def check_limit(self, view: View, limit: int) -> None:
        top = self._config.max_top_limit
        if not 1 <= limit <= top:
            raise BadRequestError(view.name, f"limit must be in 1..{top}, got {limit}")

    async def lookup(self, view: View, keys: Sequence[str], deadline: float) -> LookupResult:
        """The rows of `keys`, asking each owning node once for all its keys."""
        self.check_keys(view, keys)
        count = self._feed.current.partition_count(view)
        partitions = [partition_for(key, count) for key in keys]
        keys_of: dict[int, list[str]] = {}
        for key, partition in zip(keys, partitions, strict=True):
            keys_of.setdefault(partition, []).append(key)
        found: dict[str, Row | None] = {}
        queries = self._queries[view.name]

        async def ask(node: NodeInfo, group: list[int]) -> list[dict[str, Any]]:
            asked = list(dict.fromkeys(k for p in group for k in keys_of[p]))
            body = queries.lookup_body(asked)
            reply = await self._post(node, body, view, group, deadline, asked)
            found.update(zip(asked, _lookup_rows(reply, view, node, group, asked), strict=True))
            return reply.freshness

        failures, freshness = await self._rounds(view, keys_of, ask, deadline, keys_of)
        rows = [found.get(key) for key in keys]
        return LookupResult(rows, partitions, failures, freshness)

    async def top(self, view: View, limit: int, deadline: float) -> TopResult:
        """The global top `limit` rows, merged from every partition's local top."""
        self.check_limit(view, limit)
        count = self._feed.current.partition_count(view)
        partials: list[list[Row]] = []
        queries = self._queries[view.name]

        async def ask(node: NodeInfo, group: list[int]) -> list[dict[str, Any]]:
            body = queries.top_body(limit, group)
            reply = await self._post(node, body, view, group, deadline)
            partials.append(sorted(_top_rows(reply, view, node, group), key=rank))
            return reply.freshness

        failures, freshness = await self._rounds(view, range(count), ask, deadline)
        merged = list(itertools.islice(heapq.merge(*partials, key=rank), limit))
        return TopResult(merged, failures, freshness)

    async def _post(
        self,
        node: NodeInfo,
        body: bytes,
        view: View,
        group: list[int],
        deadline: float,
        keys: Sequence[str] = (),
    ) -> NodeReply:
        return await self._upstream.post(
            node, body, view=view.name, partitions=group, keys=keys, deadline=deadline
        )

    async def _rounds(
        self,
        view: View,
        partitions: Iterable[int],
        ask: Ask,
        deadline: float,
        keys_of: dict[int, list[str]] | None = None,
    ) -> tuple[dict[int, RoutingError], list[dict[str, Any]]]:
        """Ask owners for `partitions`, one call per node per round, until each partition is
        answered or the retries or the deadline run out; return the failures and freshness."""
        loop = asyncio.get_running_loop()
        pending = set(partitions)
        failures: dict[int, RoutingError] = {}
        freshness: list[dict[str, Any]] = []
        disclaimers = Disclaimers()
        table = self._feed.current
        backoff = self._config.backoff_s
        for attempt in range(self._config.retries + 1):
            groups, unassigned = table.route(pending, disclaimers)
            for partition in unassigned:
                keys = keys_of.get(partition, []) if keys_of else []
                failures[partition] = PartitionUnassignedError(view.name, [partition], keys)
            calls = [_attempt(ask, node, group) for node, group in groups.values()]
            for (node, group), result in zip(
                groups.values(), await asyncio.gather(*calls), strict=True
            ):
                if isinstance(result, RoutingError):
                    failures.update(dict.fromkeys(group, result))
                    if isinstance(result, NotOwnerError):
                        disclaimers.add(node, result.partitions)
                else:
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


async def _attempt(
    ask: Ask, node: NodeInfo, group: list[int]
) -> list[dict[str, Any]] | RoutingError:
    try:
        return await ask(node, group)
    except RoutingError as exc:
        return exc


def _row(item: Any) -> Row | None:
    if isinstance(item, dict):
        key, count = item.get("k"), item.get("c")
        if isinstance(key, str) and isinstance(count, int) and not isinstance(count, bool):
            return Row(key, count)
    return None


def _lookup_rows(
    reply: NodeReply, view: View, node: NodeInfo, group: list[int], asked: list[str]
) -> list[Row | None]:
    data = reply.data
    rows = [_row(item) for item in data] if isinstance(data, list) else []
    valid = isinstance(data, list) and len(data) == len(asked)
    if not valid or any(r is None and d is not None for r, d in zip(rows, data, strict=True)):
        raise NodeProtocolError(
            view.name,
            f"{view.many_field} answered {str(data)[:200]} for {len(asked)} keys",
            partitions=group,
            node=node.node_id,
            keys=asked,
        )
    return rows


def _top_rows(reply: NodeReply, view: View, node: NodeInfo, group: list[int]) -> list[Row]:
    data = reply.data
    rows = [_row(item) for item in data] if isinstance(data, list) else [None]
    if any(row is None for row in rows):
        raise NodeProtocolError(
            view.name,
            f"{view.top_field} answered {str(data)[:200]}",
            partitions=group,
            node=node.node_id,
        )
    return [row for row in rows if row is not None]
