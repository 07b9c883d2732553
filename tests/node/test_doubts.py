"""A copy's lag is unknown while its end offsets may be old: just attached (until a fetch
for each topic came back) or after the node stood still (until its consumers fetched
again). A lag from old end offsets would call a copy that missed seconds of changes
current, and the gateway would prefer it to a standby that is."""

from __future__ import annotations

from pathlib import Path

from node.changelog.partitions import STALL_DOUBT_S, Doubt, PartitionRegistry
from node.replication.membership import MembershipPublisher
from node.storage.store import LevelDBStore
from schema import Role
from tests.node.harness import node_config


def test_an_attached_copy_is_doubted_until_its_fetches_came_back(tmp_path: Path) -> None:
    registry = PartitionRegistry("n1")
    with LevelDBStore(tmp_path / "partition-0") as store:
        registry.attach(0, store, Role.STANDBY, {"t": 10})
        registry.record_end(0, "t", 10)  # a cached watermark of an earlier assignment
        registry.doubt_ends([0], 1_000, lapses=False)
        [doubted] = registry.statuses()
        assert doubted.lag == 0 and doubted.lag_unknown_since_ms == 1_000
        registry.trust_ends(0)
        [trusted] = registry.statuses()
        assert trusted.lag_unknown_since_ms is None


def test_a_stall_doubts_every_copy_and_only_time_ends_it(tmp_path: Path) -> None:
    registry = PartitionRegistry("n1")
    with (
        LevelDBStore(tmp_path / "partition-0") as first,
        LevelDBStore(tmp_path / "partition-1") as second,
    ):
        registry.attach(0, first, Role.ACTIVE, {"t": 5})
        registry.attach(1, second, Role.STANDBY, {"t": 7})
        registry.doubt_ends(None, 2_000, lapses=True)
        registry.trust_ends(0)  # a fetch may have been queued before the stall
        assert [s.lag_unknown_since_ms for s in registry.statuses()] == [2_000, 2_000]


def test_a_stall_does_not_shorten_an_attached_copys_doubt(tmp_path: Path) -> None:
    registry = PartitionRegistry("n1")
    with LevelDBStore(tmp_path / "partition-0") as store:
        registry.attach(0, store, Role.STANDBY, {"t": 1})
        registry.doubt_ends([0], 1_000, lapses=False)
        registry.doubt_ends(None, 3_000, lapses=True)
        [status] = registry.statuses()
        assert status.lag_unknown_since_ms == 1_000
        registry.trust_ends(0)
        assert registry.statuses()[0].lag_unknown_since_ms is None


def test_a_stall_doubt_lapses_after_its_time_an_attach_doubt_never() -> None:
    stall, attach = Doubt(1_000, 50.0, lapses=True), Doubt(1_000, 50.0, lapses=False)
    assert not stall.lapsed(50.0 + STALL_DOUBT_S / 2)
    assert stall.lapsed(50.0 + STALL_DOUBT_S)
    assert not attach.lapsed(50.0 + 1_000 * STALL_DOUBT_S)


def test_the_publisher_sees_a_stall_from_the_gap_between_its_heartbeats(tmp_path: Path) -> None:
    config = node_config("127.0.0.1:9", tmp_path, "n1", "g")  # heartbeats of 250 ms
    registry = PartitionRegistry("n1")
    publisher = MembershipPublisher(config, registry)
    assert publisher.stalled_since_ms(100.0) is None  # no heartbeat before
    with LevelDBStore(tmp_path / "partition-0") as store:
        registry.attach(0, store, Role.ACTIVE, {"t": 3})
        publisher._judge_stall(100.0, 40_000)
        publisher._judge_stall(101.0, 41_000)  # a slow heartbeat on a busy machine
        assert registry.statuses()[0].lag_unknown_since_ms is None
        publisher._judge_stall(111.0, 51_000)  # ten seconds of SIGSTOP
        assert registry.statuses()[0].lag_unknown_since_ms == 41_000
