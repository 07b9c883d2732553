"""Standby replicas: copies of partitions that other nodes own, kept current with assign().

Placement is deterministic from the membership table (`standby_placement`): for partition
p with a live ACTIVE owner o, the standbys are the next `replicas` live nodes after o in
node-id order, wrapping around, never o itself; with one live node there are none. A copy
whose placement moves elsewhere stays until the new standby has caught up. The
`StandbyReplicator` follows `statefed.members` and its standby partitions with one
consumer that never joins a group, into the same partition stores the Materializer uses
(`<state_dir>/partition-<p>/`), so a standby that becomes active only catches up the
tail. A partition is in one store handle at a time: the Materializer claims it (the
standby copy closes) before opening it and releases it after closing it. When the group
revokes a partition from this node, the replicator adopts its open store: the old ACTIVE
copy goes on following the changelog as a STANDBY copy, without a gap, and stays at least
until the partition's new owner is RUNNING with it, so a read that accepts no lag can be
answered by it once it is proved current (node.reads.currency) while the new owner restores.
An adopted copy goes on in the change feed (node.changelog.feed) without a break: its follows only
see its role change; a copy closed here (claimed, dropped) ends its follows (`gone`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import OFFSET_END, Consumer, Message, TopicPartition

from node.changelog.feed import ChangeFeed
from node.changelog.materializer import Replicator, StoreFactory
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.errors import StoreDamagedError
from node.storage.store import PartitionStore
from runtime.clock import Clock, wall_clock_ms
from runtime.clockoffsets import ClockOffsets
from runtime.trust import ClusterSecret, SignedMembers
from schema import MEMBERS_TOPIC, MemberRecord, NodeState, Role, View, decode_member

__all__ = ["StandbyReplicator", "standby_placement"]

log = logging.getLogger(__name__)

# heartbeats to follow membership before placing standbys: every live node republishes
# within one heartbeat, so the table is complete by then
_WARM_UP_HEARTBEATS = 2


def standby_placement(
    members: Mapping[str, MemberRecord], replicas: int, now_ms: int, live: Iterable[str] = ()
) -> dict[int, tuple[str, ...]]:
    """The standby nodes of every partition that has a live ACTIVE owner; `live` adds node
    ids known to be alive (the caller itself) to those with a fresh record."""
    nodes = sorted({n for n, r in members.items() if r.is_alive(now_ms)} | set(live))
    owners: dict[int, str] = {}
    for node_id in nodes:  # by id: two claimants mid-rebalance resolve to the smaller id
        record = members.get(node_id)
        for partition in record.active_partitions() if record else ():
            owners.setdefault(partition, node_id)
    count = min(replicas, len(nodes) - 1)
    placement: dict[int, tuple[str, ...]] = {}
    for partition, owner in sorted(owners.items()):
        at = nodes.index(owner)
        placement[partition] = tuple(nodes[(at + k) % len(nodes)] for k in range(1, count + 1))
    return placement


class StandbyReplicator(Replicator):
    """Materializes this node's standby partitions; also the Materializer's `StoreHandoff`."""

    role = Role.STANDBY

    def __init__(
        self,
        config: NodeConfig,
        catalogue: Iterable[View],
        registry: PartitionRegistry,
        *,
        store_factory: StoreFactory | None = None,
        on_fatal: Callable[[BaseException], None] | None = None,
        clock: Clock = wall_clock_ms,
        wall_ms: Callable[[], int] = wall_clock_ms,
        monotonic: Callable[[], float] = time.monotonic,
        secret: ClusterSecret | None = None,
        feed: ChangeFeed | None = None,
    ):
        super().__init__(
            config,
            catalogue,
            registry,
            store_factory=store_factory,
            on_fatal=on_fatal,
            clock=clock,
            feed=feed,
        )
        self._wall_ms = wall_ms
        # with the secret, only signed membership records count
        ignored = f"node {config.node_id}: membership record of node {{node}} ignored"
        self._signed = None if secret is None else SignedMembers(secret, log, ignored)
        self._offsets = ClockOffsets(
            wall_ms, monotonic
        )  # how far other nodes' clocks are from this one's
        # held by the thread while it touches stores, and by claim(): one handle per store
        self._lock = threading.RLock()
        self._claimed: set[int] = set()
        self._members: dict[str, MemberRecord] = {}
        self._assigned: dict[int, list[TopicPartition]] = {}
        # copies adopted from the Materializer on revoke, kept until their new owner runs
        self._adopted: set[int] = set()
        self._following_since = 0.0

    def claim(self, partitions: set[int]) -> None:
        """The Materializer opens `partitions`: close their standby copies, hold off."""
        with self._lock:
            self._claimed |= partitions
            self._adopted -= partitions
            held = partitions & set(self._stores)
            if held:
                log.info("node %s: standby partitions %s become active", self.config.node_id, held)
                self._close_stores(held)

    def release(self, partitions: set[int]) -> None:
        """The Materializer closed `partitions`: they may be standby copies again."""
        with self._lock:
            self._claimed -= partitions

    def adopt(self, partition: int, store: PartitionStore, restoring: bool) -> bool:
        """Serve the Materializer's revoked copy of `partition` (its open `store`) as a
        STANDBY copy following the changelog from its stored offsets, at once and at least
        until the partition's new owner is RUNNING with it; False when this replicator is
        not consuming (the Materializer closes the store then)."""
        with self._lock:
            consumer = self._consumer
            if consumer is None or self._stop.is_set():
                return False
            try:
                store.offsets()  # what _hold starts from
            except StoreDamagedError as exc:
                # the Materializer closes it; its next open sets it aside
                log.warning(
                    "node %s: not adopting partition %d: %s", self.config.node_id, partition, exc
                )
                return False
            stale = self._assigned.pop(partition, None)  # claimed, not reconciled yet
            if stale:
                consumer.incremental_unassign(stale)
            topics = [TopicPartition(topic, partition) for topic in self.views]
            self._hold(partition, store, topics, restoring)
            self._assign(consumer, topics)
            self._assigned[partition] = topics
            self._claimed.discard(partition)
            self._adopted.add(partition)
        return True

    def consumer_config(self) -> dict[str, object]:
        return self.config.kafka.client(
            fixed={
                # assign() only: never joined, but librdkafka wants a group id
                "group.id": f"{self.config.group_id}-standby-{self.config.node_id}",
                "enable.auto.commit": False,
                # a stored offset the changelog's retention deleted restarts from the first
                # record left, as the Materializer does, not past every record to the end
                "auto.offset.reset": "earliest",
                "enable.partition.eof": True,  # how a restore knows it reached the end
            },
            defaults={"client.id": f"{self.config.node_id}-standby", "fetch.wait.max.ms": 100},
        )

    def _run(self) -> None:
        consumer = Consumer(self.consumer_config())
        self._consumer = consumer
        # from the end: every live node republishes its record within a heartbeat
        consumer.incremental_assign([TopicPartition(MEMBERS_TOPIC, 0, OFFSET_END)])
        self._following_since = time.monotonic()
        try:
            while not self._stop.is_set():
                messages = self._consume(consumer)
                with self._lock:
                    changelog = self._read_members(messages)
                    if changelog:
                        self._apply(changelog)
                    self._reconcile(consumer)
                    self._retry_faults(consumer)
                    held = [tp for tps in self._assigned.values() for tp in tps]
                    self._track_end_offsets(consumer, held)
                    self._sweep_if_due()
        finally:
            with self._lock:
                self._close_stores(list(self._stores))

    def _read_members(self, messages: list[Message]) -> list[Message]:
        """Apply the membership records of a poll; return the changelog records."""
        changelog = []
        for message in messages:
            if message.topic() != MEMBERS_TOPIC or message.error() is not None:
                changelog.append(message)
                continue
            node_id = (message.key() or b"").decode("utf-8", errors="replace")
            value = message.value()
            if self._signed is not None and not self._signed.authentic(
                node_id, value, message.headers()
            ):
                continue
            if value is None:
                self._members.pop(node_id, None)
                self._offsets.forget(node_id)
                continue
            try:
                record = decode_member(value)
            except ValueError as exc:
                log.warning("node %s: membership record ignored: %s", self.config.node_id, exc)
                continue
            # read from the topic's end on: every record is read as it comes, and tells how
            # far its node's clock is from this node's (runtime.clockoffsets)
            self._offsets.heard(node_id, record.heartbeat_ms, self._wall_ms(), record.incarnation)
            heartbeat_ms = self._offsets.on_own_clock(node_id, record.heartbeat_ms)
            self._members[node_id] = dataclasses.replace(record, heartbeat_ms=heartbeat_ms)
        return changelog

    def _consuming(self, partition: int) -> bool:
        return partition in self._assigned

    def _wanted(self) -> set[int] | None:
        """The partitions to hold as standby now; None while membership is warming up."""
        warm_up_s = _WARM_UP_HEARTBEATS * self.config.heartbeat_ms / 1000
        if time.monotonic() - self._following_since < warm_up_s:
            return None
        node_id = self.config.node_id
        placement = standby_placement(
            self._members, self.config.standby_replicas, self._wall_ms(), [node_id]
        )
        wanted = {p for p, standbys in placement.items() if node_id in standbys}
        # a partition without a live owner keeps its standby: this copy may be its next active;
        # a copy placed elsewhere now is kept until the new one caught up, so that a rebalance
        # in between (a node joining revokes every active copy) still finds a standby
        wanted |= {p for p in self._assigned if not self._handed_over(p, placement.get(p))}
        self._adopted = {p for p in self._adopted if p in self._assigned and not self._runs(p)}
        return (wanted | self._adopted) - self._claimed

    def _runs(self, partition: int) -> bool:
        """Whether another live node is RUNNING with a caught-up ACTIVE copy of `partition`."""
        now_ms = self._wall_ms()
        return any(
            record.state is NodeState.RUNNING
            and record.is_alive(now_ms)
            and any(
                c.partition == partition and c.role is Role.ACTIVE and not c.restoring
                for c in record.partitions
            )
            for node_id, record in self._members.items()
            if node_id != self.config.node_id
        )

    def _handed_over(self, partition: int, standbys: tuple[str, ...] | None) -> bool:
        """Whether every node now placed as `partition`'s standby holds a caught-up copy."""
        if standbys is None:
            return False
        for node_id in standbys:
            record = self._members.get(node_id)
            copies = record.partitions if record is not None else ()
            if not any(
                c.partition == partition and c.role is Role.STANDBY and not c.restoring
                for c in copies
            ):
                return False
        return True

    def _reconcile(self, consumer: Consumer) -> None:
        """Assign the wanted standby partitions and drop the others."""
        wanted = self._wanted()
        if wanted is None:
            return
        dropped = set(self._assigned) - wanted
        if dropped:
            consumer.incremental_unassign([tp for p in dropped for tp in self._assigned.pop(p)])
            self._close_stores(dropped & set(self._stores))
        added = sorted(wanted - set(self._assigned))
        if added:
            tps = [TopicPartition(topic, p) for p in added for topic in self.views]
            self._attach(tps)
            self._assign(consumer, tps)
            for p in added:
                self._assigned[p] = [tp for tp in tps if tp.partition == p]
        if dropped or added:
            log.info(
                "node %s: standby partitions now %s (dropped %s)",
                self.config.node_id,
                sorted(self._assigned),
                sorted(dropped),
            )
