"""A store that cannot be written (a full disk) while its partition changes hands: revoked
and handed to the standby replicator, or held through a broker outage that lost the group
session. Real LevelDB stores whose writes fail as LevelDB reports a full disk while the
test says so, a real materializer and standby replicator against a real Apache Kafka broker.
Neither replicator may die of it, and every partition ends with exactly what was written.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import plyvel
import pytest

from node.changelog.materializer import Materializer, StoreFactory
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.replication.standby import StandbyReplicator
from node.storage.changes import ChangeBatch, Stored
from node.storage.store import LevelDBStore, PartitionStore
from runtime.topics import ensure_topics, statefed_topics
from schema import CountRow, NodeState, Role, View
from tests.node.harness import P, node_config, produce_counts, unique_count_view
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

pytestmark = pytest.mark.timeout(180)


class Disk:
    """Whether the stores' disk is full, and how often each store asked for room."""

    def __init__(self) -> None:
        self.full = threading.Event()
        self.room_checks: dict[int, int] = {}


class FullWhileSaid(LevelDBStore):
    """A real LevelDB store whose writes and opens fail as LevelDB's do on a full disk,
    while `disk.full` is set."""

    def __init__(self, path: Path, partition: int, disk: Disk):
        super().__init__(path, cache_mb=1)
        self.partition, self.disk = partition, disk

    def _write(self, db: plyvel.DB, batch: ChangeBatch) -> Stored:
        if self.disk.full.is_set():
            raise plyvel.IOError(b"IO error: injected.log: No space left on device")
        return super()._write(db, batch)

    def _open_db(self) -> plyvel.DB:
        if self.disk.full.is_set():
            raise self._write_error("open", plyvel.IOError(b"IO error: No space left on device"))
        return super()._open_db()

    def room_to_write(self) -> bool:
        checks = self.disk.room_checks
        checks[self.partition] = checks.get(self.partition, 0) + 1
        return not self.disk.full.is_set() and super().room_to_write()


def store_factory(config: NodeConfig, disk: Disk) -> StoreFactory:
    def make(partition: int) -> PartitionStore:
        return FullWhileSaid(config.state_dir / f"partition-{partition}", partition, disk)

    return make


def rows(tag: str, count: int) -> list[CountRow]:
    """`count` for each of 60 keys (about ten per partition)."""
    return [CountRow(f"{tag}-{i}", count, 1_700_000_000_000 + count) for i in range(60)]


def applied(registry: PartitionRegistry, written: dict[int, int], role: Role | None) -> bool:
    """Whether every copy in `role` (any: None) applied all written and takes writes."""
    statuses = [s for s in registry.statuses() if role is None or s.role is role]
    return bool(statuses) and all(
        s.applied_offset == written.get(s.partition, 0) and s.store_error is None for s in statuses
    )


def add(total: dict[int, int], more: dict[int, int]) -> None:
    for partition, n in more.items():
        total[partition] = total.get(partition, 0) + n


@pytest.fixture
def view(broker: KafkaBroker) -> View:
    view = unique_count_view()
    ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
    return view


def test_a_copy_revoked_while_its_disk_is_full_is_handed_to_the_standby_and_recovers(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    tag, group = uuid.uuid4().hex[:6], f"g-{view.name}"
    written = produce_counts(broker.bootstrap, view, rows(tag, 1))
    config = node_config(broker.bootstrap, tmp_path, "fa", group)
    disk = Disk()
    registry = PartitionRegistry("fa")
    factory = store_factory(config, disk)
    standby = StandbyReplicator(config, [view], registry, store_factory=factory)
    active = Materializer(config, [view], registry, store_factory=factory, handoff=standby)
    active.retry_max_s = standby.retry_max_s = 0.5  # retried often while the disk is full
    other_registry = PartitionRegistry("fb")
    other = Materializer(
        node_config(broker.bootstrap, tmp_path, "fb", group), [view], other_registry
    )
    standby.start()
    active.start()
    try:
        wait_until(
            lambda: registry.state is NodeState.RUNNING and applied(registry, written, None),
            30,
            "fa RUNNING with every partition applied",
        )
        disk.full.set()
        add(written, produce_counts(broker.bootstrap, view, rows(tag, 2)))
        wait_until(
            lambda: all(s.store_error for s in registry.statuses()) or None,
            30,
            "every store of fa failing to write",
        )
        other.start()  # half of fa's partitions move to fb, their copies to fa's standby
        wait_until(
            lambda: (registry.partitions(Role.STANDBY) and other_registry.partitions()) or None,
            60,
            "fa's revoked copies adopted by its standby replicator",
        )
        kept = registry.partitions(Role.ACTIVE)
        assert kept and sorted(kept + registry.partitions(Role.STANDBY)) == list(range(P))
        checks = {p: disk.room_checks.get(p, 0) for p in kept}
        wait_until(
            lambda: all(disk.room_checks.get(p, 0) >= checks[p] + 2 for p in kept),
            30,
            "fa's materializer retrying its kept stores twice more, the disk still full",
        )
        assert active.failure is None and standby.failure is None
        disk.full.clear()
        wait_until(lambda: applied(registry, written, None), 60, "every copy of fa applied again")
        wait_until(
            lambda: applied(other_registry, written, Role.ACTIVE), 60, "fb applied its partitions"
        )
        # fb leaves: its partitions come back to fa's materializer, whose consumer paused
        # them for the fault before it gave them away
        other.stop()
        other.close()
        add(written, produce_counts(broker.bootstrap, view, rows(tag, 3)))
        wait_until(
            lambda: (
                registry.partitions(Role.ACTIVE) == list(range(P))
                and applied(registry, written, Role.ACTIVE)
            ),
            90,
            lambda: f"fa ACTIVE again with {written} applied: {registry.statuses()}",
        )
        assert active.failure is None and standby.failure is None
    finally:
        for replicator in (other, active, standby):
            replicator.stop()
        for replicator in (other, active, standby):
            replicator.close()


def test_a_copy_held_through_a_broker_outage_while_its_disk_is_full_recovers_and_catches_up(
    tmp_path: Path,
) -> None:
    view = unique_count_view()
    tag = uuid.uuid4().hex[:6]
    with KafkaBroker(log_path=tmp_path / "broker.log") as broker:
        ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
        written = produce_counts(broker.bootstrap, view, rows(tag, 1))
        config = node_config(broker.bootstrap, tmp_path, "fo", f"g-{view.name}")
        disk = Disk()
        registry = PartitionRegistry("fo")
        active = Materializer(config, [view], registry, store_factory=store_factory(config, disk))
        active.retry_max_s = 0.5
        active.start()
        try:
            wait_until(
                lambda: registry.state is NodeState.RUNNING and applied(registry, written, None),
                30,
                "fo RUNNING with every partition applied",
            )
            disk.full.set()
            add(written, produce_counts(broker.bootstrap, view, rows(tag, 2)))
            wait_until(
                lambda: all(s.store_error for s in registry.statuses()) or None,
                30,
                "every store of fo failing to write",
            )
            broker.pause()
            try:
                wait_until(
                    lambda: (
                        all(s.lag_unknown_since_ms is not None for s in registry.statuses())
                        and registry.state is NodeState.REBALANCING
                    ),
                    30,
                    "the group session lost, every copy held",
                )
                disk.full.clear()  # the held copies recover while the broker is away
                wait_until(
                    lambda: (
                        not any(s.store_error for s in registry.statuses())
                        or active.failure is not None
                    ),
                    30,
                    "the held stores taking writes again",
                )
                assert active.failure is None
                assert registry.partitions(Role.ACTIVE) == list(range(P))
            finally:
                broker.resume()
            add(written, produce_counts(broker.bootstrap, view, rows(tag, 3)))
            wait_until(
                lambda: registry.state is NodeState.RUNNING and applied(registry, written, None),
                90,
                lambda: (
                    f"fo RUNNING again with {written} applied: {registry.state} "
                    f"{registry.statuses()}"
                ),
            )
            assert active.failure is None
        finally:
            active.stop()
            active.close()


def test_a_copy_that_could_not_open_on_a_full_disk_is_revoked_and_opens_on_its_next_owner(
    broker: KafkaBroker, view: View, tmp_path: Path
) -> None:
    tag, group = uuid.uuid4().hex[:6], f"g-{view.name}"
    written = produce_counts(broker.bootstrap, view, rows(tag, 1))
    config = node_config(broker.bootstrap, tmp_path, "ca", group)
    disk = Disk()
    disk.full.set()  # no store of ca can open: each is held closed and retried
    registry = PartitionRegistry("ca")
    factory = store_factory(config, disk)
    standby = StandbyReplicator(config, [view], registry, store_factory=factory)
    active = Materializer(config, [view], registry, store_factory=factory, handoff=standby)
    other_registry = PartitionRegistry("cb")
    other = Materializer(
        node_config(broker.bootstrap, tmp_path, "cb", group), [view], other_registry
    )
    standby.start()
    active.start()
    try:
        wait_until(
            lambda: (
                len(registry.statuses()) == P and all(s.store_error for s in registry.statuses())
            ),
            30,
            "every store of ca held closed after a failed open",
        )
        other.start()  # half of ca's closed copies move to cb
        wait_until(
            lambda: other_registry.partitions() or active.failure is not None or None,
            60,
            "cb assigned partitions",
        )
        assert active.failure is None and standby.failure is None
        disk.full.clear()
        wait_until(
            lambda: (
                applied(other_registry, written, Role.ACTIVE)
                and applied(registry, written, Role.ACTIVE)
            ),
            60,
            "ca and cb applied their partitions",
        )
        assert sorted(registry.partitions(Role.ACTIVE) + other_registry.partitions()) == list(
            range(P)
        )
        assert active.failure is None and standby.failure is None
    finally:
        for replicator in (other, active, standby):
            replicator.stop()
        for replicator in (other, active, standby):
            replicator.close()
