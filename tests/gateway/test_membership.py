"""The membership reader against a real Kafka broker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer

from gateway.cluster.membership import MembershipReader, find_start_offset
from gateway.cluster.routing import RoutingFeed, RoutingTable
from runtime.clock import wall_clock_ms
from runtime.topics import ensure_topics
from schema import MEMBERS_TOPIC, View, ViewKind, encode_member
from tests.gateway.fakes import member
from tooling.broker import KafkaBroker
from tooling.processes import wait_until_async


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_find_start_offset_finds_the_first_record_at_or_after_a_time(
    broker: KafkaBroker,
) -> None:
    topic = unique("gw_members_probe")
    ensure_topics(broker.bootstrap, {topic: 1})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    base = wall_clock_ms() - 100_000
    for i in range(30):
        producer.produce(topic, key=b"k", value=b"%d" % i, timestamp=base + i * 1000)
    assert producer.flush(10) == 0
    producer.close()
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": unique("gw"), "fetch.wait.max.ms": 10}
    )
    try:
        found = {
            target: find_start_offset(consumer, topic, base + target)
            for target in (-5000, 0, 1, 10_500, 11_000, 29_000, 29_001, 500_000)
        }
    finally:
        consumer.close()
    assert found == {
        -5000: 0,
        0: 0,
        1: 1,
        10_500: 11,
        11_000: 11,
        29_000: 29,
        29_001: 30,
        500_000: 30,
    }


def test_find_start_offset_of_an_empty_topic_is_zero(broker: KafkaBroker) -> None:
    topic = unique("gw_members_empty")
    ensure_topics(broker.bootstrap, {topic: 1})
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": unique("gw"), "fetch.wait.max.ms": 10}
    )
    try:
        assert find_start_offset(consumer, topic, wall_clock_ms()) == 0
    finally:
        consumer.close()


def claimants(table: RoutingTable, partition: int) -> list[str]:
    return [node.node_id for node in table.claims.get(partition, ())]


async def wait_for(
    feed: RoutingFeed, condition: Callable[[RoutingTable], bool], timeout_s: float = 20
) -> RoutingTable:
    """Poll the feed's tables until `condition` holds, failing after `timeout_s`."""

    async def satisfied() -> RoutingTable | None:
        if condition(feed.current):
            return feed.current
        await feed.refresh(feed.current.version, timeout_s=0.2)  # waits for a newer table
        return None

    return await wait_until_async(
        satisfied, timeout_s, lambda: f"a routing table satisfying the condition: {feed.current}", 0
    )


def test_reader_builds_routing_from_members_and_drops_tombstoned_nodes(
    broker: KafkaBroker,
) -> None:
    name = unique("gwt")
    view = View(name, f"{name}_in", ViewKind.COUNT, "word", "Word", "w", "ws", "tw")
    ensure_topics(broker.bootstrap, {MEMBERS_TOPIC: 1, view.changelog_topic: 5})
    a, b, dead = unique("node_a"), unique("node_b"), unique("node_dead")
    producer = Producer({"bootstrap.servers": broker.bootstrap})

    def publish(node_id: str, value: bytes | None) -> None:
        producer.produce(MEMBERS_TOPIC, key=node_id.encode(), value=value)
        producer.flush(10)

    # published before the reader starts: it must still be found (read from a few beats back)
    publish(a, encode_member(member(a, "http://127.0.0.1:1", [0, 1, 2], wall_clock_ms(), 60_000)))
    publish(dead, encode_member(member(dead, "http://127.0.0.1:3", [4], wall_clock_ms() - 5000)))

    async def scenario() -> None:
        feed = RoutingFeed()
        reader = MembershipReader(broker.bootstrap, feed, lookback_ms=10_000, catalogue=[view])
        reader.start(asyncio.get_running_loop())
        try:
            table = await wait_for(feed, lambda t: a in t.nodes and bool(t.partition_counts))
            assert table.partition_count(view) == 5  # from topic metadata
            # other tests share the members topic: look at our nodes' claims only
            assert all(a in claimants(table, p) for p in (0, 1, 2))
            assert dead not in table.nodes or not table.nodes[dead].alive
            assert dead not in claimants(table, 4)

            publish(b, encode_member(member(b, "http://127.0.0.1:2", [3], wall_clock_ms(), 60_000)))
            table = await wait_for(feed, lambda t: b in t.nodes)
            assert b in claimants(table, 3)
            assert table.nodes[b].url == "http://127.0.0.1:2"

            publish(a, None)
            table = await wait_for(feed, lambda t: a not in t.nodes)
            assert not any(a in claimants(table, p) for p in (0, 1, 2))
            assert b in table.nodes
            assert table.version > 1
        finally:
            await asyncio.to_thread(reader.stop)

    asyncio.run(scenario())
    publish(b, None)
    producer.close()


def test_a_nodes_record_of_the_same_millisecond_with_other_partitions_is_routed(
    broker: KafkaBroker,
) -> None:
    """A revoke can publish a node's records ACTIVE, then STANDBY, in one millisecond: the
    second one changes the routing although the node's heartbeat time does not."""
    topic, name, node = unique("gw_members_ms"), unique("gwm"), unique("node_a")
    view = View(name, f"{name}_in", ViewKind.COUNT, "word", "Word", "w", "ws", "tw")
    ensure_topics(broker.bootstrap, {topic: 1})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    beat = wall_clock_ms()

    def publish(active: list[int]) -> None:
        record = member(node, "http://127.0.0.1:1", active, beat, 60_000)
        producer.produce(topic, key=node.encode(), value=encode_member(record))
        producer.flush(10)

    async def scenario() -> None:
        feed = RoutingFeed()
        reader = MembershipReader(
            broker.bootstrap,
            feed,
            lookback_ms=10_000,
            catalogue=[view],
            partition_counts=lambda: {name: 2},
            topic=topic,
        )
        reader.start(asyncio.get_running_loop())
        try:
            publish([0, 1])
            await wait_for(feed, lambda t: claimants(t, 0) == [node])
            publish([1])
            table = await wait_for(feed, lambda t: claimants(t, 0) == [])
            assert claimants(table, 1) == [node]
        finally:
            await asyncio.to_thread(reader.stop)

    asyncio.run(scenario())
    producer.close()


def test_views_whose_partition_count_is_unknown_are_asked_again(broker: KafkaBroker) -> None:
    ready, late = (unique("gwr"), unique("gwl"))
    views = [View(n, f"{n}_in", ViewKind.COUNT, "w", "W", "w", "ws", "tw") for n in (ready, late)]
    ensure_topics(broker.bootstrap, {MEMBERS_TOPIC: 1})
    known = {ready: 3}  # what "metadata" knows so far; the late view's topic comes later

    async def scenario() -> None:
        feed = RoutingFeed()
        reader = MembershipReader(
            broker.bootstrap,
            feed,
            lookback_ms=10_000,
            catalogue=views,
            partition_counts=lambda: dict(known),
        )
        reader.start(asyncio.get_running_loop())
        try:
            table = await wait_for(feed, lambda t: ready in t.partition_counts)
            assert table.partition_count(views[0]) == 3
            assert late not in table.partition_counts
            known[late] = 2
            table = await wait_for(feed, lambda t: late in t.partition_counts)
            assert dict(table.partition_counts) == {ready: 3, late: 2}
        finally:
            await asyncio.to_thread(reader.stop)

    asyncio.run(scenario())


def test_a_broker_outage_keeps_the_routing_table_and_a_live_broker_does_not(
    tmp_path: Path,
) -> None:
    """Every node falls silent at once: while the broker does not answer (SIGSTOP), the
    table is kept and marked stale; once it answers, silence counts again, the outage's
    excepted. Time is the reader's injected clock, moved by the test."""
    view = View("gwo", "gwo_in", ViewKind.COUNT, "w", "W", "w", "ws", "tw")
    now = [wall_clock_ms()]
    with KafkaBroker(log_path=tmp_path / "broker.log") as broker:
        ensure_topics(broker.bootstrap, {MEMBERS_TOPIC: 1, view.changelog_topic: 2})
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        record = member("a", "http://127.0.0.1:1", [0, 1], now[0], interval_ms=1000)
        producer.produce(MEMBERS_TOPIC, key=b"a", value=encode_member(record))
        assert producer.flush(10) == 0

        async def scenario() -> None:
            feed = RoutingFeed()
            reader = MembershipReader(
                broker.bootstrap, feed, lookback_ms=60_000, catalogue=[view], clock=lambda: now[0]
            )
            reader.start(asyncio.get_running_loop())
            try:
                await wait_for(feed, lambda t: t.routable(2) == [0, 1])
                broker.pause()
                try:
                    now[0] += 20_000  # 20 heartbeats without news from anyone
                    table = await wait_for(feed, lambda t: t.stale_since_ms is not None)
                    assert table.stale_since_ms is not None
                    assert table.stale_since_ms <= record.heartbeat_ms + 1000
                    assert table.routable(2) == [0, 1] and table.nodes["a"].alive
                finally:
                    broker.resume()
                table = await wait_for(feed, lambda t: t.stale_since_ms is None)
                assert table.nodes["a"].alive  # the outage's silence is not counted
                now[0] += 5_000  # then 5 heartbeats of silence with a broker that answers
                table = await wait_for(feed, lambda t: not t.nodes["a"].alive)
                assert table.stale_since_ms is None and table.routable(2) == []
            finally:
                await asyncio.to_thread(reader.stop)

        asyncio.run(scenario())
        producer.close()
