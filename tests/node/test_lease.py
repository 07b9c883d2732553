"""The node's lease (node.changelog.lease) on a clock of the test's: renewed by its holder's turns,
lapsed by a gap longer than its term, back only once confirmed by an answer to a request
sent after the lapse; and what a lapsed lease does to reads of the node's copies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from node.changelog.lease import Lease
from node.changelog.materializer import APPLY_STALL_S, LEASE_TERM_S, Materializer
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.serve.graphql_http import GraphQLEndpoint
from node.storage.store import ChangeBatch, LevelDBStore
from node.subgraph.schema import build_subgraph
from schema import WORD_COUNTS, CountRow, Role, partition_for
from tests.clocks import HandClock


def test_turns_within_the_term_keep_the_lease() -> None:
    clock = HandClock(100.0)
    lease = Lease(2.0, clock)
    for _ in range(10):
        clock.now += 1.9
        assert lease.renew() and lease.held()
    assert lease.lapses == 0 and lease.lapsed_for_s() is None


def test_a_gap_longer_than_the_term_lapses_it_before_the_holder_turns_again() -> None:
    clock = HandClock(100.0)
    lease = Lease(2.0, clock)
    clock.now += 2.5  # paused: the serving threads see it first
    assert not lease.held()
    assert lease.lapsed_for_s() == pytest.approx(0.5)
    assert not lease.renew()  # the holder's first turn after the pause
    clock.now += 1.0
    assert not lease.renew() and not lease.held()  # turns alone do not bring it back
    assert lease.lapses == 1


def test_only_an_answer_to_a_request_sent_after_the_lapse_confirms_it() -> None:
    clock = HandClock(100.0)
    lease = Lease(2.0, clock)
    sent_before = clock.now
    clock.now += 3.0
    assert not lease.renew()
    assert not lease.confirm(sent_before)  # sent before the pause: proves nothing after it
    assert not lease.held()
    sent_after = clock.now
    clock.now += 0.1
    assert lease.confirm(sent_after)
    assert lease.held() and lease.renew()
    assert lease.lapses == 1


def test_a_term_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Lease(0)


P = 2
WORDS = {"a": 1, "b": 2, "c": 3, "d": 4}
QUERY = "query($w: String!) { wordCount(word: $w) { count } }"


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[PartitionRegistry, Lease, HandClock]]:
    """Partition 0 ACTIVE and partition 1 STANDBY on a node whose lease runs on `HandClock`."""
    clock = HandClock(100.0)
    lease = Lease(2.0, clock)
    registry = PartitionRegistry("n1", lease)
    registry.set_partition_counts({WORD_COUNTS.changelog_topic: P})
    stores = []
    for partition, role in ((0, Role.ACTIVE), (1, Role.STANDBY)):
        store = LevelDBStore(tmp_path / f"partition-{partition}").open()
        change = ChangeBatch(offsets={WORD_COUNTS.changelog_topic: 10})
        for word, count in WORDS.items():
            if partition_for(word, P) == partition:
                change.put_count(WORD_COUNTS.name, CountRow(word, count, 0))
        store.apply(change)
        registry.attach(partition, store, role, store.offsets())
        stores.append(store)
    yield registry, lease, clock
    for partition in (0, 1):
        registry.detach(partition)
    for store in stores:
        store.close()


def _word_in(partition: int) -> str:
    return next(w for w in WORDS if partition_for(w, P) == partition)


def test_a_lapsed_lease_refuses_active_reads_with_its_reason_and_standby_reads_go_on(
    held: tuple[PartitionRegistry, Lease, HandClock],
) -> None:
    registry, lease, clock = held
    endpoint = GraphQLEndpoint(build_subgraph((WORD_COUNTS,)), registry)
    active = _word_in(0)
    assert endpoint.execute(QUERY, {"w": active})["data"] == {"wordCount": {"count": WORDS[active]}}
    clock.now += 2.5  # the node was paused longer than the term
    refused = endpoint.execute(QUERY, {"w": active})
    (error,) = refused["errors"]
    assert error["extensions"]["code"] == "NOT_OWNER"
    assert error["extensions"]["reason"] == "LEASE_LAPSED"
    assert "lease lapsed" in error["message"] and "confirms its assignment" in error["message"]
    assert not registry.holds(0)
    assert registry.holds(1, (Role.STANDBY,))  # a standby read never claimed ownership
    assert registry.read(0, lambda store: None, proved={WORD_COUNTS.changelog_topic: 10})
    assert not lease.renew()
    assert lease.confirm(clock.now)
    assert endpoint.execute(QUERY, {"w": active})["data"] == {"wordCount": {"count": WORDS[active]}}


def test_an_apply_loop_stuck_for_longer_than_its_bound_lets_the_lease_lapse(
    tmp_path: Path,
) -> None:
    """The watchdog renews the lease only while the materializer's apply loop turns: a loop
    stuck (its copies stopped applying) lapses it though the process runs on."""
    clock = HandClock(100.0)
    materializer = Materializer(
        NodeConfig(state_dir=tmp_path), [WORD_COUNTS], PartitionRegistry("n1")
    )
    materializer.lease = Lease(LEASE_TERM_S, clock)
    materializer._turned = clock.now
    for _ in range(int(APPLY_STALL_S * 10) + 5):  # turning: every tick renews it
        clock.now += 0.1
        materializer._turned = clock.now
        materializer.watch()
    assert materializer.lease.held() and materializer.lease.lapses == 0
    stuck_at = clock.now
    while clock.now - stuck_at <= APPLY_STALL_S + LEASE_TERM_S:  # stuck: the ticks go on
        clock.now += 0.1
        materializer.watch()
    assert not materializer.lease.held()
    materializer._turned = clock.now  # the loop turns again
    materializer.watch()
    assert materializer.lease.waiting() and materializer.lease.lapses == 1  # until confirmed
