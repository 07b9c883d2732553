"""Partitions a node gives up go on as STANDBY copies (the standby replicator adopts their
open stores): at once readable after a revoke, but restoring after the group session was
lost while the broker answers (the node stood still, or was cut off). Another node may
have applied more of those partitions meanwhile: a standby read of the lost copy could
answer older than what its new owner already gave (seen in the SIGSTOP chaos test).

The consumer callbacks are driven directly, with a stand-in consumer and handoff: losing a
session for real takes a frozen node and a group rebalance (tests/chaos)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaException, TopicPartition

from node.changelog.lease import Lease
from node.changelog.materializer import Materializer
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.storage.store import LevelDBStore, PartitionStore
from schema import WORD_COUNTS


class Handoff:
    """A standby replicator that adopts every store, noting whether it restores it."""

    def __init__(self) -> None:
        self.adopted: dict[int, bool] = {}

    def claim(self, partitions: set[int]) -> None:
        pass

    def release(self, partitions: set[int]) -> None:
        pass

    def adopt(self, partition: int, store: PartitionStore, restoring: bool) -> bool:
        self.adopted[partition] = restoring
        return True


class Consumer:
    """What the callbacks ask of the group consumer; `answers`: whether the broker does."""

    def __init__(self, answers: bool) -> None:
        self.answers = answers
        self.unassigned: list[TopicPartition] = []

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self.unassigned.extend(partitions)

    def list_topics(self, timeout: float) -> Any:
        if not self.answers:
            raise KafkaException("the broker does not answer")
        return None


def _holding(tmp_path: Path, partitions: list[int]) -> tuple[Materializer, Handoff, list[Any]]:
    """A Materializer applying `partitions` from open stores, and its handoff."""
    handoff = Handoff()
    config = NodeConfig(state_dir=tmp_path)
    registry = PartitionRegistry("n1")
    active = Materializer(config, [WORD_COUNTS], registry, handoff=handoff)
    stores = []
    for partition in partitions:
        store = LevelDBStore(tmp_path / f"partition-{partition}").open()
        active._stores[partition] = store
        stores.append(store)
    active._assigned = [TopicPartition(WORD_COUNTS.changelog_topic, p) for p in partitions]
    return active, handoff, stores


def _lost(partitions: list[int]) -> list[TopicPartition]:
    return [TopicPartition(WORD_COUNTS.changelog_topic, p) for p in partitions]


@pytest.mark.parametrize("how", ["revoked", "lost"])
def test_a_copy_given_up_is_adopted_restoring_only_when_its_session_was_lost(
    tmp_path: Path, how: str
) -> None:
    active, handoff, stores = _holding(tmp_path, [0, 1])
    consumer = Consumer(answers=True)
    try:
        if how == "revoked":
            active._on_revoke(cast(KafkaConsumer, consumer), _lost([0]))
        else:
            active._on_lost(cast(KafkaConsumer, consumer), _lost([0]))
        assert handoff.adopted == {0: how == "lost"}
        assert [tp.partition for tp in consumer.unassigned] == [0]
        assert sorted(active._stores) == [1]  # partition 0's store is the replicator's now
    finally:
        for store in stores:
            store.close()


def test_a_session_lost_while_the_broker_is_away_keeps_serving_as_active(
    tmp_path: Path,
) -> None:
    """Nobody can have taken the partitions over: nothing is handed over."""
    active, handoff, stores = _holding(tmp_path, [0])
    try:
        active._on_lost(cast(KafkaConsumer, Consumer(answers=False)), _lost([0]))
        assert handoff.adopted == {}
        assert sorted(active._stores) == [0]
    finally:
        for store in stores:
            store.close()


def test_a_session_lost_by_a_paused_node_is_given_up_whatever_the_broker_check_says(
    tmp_path: Path,
) -> None:
    """A node whose lease lapsed lost its session by standing still, not by a broker
    outage; its stale connections can make the broker check fail for a moment after the
    pause (seen in the chaos tests). Its copies are given up, restoring: another node may
    own them and have applied more."""
    active, handoff, stores = _holding(tmp_path, [0])
    clock = [100.0]
    active.lease = Lease(2.0, lambda: clock[0])
    clock[0] += 10.0  # paused for longer than the session
    assert not active.lease.renew()
    try:
        active._on_lost(cast(KafkaConsumer, Consumer(answers=False)), _lost([0]))
        assert handoff.adopted == {0: True}
        assert sorted(active._stores) == []
    finally:
        for store in stores:
            store.close()
