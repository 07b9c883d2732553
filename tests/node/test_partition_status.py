"""A copy's status as reads report it (`extensions.freshness`) follows every change of the
copy at once, though reads between changes reuse the status built last."""

from __future__ import annotations

from pathlib import Path

from node.changelog.partitions import PartitionRegistry
from node.errors import AWAITING_GROUP
from node.storage.store import LevelDBStore
from schema import PartitionStatus, Role


def _read(registry: PartitionRegistry) -> PartitionStatus:
    found = registry.read(0, lambda store: None)
    assert found is not None
    return found[1]


def test_the_status_a_read_reports_follows_each_change_of_the_copy(tmp_path: Path) -> None:
    registry = PartitionRegistry("n1")
    with LevelDBStore(tmp_path / "partition-0") as store:
        registry.attach(0, store, Role.ACTIVE, {"t": 10})
        assert (_read(registry).applied_offset, _read(registry).lag) == (10, 0)
        registry.record_end(0, "t", 15)
        assert _read(registry).lag == 5
        registry.record_applied(0, {"t": 12})
        assert (_read(registry).applied_offset, _read(registry).lag) == (12, 3)
        registry.set_broker_unreachable_since(1_000)
        assert _read(registry).lag_unknown_since_ms == 1_000
        registry.set_broker_unreachable_since(None)
        assert _read(registry).lag_unknown_since_ms is None
        registry.record_store_error(0, "disk full")
        assert _read(registry).store_error == "disk full"
        registry.record_store_error(0, None)
        assert _read(registry).store_error is None
        registry.doubt_ends([0], 2_000, lapses=False)
        assert _read(registry).lag_unknown_since_ms == 2_000
        registry.trust_ends(0)
        assert _read(registry).lag_unknown_since_ms is None
        registry.hold([0], 3_000)
        assert _read(registry).lag_unknown_since_ms == 3_000
        registry.record_restore(0, 4, 9, restoring=True)
        [restoring] = registry.statuses()
        assert (restoring.restoring, restoring.restore_done, restoring.restore_total) == (
            True,
            4,
            9,
        )
        registry.restart_restore(0, {"t": 0})
        [restarted] = registry.statuses()
        assert (restarted.applied_offset, restarted.restore_done) == (0, 0)
        registry.detach(0)


def test_a_copy_below_what_a_copy_here_had_applied_answers_no_read_until_it_catches_up(
    tmp_path: Path,
) -> None:
    """A node never answers older than it did: a copy let go at offset 10 leaves a floor, and
    a later copy of the partition (here from another store at 5) is read only once it has
    applied as much, or when a read proved it current."""
    registry = PartitionRegistry("n1")
    with (
        LevelDBStore(tmp_path / "first") as first,
        LevelDBStore(tmp_path / "second") as second,
    ):
        registry.attach(0, first, Role.STANDBY, {"t": 10})
        assert registry.holds(0, (Role.STANDBY,))
        registry.detach(0)
        registry.attach(0, second, Role.STANDBY, {"t": 5})
        assert not registry.holds(0, (Role.STANDBY,))
        assert registry.read(0, lambda store: None, (Role.STANDBY,)) is None
        assert registry.holds(0, (Role.STANDBY,), proved={"t": 5})
        registry.record_applied(0, {"t": 10})
        assert registry.holds(0, (Role.STANDBY,))
        registry.restart_restore(0, {"t": 0})  # rebuilt empty: restoring, and below the floor
        registry.record_restore(0, 3, 10, restoring=False)
        assert not registry.holds(0, (Role.STANDBY,))
        registry.record_applied(0, {"t": 10})
        assert registry.holds(0, (Role.STANDBY,))
        registry.detach(0)


def test_a_read_reports_positions_that_cover_a_batch_being_written(tmp_path: Path) -> None:
    """The materializer announces a batch (`applying`) before writing it to the store and
    records it applied after: a read in between may see its rows, so its positions (the
    read token's) already cover it, while its status still says what is applied."""
    registry = PartitionRegistry("n1")
    with LevelDBStore(tmp_path / "partition-0") as store:
        registry.attach(0, store, Role.ACTIVE, {"t": 10, "u": 4})
        found = registry.read_at(0, lambda store: None)
        assert found is not None and found[2] == {"t": 10, "u": 4}
        registry.applying(0, {"t": 12})
        found = registry.read_at(0, lambda store: None)
        assert found is not None
        assert (found[1].applied_offset, found[2]) == (14, {"t": 12, "u": 4})
        assert found[3] == {"t": 10, "u": 4}  # what the store held: the batch is not in yet
        registry.record_applied(0, {"t": 12, "u": 5})
        found = registry.read_at(0, lambda store: None)
        assert found is not None and found[2] == {"t": 12, "u": 5}


def test_a_copy_held_through_a_broker_outage_serves_until_the_broker_answers_again(
    tmp_path: Path,
) -> None:
    """Held through an outage, an ACTIVE copy answers while nobody can have taken its
    partition over; once the broker answers, the group may have given it to another node,
    so it answers only proved reads (NOT_OWNER, AWAITING_GROUP) until it is handed over."""
    registry = PartitionRegistry("n1")
    with LevelDBStore(tmp_path / "partition-0") as store:
        registry.attach(0, store, Role.ACTIVE, {"t": 10})
        registry.hold([0], 3_000)  # the group session was lost before the heartbeats noticed
        assert registry.broker_unreachable_since_ms == 3_000
        assert registry.read(0, lambda store: "held") is not None
        assert registry.refusal_reason(0) is None
        registry.set_broker_unreachable_since(None)  # the membership heartbeats answered
        assert registry.read(0, lambda store: "held") is None
        assert registry.refusal_reason(0) == AWAITING_GROUP
        assert registry.read(0, lambda store: "proved", proved={"t": 10}) is not None
        registry.set_broker_unreachable_since(4_000)  # away again: nobody can take it now
        assert registry.read(0, lambda store: "held") is not None
        registry.detach(0)
        registry.attach(0, store, Role.STANDBY, {"t": 10})  # the group assigned elsewhere
        registry.set_broker_unreachable_since(None)
        assert registry.read(0, lambda store: "standby", roles=(Role.STANDBY,)) is not None
        registry.detach(0)
