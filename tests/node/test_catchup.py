"""Read-your-writes on the node: a request with `appliedAtLeast` is answered once the copies
it reads have applied the named changelog offsets, or refused with NOT_CAUGHT_UP when its
wait is over; copies of other roles and partitions not held do not hold it up."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from node.changelog.partitions import PartitionRegistry
from node.errors import MalformedRequestError, NotCaughtUpError
from node.reads.catchup import MAX_WAIT_MS, AppliedAtLeast, parse_applied_at_least, wait_applied
from node.serve.graphql_http import GraphQLEndpoint
from node.storage.store import ChangeBatch, LevelDBStore
from node.subgraph.schema import build_subgraph
from schema import WORD_COUNTS, CountRow, Role, partition_for

P = 4
TOPIC = WORD_COUNTS.changelog_topic
WORD = next(f"w{i}" for i in range(100) if partition_for(f"w{i}", P) == 0)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[PartitionRegistry]:
    """Node n1: partition 0 ACTIVE and partition 1 STANDBY, both applied up to offset 10."""
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({TOPIC: P})
    stores = []
    for partition, role in ((0, Role.ACTIVE), (1, Role.STANDBY)):
        store = LevelDBStore(tmp_path / f"partition-{partition}").open()
        change = ChangeBatch(offsets={TOPIC: 10})
        change.put_count(WORD_COUNTS.name, CountRow(WORD, 7, 0))
        store.apply(change)
        registry.attach(partition, store, role, store.offsets())
        stores.append(store)
    yield registry
    for store in stores:
        store.close()


def wanted(offsets: dict[int, int], wait_ms: int = 2000) -> AppliedAtLeast:
    return AppliedAtLeast(TOPIC, offsets, wait_ms)


def test_the_extension_is_parsed_or_refused() -> None:
    assert parse_applied_at_least(None) is None
    assert parse_applied_at_least({"readStandby": True}) is None
    spec = {"topic": TOPIC, "offsets": {"0": 12}, "waitMs": 100}
    assert parse_applied_at_least({"appliedAtLeast": spec}) == wanted({0: 12}, 100)
    for bad in (
        "yes",
        {**spec, "offsets": {"zero": 1}},
        {**spec, "offsets": {"0": "1"}},
        {**spec, "waitMs": -1},
        {**spec, "waitMs": True},
        {"offsets": {"0": 1}, "waitMs": 1},
    ):
        with pytest.raises(MalformedRequestError, match="appliedAtLeast"):
            parse_applied_at_least({"appliedAtLeast": bad})


def test_the_wait_is_capped_at_the_nodes_own_maximum() -> None:
    # the gateway sends what is left of its deadline, which may be minutes
    spec = {"topic": TOPIC, "offsets": {"0": 12}, "waitMs": 600_000}
    parsed = parse_applied_at_least({"appliedAtLeast": spec})
    assert parsed == wanted({0: 12}, MAX_WAIT_MS)
    assert MAX_WAIT_MS <= 10_000


def test_a_copy_already_there_answers_at_once(registry: PartitionRegistry) -> None:
    asyncio.run(wait_applied(registry, wanted({0: 10}, wait_ms=0), (Role.ACTIVE,)))


def test_the_wait_ends_when_the_copy_applies_the_offset(registry: PartitionRegistry) -> None:
    async def scenario() -> None:
        waiting = asyncio.create_task(wait_applied(registry, wanted({0: 12}), (Role.ACTIVE,)))
        await asyncio.sleep(0)  # let the wait begin before the materializer catches up
        assert not waiting.done()
        # the materializer applies from its own thread
        thread = threading.Thread(target=registry.record_applied, args=(0, {TOPIC: 12}))
        thread.start()
        await asyncio.wait_for(waiting, timeout=10)
        thread.join()

    asyncio.run(scenario())


def test_a_copy_behind_at_the_end_of_the_wait_is_named(registry: PartitionRegistry) -> None:
    with pytest.raises(NotCaughtUpError) as caught:
        asyncio.run(wait_applied(registry, wanted({0: 15}, wait_ms=20), (Role.ACTIVE,)))
    assert caught.value.graphql_extensions() == {
        "code": "NOT_CAUGHT_UP",
        "topic": TOPIC,
        "partition": 0,
        "applied": 10,
        "wanted": 15,
        "node": "n1",
    }


def test_only_held_copies_of_the_roles_read_are_waited_for(registry: PartitionRegistry) -> None:
    # partition 1 is a STANDBY copy (not read), partitions 2 and 3 are not held here
    far = {1: 99, 2: 99, 3: 99}
    asyncio.run(wait_applied(registry, wanted(far, wait_ms=0), (Role.ACTIVE,)))
    with pytest.raises(NotCaughtUpError):
        asyncio.run(wait_applied(registry, wanted(far, wait_ms=0), (Role.ACTIVE, Role.STANDBY)))


def test_the_endpoint_waits_or_answers_not_caught_up(registry: PartitionRegistry) -> None:
    endpoint = GraphQLEndpoint(build_subgraph((WORD_COUNTS,)), registry)

    async def post(offset: int) -> dict[str, Any]:
        body = {
            "query": "query($w: String!) { wordCount(word: $w) { count } }",
            "variables": {"w": WORD},
            "extensions": {
                "appliedAtLeast": {"topic": TOPIC, "offsets": {"0": offset}, "waitMs": 20}
            },
        }
        transport = httpx.ASGITransport(app=endpoint)
        async with httpx.AsyncClient(transport=transport, base_url="http://n1") as client:
            response = await client.post("/graphql", json=body)
            assert response.status_code == 200
            return response.json()

    assert asyncio.run(post(10))["data"] == {"wordCount": {"count": 7}}
    refused = asyncio.run(post(11))
    assert "data" not in refused
    assert refused["errors"][0]["extensions"]["code"] == "NOT_CAUGHT_UP"
    assert "partition 0 on node n1 has applied up to offset 10, not 11" in str(refused)
