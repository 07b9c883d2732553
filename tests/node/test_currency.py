"""Proving a copy current for a read that accepts no lag (`readCurrent`, node.reads.currency): end
offsets from fetches sent after the question (node.reads.endprobe) on the real broker, and the
node's answer or refusal."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.errors import MalformedRequestError
from node.reads.currency import MAX_WAIT_MS, ReadCurrent, parse_read_current
from node.reads.endprobe import EndProbe, EndUnknownError
from node.serve.graphql_http import GraphQLEndpoint
from node.storage.store import ChangeBatch, LevelDBStore
from node.subgraph.schema import build_subgraph
from runtime.topics import ensure_topics, statefed_topics
from schema import CountRow, Role, View, partition_for
from tests.node.harness import P, node_config, unique_count_view
from tooling.broker import KafkaBroker

pytestmark = pytest.mark.timeout(120)

POINT = "query($w: String!) { wordCount(word: $w) { count } }"


def test_read_current_names_a_topic_partitions_and_a_wait() -> None:
    spec = {"topic": "t", "partitions": [3, 1, 3], "waitMs": 50_000}
    assert parse_read_current({"readCurrent": spec}) == ReadCurrent("t", (1, 3), MAX_WAIT_MS)
    assert parse_read_current({"readStandby": True}) is None
    for bad in (
        "yes",
        {"topic": "t", "partitions": [1]},
        {"topic": "t", "partitions": [-1], "waitMs": 5},
        {"topic": "t", "partitions": [True], "waitMs": 5},
        {"topic": 1, "partitions": [1], "waitMs": 5},
        {"topic": "t", "partitions": [1], "waitMs": -1},
    ):
        with pytest.raises(MalformedRequestError, match="readCurrent"):
            parse_read_current({"readCurrent": bad})


def test_a_restoring_copy_is_read_only_when_proved_and_still_at_the_proved_offsets(
    tmp_path: Path,
) -> None:
    registry = PartitionRegistry("n1")
    with LevelDBStore(tmp_path / "partition-0") as store:
        registry.attach(0, store, Role.ACTIVE, {"t": 10}, restoring=True)
        assert registry.read(0, lambda s: "read") is None
        assert registry.read(0, lambda s: "read", proved={"t": 10}) is not None
        assert registry.read(0, lambda s: "read", proved={"t": 11}) is None
        assert registry.read(0, lambda s: "read", (Role.STANDBY,), {"t": 10}) is None


@pytest.fixture
def view(broker: KafkaBroker) -> View:
    view = unique_count_view()
    ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
    return view


@pytest.fixture
def config(broker: KafkaBroker, tmp_path: Path, view: View) -> NodeConfig:
    return node_config(broker.bootstrap, tmp_path, "n1", f"g-{view.name}")


@pytest.fixture
def probe(config: NodeConfig) -> Iterator[EndProbe]:
    probe = EndProbe(config)
    probe.start()
    yield probe
    probe.stop()


def produce(bootstrap: str, view: View, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(count):
        producer.produce(view.changelog_topic, key=b"k", value=b"%d" % n, partition=partition)
    assert producer.flush(15) == 0


def test_ends_include_every_record_acknowledged_before_the_question(
    broker: KafkaBroker, view: View, probe: EndProbe
) -> None:
    async def ask(partitions: dict[int, int]) -> dict[int, int]:
        return await probe.ends(view.changelog_topic, partitions, 5.0)

    written = {0: 0, 1: 0}
    for round_ in range(12):
        partition = round_ % 2
        produce(broker.bootstrap, view, partition, 1 + round_)
        written[partition] += 1 + round_
        # asked from the applied offset 0 and from the last end: the same end either way
        assert asyncio.run(ask({0: 0, 1: 0})) == written
        assert asyncio.run(ask(dict(written))) == written


def test_concurrent_questions_share_rounds_and_an_unknown_end_fails_in_time(
    broker: KafkaBroker, view: View, probe: EndProbe
) -> None:
    produce(broker.bootstrap, view, 2, 5)

    async def many() -> list[dict[int, int]]:
        asks = [probe.ends(view.changelog_topic, {2: 0}, 5.0) for _ in range(20)]
        return list(await asyncio.gather(*asks))

    before = probe.rounds
    assert asyncio.run(many()) == [{2: 5}] * 20
    assert probe.rounds - before < 20

    async def missing() -> dict[int, int]:  # partition P does not exist: no fetch answers it
        return await probe.ends(view.changelog_topic, {P: 0}, 0.5)

    with pytest.raises(EndUnknownError, match=view.changelog_topic):
        asyncio.run(missing())


@pytest.fixture
def standby(tmp_path: Path, view: View) -> Iterator[tuple[PartitionRegistry, str]]:
    """Node n1's registry holding one word's partition as a STANDBY copy at offset 3."""
    word = f"w-{uuid.uuid4().hex[:6]}"
    partition = partition_for(word, P)
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({view.changelog_topic: P})
    with LevelDBStore(tmp_path / "copy") as store:
        change = ChangeBatch(offsets={view.changelog_topic: 3})
        change.put_count(view.name, CountRow(word, 3, 0))
        store.apply(change)
        registry.attach(partition, store, Role.STANDBY, store.offsets())
        yield registry, word


def test_a_standby_copy_answers_a_read_current_only_when_it_has_the_end(
    broker: KafkaBroker, view: View, probe: EndProbe, standby: tuple[PartitionRegistry, str]
) -> None:
    registry, word = standby
    partition = partition_for(word, P)
    endpoint = GraphQLEndpoint(build_subgraph((view,)), registry)
    endpoint.probe = probe
    current = {"topic": view.changelog_topic, "partitions": [partition], "waitMs": 300}
    asked = {
        "query": POINT,
        "variables": {"w": word},
        "extensions": {"readStandby": True, "readCurrent": current},
    }

    async def post() -> dict[str, Any]:
        transport = httpx.ASGITransport(app=endpoint)
        async with httpx.AsyncClient(transport=transport, base_url="http://n1") as client:
            response = await client.post("/graphql", json=asked)
            assert response.status_code == 200, response.text
            document: dict[str, Any] = response.json()
            return document

    produce(broker.bootstrap, view, partition, 3)  # the log ends where the copy is
    answered = asyncio.run(post())
    assert answered.get("data") == {"wordCount": {"count": 3}}, answered
    assert answered["extensions"]["freshness"][0]["role"] == "STANDBY"

    produce(broker.bootstrap, view, partition, 1)  # a record the copy never applies
    refused = asyncio.run(post())
    (error,) = refused["errors"]
    assert error["extensions"]["code"] == "NOT_OWNER"
    assert error["extensions"]["reason"] == "NOT_CURRENT"
    assert error["extensions"]["partitions"] == [partition]
    assert "applied up to offset 3, not 4" in error["message"]

    endpoint.probe = None  # a node that cannot learn the end cannot prove anything
    assert asyncio.run(post())["errors"][0]["extensions"]["reason"] == "NOT_CURRENT"
