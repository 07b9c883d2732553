"""Per-request state: the deadline, batched key lookups, partial-result errors, freshness,
and the pipeline's status board.

Every lookup field of one GraphQL request reads through `loader(view, options)`, straight
to the planner: the fields of a request run in the same event-loop turn, and the coalescer
(`gateway.nodes.coalesce`) sends the lookups of one turn to each owning node as one call, keys
once, for this request and others alike. A request-scoped DataLoader in front of it batched
the same keys a second time, at ~20 us and two loop turns per lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.readtoken import ReadPositions
from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.model.errors import RoutingError
from gateway.model.principal import ANONYMOUS, Principal
from gateway.model.rows import Event, Row
from gateway.nodes.hub import FeedHub
from gateway.reads.cache import GatewayCache
from gateway.reads.protocol import DEFAULT_READ, LookupResult, ReadOptions, Reads
from gateway.writes.policy import RateLimiter
from gateway.writes.producer import EventProducer
from schema import View

__all__ = ["KeyReads", "KeyResult", "MissingPartition", "RequestContext", "per_key"]


@dataclass(frozen=True)
class KeyResult:
    """A looked-up key: its row (None = unknown), or why its partition could not be read."""

    key: str
    partition: int
    row: Row | Event | None
    error: RoutingError | None = None


@dataclass(frozen=True)
class MissingPartition:
    """One partition a field could not read: becomes one PARTITION_UNAVAILABLE error."""

    path: tuple[str | int, ...]
    partition: int
    error: RoutingError
    keys: tuple[str, ...] = ()


@dataclass
class RequestContext:
    """What resolvers of one request share; built by the app for every request."""

    planner: Reads  # the gateway.reads.planner.Planner
    feed: RoutingFeed
    config: GatewayConfig
    deadline: float
    clock: Callable[[], int]
    statuses: StatusBoard = field(default_factory=StatusBoard)
    producer: EventProducer | None = None  # for the produce mutation; None = switched off
    principal: Principal = ANONYMOUS  # who is asking (gateway.auth.bearer)
    missing: list[MissingPartition] = field(default_factory=list)
    freshness: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    positions: ReadPositions = field(default_factory=ReadPositions)  # the answer's readToken
    produce_rate: RateLimiter | None = None  # produced records per principal; None = no limit
    hub: FeedHub | None = None  # the nodes' change feeds, for subscriptions; None = none
    cache: GatewayCache | None = None  # lookups from memory (gateway.execute.fastpath); None = off

    def loader(self, view: View, options: ReadOptions = DEFAULT_READ) -> KeyReads:
        """Reads of `view`'s keys with `options` for this request."""
        return KeyReads(self, view, options)

    def add_freshness(self, view: View, entries: Sequence[Mapping[str, Any]]) -> None:
        """The freshness of copies read for `view`; their positions of its changelog go to
        the answer's read token, and leave (with the offsets applied, the cache's) the
        entries the client sees."""
        self.positions.add_entries(view.changelog_topic, entries)
        for entry in entries:
            ident = (entry.get("partition"), entry.get("node"), entry.get("role"))
            shown = dict(entry)
            shown.pop("positions", None)
            shown.pop("applied", None)
            self.freshness[ident] = shown

    def extensions(self) -> dict[str, Any]:
        """The response's `extensions`: the freshness, and the read token when anything
        was read or a token was passed."""
        extensions: dict[str, Any] = {"freshness": self.freshness_list()}
        if self.positions:
            extensions["readToken"] = self.positions.token()
        return extensions

    def add_missing(
        self, path: Sequence[str | int], partition: int, error: RoutingError, keys: Sequence[str]
    ) -> None:
        self.missing.append(MissingPartition(tuple(path), partition, error, tuple(keys)))

    def add_missing_keys(
        self, path: Sequence[str | int], keyed: Iterable[tuple[str, int, RoutingError | None]]
    ) -> None:
        """One missing partition per partition some of the (key, partition, failure) of a
        lookup field at `path` failed in, with the first failure and its keys once each, in
        partition order: the PARTITION_UNAVAILABLE errors of the field."""
        failed: dict[int, tuple[RoutingError, list[str]]] = {}
        for key, partition, error in keyed:
            if error is not None:
                failed.setdefault(partition, (error, []))[1].append(key)
        for partition, (error, keys) in sorted(failed.items()):
            self.add_missing(path, partition, error, list(dict.fromkeys(keys)))

    def freshness_list(self) -> list[dict[str, Any]]:
        return sorted(self.freshness.values(), key=_freshness_order)


class KeyReads:
    """Lookups of one view's keys with one set of read options, for one request."""

    __slots__ = ("_context", "_options", "_view")

    def __init__(self, context: RequestContext, view: View, options: ReadOptions) -> None:
        self._context = context
        self._view = view
        self._options = options

    async def load_many(self, keys: Sequence[str]) -> list[KeyResult]:
        """A result per key of `keys`, in order; the freshness of what was read is added
        to the request's."""
        context = self._context
        keys = list(keys)
        result = await context.planner.lookup(self._view, keys, context.deadline, self._options)
        context.add_freshness(self._view, result.freshness)
        return per_key(keys, result)


def _freshness_order(entry: Mapping[str, Any]) -> tuple[int, str, str]:
    partition = entry.get("partition")
    number = partition if isinstance(partition, int) else -1
    return (number, str(entry.get("node")), str(entry.get("role")))


def per_key(keys: list[str], result: LookupResult) -> list[KeyResult]:
    """What a lookup of `keys` found of each, in order."""
    return [
        KeyResult(key, partition, row, result.failures.get(partition))
        for key, row, partition in zip(keys, result.rows, result.partitions, strict=True)
    ]
