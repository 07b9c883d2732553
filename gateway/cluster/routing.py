"""Which node serves a partition: the versioned routing table built from membership records.

"Which partition" is `View.partition_of(key, P)` (the Java producer's choice for the view's key
type) with P from topic metadata; this module only maps partitions to nodes. Everything here
is pure except `RoutingFeed`, which hands the newest table to the request handlers and lets
them wait for a newer one.

The feed also remembers, per partition, the node last seen serving it ACTIVE, after that
node's record is dead or gone: an error for a partition nobody holds names that node.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gateway.model.errors import (
    PartitionNeverAssignedError,
    PartitionUnassignedError,
    RoutingError,
    RoutingNotReadyError,
)
from schema import KeyType, MemberRecord, NodeState, PartitionStatus, RecordKey, Role, View

__all__ = [
    "SUSPECT_AFTER_HEARTBEATS",
    "Disclaimers",
    "LastOwner",
    "Liveness",
    "NodeInfo",
    "RoutingFeed",
    "RoutingTable",
    "build_routing_table",
    "group_keys",
]

# murmur2 in Python costs microseconds a key: hot keys are hashed once, in a plain dict of
# key text -> partition per (key type, partition count). Not an lru_cache: its 65,536 links
# and (type, key, count) tuples were objects every full garbage collection walked (about
# 40 ms of loop pause at a time under uniform access, issue 31); a dict of strings and ints
# is one object to the collector. Full, it is emptied: a hot key is hashed again once.
_PARTITION_MEMO_KEYS = 65_536
_partitions_memo: dict[tuple[KeyType | RecordKey, int], dict[str, int]] = {}


def _memo(key_type: KeyType | RecordKey, count: int) -> dict[str, int]:
    """The partitions of hashed key texts of `key_type` among `count` partitions."""
    memo = _partitions_memo.get((key_type, count))
    if memo is None:
        memo = _partitions_memo[(key_type, count)] = {}
    return memo


def group_keys(
    keys: Iterable[str], count: int, view: View
) -> tuple[list[int], dict[int, list[str]]]:
    """The partition of each of `keys` (key texts of `view`, among `count` partitions), and
    the keys of each partition, in the order asked."""
    key_type = view.key_type
    memo = _memo(key_type, count)  # found once a call: hashing an enum member is a Python call
    partitions = []
    keys_of: dict[int, list[str]] = {}
    for key in keys:
        partition = memo.get(key)
        if partition is None:
            if len(memo) >= _PARTITION_MEMO_KEYS:
                memo.clear()
            partition = memo[key] = key_type.partition(key, count)
        partitions.append(partition)
        keys_of.setdefault(partition, []).append(key)
    return partitions, keys_of


# a live node whose newest heartbeat is this many of its intervals older than the newest
# heartbeat of any node has missed one and is suspect (gateway.nodes.hedging): judged against the
# other nodes' heartbeats, not the gateway's clock, so a broker outage (no heartbeats read
# at all) makes no node suspect
SUSPECT_AFTER_HEARTBEATS = 2


@dataclass(frozen=True)
class NodeInfo:
    """One node as the newest membership record describes it."""

    node_id: str
    url: str
    state: NodeState
    heartbeat_ms: int
    alive: bool
    partitions: tuple[PartitionStatus, ...]
    suspect: bool = False  # missed heartbeats (SUSPECT_AFTER_HEARTBEATS)
    incarnation: str = ""  # the node process the record is of ("" from older nodes)
    graphql_url: str = field(init=False)
    _restoring: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "graphql_url", self.url.rstrip("/") + "/graphql")
        restoring = frozenset(p.partition for p in self.partitions if p.restoring)
        object.__setattr__(self, "_restoring", restoring)

    def restoring(self, partition: int) -> bool:
        """Whether this node's copy of `partition` is still restoring (it refuses reads)."""
        return partition in self._restoring

    def active(self) -> list[int]:
        return sorted(p.partition for p in self.partitions if p.role is Role.ACTIVE)

    def standby(self) -> list[int]:
        return sorted(p.partition for p in self.partitions if p.role is Role.STANDBY)


@dataclass(frozen=True, order=True)
class LastOwner:
    """The newest membership record (`seen_ms`, the node's heartbeat) in which `node_id`
    held a partition ACTIVE and caught up."""

    seen_ms: int
    node_id: str


class Disclaimers:
    """Claims a node disowned with NOT_OWNER: ignored until the node publishes a newer record."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int], int] = {}

    def add(self, node: NodeInfo, partitions: Iterable[int]) -> None:
        for partition in partitions:
            self._seen[(node.node_id, partition)] = node.heartbeat_ms

    def excludes(self, node: NodeInfo, partition: int) -> bool:
        heartbeat = self._seen.get((node.node_id, partition))
        return heartbeat is not None and node.heartbeat_ms <= heartbeat


_NO_DISCLAIMERS = Disclaimers()
_HANDING_OVER = (NodeState.STARTING, NodeState.REBALANCING)


@dataclass(frozen=True)
class Liveness:
    """How long nodes have been silent, judged as of `at_ms`: the newest moment the
    membership feed is known to work (the broker answered its reader).

    While the feed is stalled (`stale_since_ms`: the broker has not answered since then)
    `at_ms` stays there, so every node keeps the liveness it had; once the feed is back,
    silence within that stall (`excused`: its start and end) is not counted against a
    node, so live nodes have their usual heartbeats to be heard again.
    """

    at_ms: int
    stale_since_ms: int | None = None
    excused: tuple[int, int] | None = None

    def silence_ms(self, heartbeat_ms: int) -> int:
        return self.between_ms(heartbeat_ms, self.at_ms)

    def between_ms(self, earlier_ms: int, later_ms: int) -> int:
        """The time from `earlier_ms` to `later_ms` that counts against a node: without
        the part within the stall that is excused."""
        gap = later_ms - earlier_ms
        if self.excused is not None:
            start, end = self.excused
            gap -= max(0, min(end, later_ms) - max(start, earlier_ms))
        return gap

    def alive(self, record: MemberRecord) -> bool:
        return record.is_alive(record.heartbeat_ms + self.silence_ms(record.heartbeat_ms))


@dataclass(frozen=True)
class RoutingTable:
    """A snapshot: known nodes, the live ACTIVE claimants of each partition, P per view,
    the live STANDBY copies of each partition with their lag (known lag first, then least
    lag first) and those still restoring, and the node last seen serving each partition
    ACTIVE (dead or alive).

    `version` grows with every snapshot a `RoutingFeed` publishes. `stale_since_ms` is set
    while membership brings no news because the broker does not answer (see `Liveness`):
    the table is then the one of that time, kept rather than expired, and a node's silence
    says nothing about the node.
    """

    nodes: Mapping[str, NodeInfo] = field(default_factory=dict)
    claims: Mapping[int, tuple[NodeInfo, ...]] = field(default_factory=dict)
    standbys: Mapping[int, tuple[tuple[NodeInfo, int], ...]] = field(default_factory=dict)
    # live STANDBY copies still restoring (they may be behind what was served): read only
    # when they prove themselves current for the read (node.reads.currency)
    restoring: Mapping[int, tuple[NodeInfo, ...]] = field(default_factory=dict)
    partition_counts: Mapping[str, int] = field(default_factory=dict)
    built_ms: int = 0
    version: int = 0
    last_owners: Mapping[int, LastOwner] = field(default_factory=dict)
    stale_since_ms: int | None = None

    def partition_count(self, view: View) -> int:
        """P of `view`, read from its changelog topic's metadata."""
        count = self.partition_counts.get(view.name)
        if count is None:
            raise RoutingNotReadyError(view.name, view.changelog_topic)
        return count

    def unassigned_error(self, view: str, partition: int, keys: Sequence[str] = ()) -> RoutingError:
        """The error of `partition` when no node can be asked for it: it names the node
        last seen serving it ACTIVE, or says that none was."""
        last = self.last_owners.get(partition)
        if last is None:
            return PartitionNeverAssignedError(view, [partition], keys)
        return PartitionUnassignedError(
            view, [partition], keys, node=last.node_id, last_seen_ms=last.seen_ms
        )

    def owner(self, partition: int, disclaimers: Disclaimers = _NO_DISCLAIMERS) -> NodeInfo | None:
        """The node to ask for `partition`: the best live ACTIVE claimant not disclaimed."""
        for node in self.claims.get(partition, ()):
            if not disclaimers.excludes(node, partition):
                return node
        return None

    def standby(
        self,
        partition: int,
        max_lag: int,
        disclaimers: Disclaimers = _NO_DISCLAIMERS,
        avoid: Collection[str] = (),
    ) -> NodeInfo | None:
        """The first live STANDBY copy of `partition` (known lag before unknown, least lag
        first) at most `max_lag` behind, on a node not in `avoid` and not disclaimed; None
        when there is none."""
        for node, lag in self.standbys.get(partition, ()):
            if lag > max_lag:
                continue
            if node.node_id not in avoid and not disclaimers.excludes(node, partition):
                return node
        return None

    def restoring_copy(
        self,
        partition: int,
        disclaimers: Disclaimers = _NO_DISCLAIMERS,
        avoid: Collection[str] = (),
    ) -> NodeInfo | None:
        """The first live STANDBY copy of `partition` still restoring, on a node not in
        `avoid` and not disclaimed; None when there is none."""
        for node in self.restoring.get(partition, ()):
            if node.node_id not in avoid and not disclaimers.excludes(node, partition):
                return node
        return None

    def route(
        self, partitions: Iterable[int], disclaimers: Disclaimers = _NO_DISCLAIMERS
    ) -> tuple[dict[str, tuple[NodeInfo, list[int]]], list[int]]:
        """Group `partitions` by owning node; also return the ones without an owner."""
        groups: dict[str, tuple[NodeInfo, list[int]]] = {}
        unassigned: list[int] = []
        for partition in sorted(set(partitions)):
            node = self.owner(partition, disclaimers)
            if node is None:
                unassigned.append(partition)
            else:
                groups.setdefault(node.node_id, (node, []))[1].append(partition)
        return groups, unassigned

    def rebalancing(self) -> bool:
        """Whether a live node is starting or rebalancing: partitions are being handed to
        owners, so one without an owner now may have one soon."""
        return any(node.alive and node.state in _HANDING_OVER for node in self.nodes.values())

    def routable(self, partitions: int) -> list[int]:
        return [p for p in range(partitions) if self.claims.get(p)]

    def max_partition_count(self) -> int | None:
        return max(self.partition_counts.values(), default=None)


def _claim_order(claim: tuple[NodeInfo, PartitionStatus]) -> tuple[bool, bool, int, str]:
    # a RUNNING node before one still restoring; then a copy whose lag is known before one
    # whose lag is unknown (a node that stood still past its session claims partitions the
    # group has given to another until it hears of it: its copies are doubted meanwhile);
    # then the newest record, then a stable order
    node, status = claim
    return (
        node.state is not NodeState.RUNNING,
        status.lag_unknown_since_ms is not None,
        -node.heartbeat_ms,
        node.node_id,
    )


def _standby_order(copy: tuple[NodeInfo, PartitionStatus]) -> tuple[bool, int, str]:
    # a copy whose lag is known before one whose lag is as of some time ago (the broker did
    # not answer its node, or its node stood still), then the least lag, then a stable order
    node, status = copy
    return (status.lag_unknown_since_ms is not None, status.lag, node.node_id)


def build_routing_table(
    members: Mapping[str, MemberRecord],
    partition_counts: Mapping[str, int],
    now_ms: int,
    liveness: Liveness | None = None,
) -> RoutingTable:
    """The routing table for `members` at time `now_ms`: nodes silent for more than 3
    heartbeats (by `liveness`, default: as of `now_ms`) are dead and own nothing; live ones
    2 heartbeats behind the newest are suspect (a past stall excused from both: after a
    broker outage, the node heard first makes no other suspect for the outage)."""
    liveness = liveness or Liveness(now_ms)
    alive = {node_id for node_id, record in members.items() if liveness.alive(record)}
    newest = max((members[node_id].heartbeat_ms for node_id in alive), default=0)
    nodes = {
        node_id: NodeInfo(
            node_id=node_id,
            url=record.url,
            state=record.state,
            heartbeat_ms=record.heartbeat_ms,
            alive=node_id in alive,
            partitions=record.partitions,
            incarnation=record.incarnation,
            suspect=node_id in alive
            and liveness.between_ms(record.heartbeat_ms, newest)
            > SUSPECT_AFTER_HEARTBEATS * record.heartbeat_interval_ms,
        )
        for node_id, record in members.items()
    }
    claims: dict[int, list[tuple[NodeInfo, PartitionStatus]]] = {}
    standbys: dict[int, list[tuple[NodeInfo, PartitionStatus]]] = {}
    restoring: dict[int, list[NodeInfo]] = {}
    for node in nodes.values():
        if node.alive:
            for status in node.partitions:
                if status.role is Role.ACTIVE:
                    claims.setdefault(status.partition, []).append((node, status))
                elif not status.restoring:
                    standbys.setdefault(status.partition, []).append((node, status))
                else:
                    restoring.setdefault(status.partition, []).append(node)
    return RoutingTable(
        nodes=nodes,
        claims={
            p: tuple(node for node, _ in sorted(c, key=_claim_order)) for p, c in claims.items()
        },
        standbys={
            p: tuple((node, status.lag) for node, status in sorted(s, key=_standby_order))
            for p, s in standbys.items()
        },
        restoring={
            p: tuple(sorted(n, key=lambda node: (-node.heartbeat_ms, node.node_id)))
            for p, n in restoring.items()
        },
        partition_counts=dict(partition_counts),
        built_ms=now_ms,
        last_owners=_last_owners(nodes.values()),
        stale_since_ms=liveness.stale_since_ms,
    )


def _last_owners(nodes: Iterable[NodeInfo]) -> dict[int, LastOwner]:
    """Per partition, the newest record of any node, dead or alive, serving it ACTIVE (a
    copy still restoring is not served)."""
    found: dict[int, LastOwner] = {}
    for node in nodes:
        for status in node.partitions:
            if status.role is Role.ACTIVE and not status.restoring:
                seen = LastOwner(node.heartbeat_ms, node.node_id)
                found[status.partition] = max(seen, found.get(status.partition, seen))
    return found


def _remember_owners(
    known: Mapping[int, LastOwner], seen: Mapping[int, LastOwner]
) -> dict[int, LastOwner]:
    """`known` updated with the newer of each partition's owners in `seen`."""
    merged = dict(known)
    for partition, owner in seen.items():
        merged[partition] = max(owner, merged.get(partition, owner))
    return merged


class RoutingFeed:
    """The current routing table, replaced as membership changes; lives on the event loop."""

    def __init__(self, initial: RoutingTable | None = None) -> None:
        self._table = dataclasses.replace(initial or RoutingTable(), version=1)
        self._changed = asyncio.Event()
        self._refresh_hooks: list[Callable[[], None]] = []

    @property
    def current(self) -> RoutingTable:
        return self._table

    def publish(self, table: RoutingTable) -> RoutingTable:
        """Make `table` current under the next version and wake everyone waiting for it;
        it keeps the last owners of partitions its own records no longer show."""
        self._table = dataclasses.replace(
            table,
            version=self._table.version + 1,
            last_owners=_remember_owners(self._table.last_owners, table.last_owners),
        )
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        return self._table

    def on_refresh(self, hook: Callable[[], None]) -> None:
        """Call `hook` whenever a request asks for a fresher table (e.g. to re-read membership)."""
        self._refresh_hooks.append(hook)

    async def newer(self, seen_version: int) -> RoutingTable:
        """Wait, without asking for a refresh, until a table newer than `seen_version` is
        current (the feed hub follows owner changes this way)."""
        while self._table.version <= seen_version:
            await self._changed.wait()
        return self._table

    async def newer_within(self, seen_version: int, timeout_s: float) -> bool:
        """Whether a table newer than `seen_version` came within `timeout_s` (`newer`)."""
        try:
            async with asyncio.timeout(timeout_s):
                await self.newer(seen_version)
        except TimeoutError:
            return False
        return True

    async def refresh(self, seen_version: int, timeout_s: float) -> RoutingTable:
        """Ask for a fresher table and wait up to `timeout_s` for one newer than `seen_version`."""
        for hook in self._refresh_hooks:
            hook()
        if self._table.version <= seen_version and timeout_s > 0:
            changed = self._changed
            try:
                async with asyncio.timeout(timeout_s):
                    while self._table.version <= seen_version:
                        await changed.wait()
                        changed = self._changed
            except TimeoutError:
                pass
        return self._table
