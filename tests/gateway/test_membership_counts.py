"""The membership reader while a view's changelog topic is missing: the partition counts
are asked between polls, one short metadata request a round, so membership records are
read and the broker probed meanwhile; a missing topic is warned about once. The broker is
a fake that answers (or, "down", waits out each request's timeout) as librdkafka does."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import ClusterMetadata, PartitionMetadata, TopicMetadata

from gateway.cluster import membership
from gateway.cluster.membership import MembershipReader
from gateway.cluster.routing import RoutingFeed, RoutingTable
from runtime.clock import wall_clock_ms
from schema import MEMBERS_TOPIC, View, ViewKind, encode_member
from tests.gateway.fakes import member
from tooling.processes import wait_until_async

REFUSED = "127.0.0.1:1"  # nothing listens: the fake broker below answers instead
READY = View("ready", "ready_in", ViewKind.COUNT, "w", "W", "w", "ws", "tw")
LATE = View("late", "late_in", ViewKind.COUNT, "w", "W", "w", "ws", "tw")


def unanswered() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused"))


def topic_of(name: str, partitions: int) -> TopicMetadata:
    topic = TopicMetadata()
    topic.topic = name
    topic.partitions = {p: PartitionMetadata() for p in range(partitions)}
    return topic


class FakeBroker:
    """The consumer the reader makes, over a broker holding `topics` and one membership
    record; while `down`, every request waits out its timeout unanswered."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics
        self.down = threading.Event()
        self.metadata_requests = 0
        self.polls = 0
        beat = wall_clock_ms()
        self._records = [encode_member(member("a", "http://a.test", [0, 1], beat, 100))]

    def _wait(self, timeout: float) -> None:
        threading.Event().wait(min(timeout, 10.0))

    def get_watermark_offsets(self, _partition: TopicPartition, timeout: float) -> tuple[int, int]:
        if self.down.is_set():
            self._wait(timeout)
            raise unanswered()
        return 0, 1

    def offsets_for_times(self, _partitions: list[TopicPartition], timeout: float) -> list[object]:
        return [TopicPartition(MEMBERS_TOPIC, 0, 0)]

    def assign(self, _partitions: list[TopicPartition]) -> None:
        pass

    def consume(self, _count: int, timeout: float) -> list[Message]:
        self.polls += 1
        if self.down.is_set() or not self._records:
            self._wait(timeout)
            return []
        value, self._records = self._records[0], []
        return [Message(topic=MEMBERS_TOPIC, partition=0, offset=0, key=b"a", value=value)]

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        self.metadata_requests += 1
        if self.down.is_set():
            self._wait(timeout)
            raise unanswered()
        metadata = ClusterMetadata()
        metadata.topics = {name: topic_of(name, p) for name, p in self.topics.items()}
        return metadata

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def quick_probes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(membership, "_ANSWER_TIMEOUT_S", 0.2)
    yield


def reader_over(
    broker: FakeBroker, feed: RoutingFeed, monkeypatch: pytest.MonkeyPatch
) -> MembershipReader:
    reader = MembershipReader(REFUSED, feed, lookback_ms=60_000, catalogue=[READY, LATE])
    monkeypatch.setattr(reader, "_consumer", lambda: broker)
    return reader


async def wait_for(
    feed: RoutingFeed, condition: Callable[[RoutingTable], bool], timeout_s: float = 5
) -> RoutingTable:
    async def satisfied() -> RoutingTable | None:
        return feed.current if condition(feed.current) else None

    return await wait_until_async(satisfied, timeout_s, lambda: f"a table: {feed.current}", 0.02)


async def until(condition: Callable[[], bool], what: str) -> None:
    async def holds() -> bool:
        return condition()

    await wait_until_async(holds, 5, what, 0.02)


def test_a_missing_changelog_topic_holds_up_neither_membership_nor_its_probes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broker = FakeBroker({MEMBERS_TOPIC: 1, READY.changelog_topic: 3})
    feed = RoutingFeed()
    reader = reader_over(broker, feed, monkeypatch)

    async def scenario() -> None:
        reader.start(asyncio.get_running_loop())
        try:
            table = await wait_for(feed, lambda t: "a" in t.nodes and bool(t.partition_counts))
            assert dict(table.partition_counts) == {READY.name: 3}
            broker.down.set()  # and LATE's topic still missing: asked every round, unanswered
            table = await wait_for(feed, lambda t: t.stale_since_ms is not None)
            assert "a" in table.nodes
            asked = broker.metadata_requests
            await until(lambda: broker.metadata_requests > asked + 1, "two more unanswered asks")
        finally:
            await asyncio.to_thread(reader.stop)

    with caplog.at_level(logging.DEBUG, membership.log.name):
        asyncio.run(scenario())
    failed = [r for r in caplog.records if "changelog topics' metadata failed" in r.getMessage()]
    # said once at warning (the views stay ROUTING_NOT_READY), its retries at debug
    assert [r.levelno for r in failed][:2] == [logging.WARNING, logging.DEBUG]


def test_a_missing_changelog_topic_is_warned_about_once_and_counted_once_created(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(membership, "_RETRY_S", 0.01)
    broker = FakeBroker({MEMBERS_TOPIC: 1, READY.changelog_topic: 3})
    feed = RoutingFeed()
    reader = reader_over(broker, feed, monkeypatch)

    async def scenario() -> None:
        reader.start(asyncio.get_running_loop())
        try:
            await wait_for(feed, lambda t: "a" in t.nodes and READY.name in t.partition_counts)
            await until(lambda: broker.metadata_requests >= 5, "5 rounds of counts")
            broker.topics[LATE.changelog_topic] = 3  # `statefed topics` run at last
            table = await wait_for(feed, lambda t: LATE.name in t.partition_counts)
            assert dict(table.partition_counts) == {READY.name: 3, LATE.name: 3}
            asked, polls = broker.metadata_requests, broker.polls
            await until(lambda: broker.polls >= polls + 5, "5 more polls")
            assert broker.metadata_requests == asked  # every count known: no more asked
        finally:
            await asyncio.to_thread(reader.stop)

    with caplog.at_level(logging.DEBUG, "gateway.cluster.membership"):
        asyncio.run(scenario())
    said = [
        (r.levelno, r.getMessage().split(":")[0])
        for r in caplog.records
        if r.name == "gateway.cluster.membership" and r.levelno >= logging.INFO
    ]
    assert said == [
        (logging.WARNING, f"view {LATE.name}"),
        (logging.INFO, f"view {LATE.name}"),
    ]
