"""Standby placement from membership, and reads of standby copies only when asked for."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Message

from node.changelog.materializer import Materializer
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.replication.standby import StandbyReplicator, standby_placement
from node.serve.graphql_http import GraphQLEndpoint
from node.storage.store import ChangeBatch, LevelDBStore
from node.subgraph.schema import build_subgraph
from runtime.trust import MEMBER_SIGNATURE_HEADER, ClusterSecret
from schema import (
    CATALOGUE,
    MEMBERS_TOPIC,
    WORD_COUNTS,
    CountRow,
    MemberRecord,
    NodeState,
    PartitionStatus,
    Role,
    encode_member,
    partition_for,
)

P = 4
NOW = 1_000_000


def member(node_id: str, active: list[int], heartbeat_ms: int = NOW) -> MemberRecord:
    statuses = tuple(PartitionStatus(p, Role.ACTIVE, 0, 0) for p in active)
    return MemberRecord(
        node_id, f"http://{node_id}", NodeState.RUNNING, heartbeat_ms, 1000, statuses
    )


def test_standbys_are_the_next_live_nodes_after_the_owner() -> None:
    members = {"a": member("a", [0, 1]), "b": member("b", [2]), "c": member("c", [3])}
    assert standby_placement(members, 1, NOW) == {0: ("b",), 1: ("b",), 2: ("c",), 3: ("a",)}
    assert standby_placement(members, 2, NOW)[3] == ("a", "b")
    # never more copies than other live nodes, never the owner itself
    assert standby_placement(members, 5, NOW)[0] == ("b", "c")
    assert standby_placement(members, 0, NOW) == {p: () for p in range(P)}


def test_dead_nodes_hold_nothing_and_one_node_has_no_standbys() -> None:
    dead = NOW - 3001  # older than 3 heartbeats
    members = {"a": member("a", [0, 1]), "b": member("b", [2, 3], heartbeat_ms=dead)}
    assert standby_placement(members, 1, NOW) == {0: (), 1: ()}
    # the caller counts itself as live before its own record arrives
    assert standby_placement(members, 1, NOW, live=["z"]) == {0: ("z",), 1: ("z",)}


def test_two_claimants_mid_rebalance_resolve_to_the_smaller_id() -> None:
    members = {"a": member("a", [0]), "b": member("b", [0]), "c": member("c", [])}
    assert standby_placement(members, 1, NOW) == {0: ("b",)}


def test_a_standby_resets_an_offset_retention_deleted_to_the_earliest_as_the_active_does() -> None:
    # a stored offset older than the changelog's first record (retention deleted it)
    # resets as the active copy's does: reset to the end, a standby would skip every
    # record in between, and the copy promoted from it would lack them for good
    config = NodeConfig()
    standby = StandbyReplicator(config, CATALOGUE, PartitionRegistry("a")).consumer_config()
    active = Materializer(config, CATALOGUE, PartitionRegistry("b")).consumer_config()
    assert standby["auto.offset.reset"] == active["auto.offset.reset"] == "earliest"


def test_unsigned_membership_records_are_warned_about_once_per_node_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A node without the secret publishes a record every heartbeat: one warning says so
    (as the gateway's), not one per heartbeat."""
    secret = ClusterSecret(base64.b64encode(os.urandom(48)))
    standby = StandbyReplicator(
        NodeConfig(node_id="n9"), [], PartitionRegistry("n9"), secret=secret
    )

    def unsigned(node_id: str, beat: int) -> Message:
        value = encode_member(member(node_id, [0], beat))
        return Message(
            topic=MEMBERS_TOPIC, partition=0, offset=0, key=node_id.encode(), value=value
        )

    def signed(node_id: str, beat: int) -> Message:
        value = encode_member(member(node_id, [0], beat))
        header = (MEMBER_SIGNATURE_HEADER, secret.sign_member(node_id, value, beat))
        return Message(
            topic=MEMBERS_TOPIC, partition=0, offset=0, key=node_id.encode(), value=value,
            headers=[header],
        )  # fmt: skip

    with caplog.at_level(logging.WARNING, "node.replication.standby"):
        for beat in range(NOW, NOW + 5000, 1000):
            standby._read_members([unsigned("rogue", beat), unsigned("stray", beat)])
        standby._read_members([signed("stray", NOW + 5000)])  # given the secret at last
        standby._read_members([unsigned("stray", NOW + 6000)])  # and without it again
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # once each, and once more for a node id that signed in between
    assert [sum(n in m for m in warned) for n in ("rogue", "stray")] == [1, 2]
    assert len(warned) == 3
    assert set(standby._members) == {"stray"}


def test_another_nodes_clock_behind_this_ones_leaves_it_alive_for_placing_standbys() -> None:
    """Membership records are stamped by their nodes' clocks: b's, seconds behind a's,
    would make b dead to a, and a place no standby on it."""
    skew_ms = -3_500
    now = [NOW]
    standby = StandbyReplicator(
        NodeConfig(node_id="a"),
        [],
        PartitionRegistry("a"),
        wall_ms=lambda: now[0],
        monotonic=lambda: now[0] / 1000,
    )

    def record(node_id: str, active: list[int], beat: int) -> Message:
        value = encode_member(member(node_id, active, beat))
        return Message(
            topic=MEMBERS_TOPIC, partition=0, offset=0, key=node_id.encode(), value=value
        )

    for beat in range(NOW - 5_000, NOW + 1, 1_000):
        now[0] = beat + 20  # read as they come, 20 ms after
        standby._read_members([record("a", [0], beat), record("b", [1], beat + skew_ms)])
    assert standby_placement(standby._members, 1, now[0]) == {0: ("b",), 1: ("a",)}


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[GraphQLEndpoint]:
    """Node n1 with partition 0 ACTIVE and partition 1 STANDBY, one word in each."""
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({WORD_COUNTS.changelog_topic: P})
    stores = []
    for partition, role in ((0, Role.ACTIVE), (1, Role.STANDBY)):
        store = LevelDBStore(tmp_path / f"partition-{partition}").open()
        change = ChangeBatch(offsets={WORD_COUNTS.changelog_topic: 10})
        change.put_count(WORD_COUNTS.name, CountRow(WORD[partition], 7, 0))
        store.apply(change)
        registry.attach(partition, store, role, store.offsets())
        registry.record_end(partition, WORD_COUNTS.changelog_topic, 12)
        stores.append(store)
    yield GraphQLEndpoint(build_subgraph((WORD_COUNTS,)), registry)
    for store in stores:
        store.close()


WORD = {p: next(f"w{i}" for i in range(100) if partition_for(f"w{i}", P) == p) for p in (0, 1)}
POINT = "query($w: String!) { wordCount(word: $w) { count } }"


def test_standby_copies_answer_only_when_asked(endpoint: GraphQLEndpoint) -> None:
    refused = endpoint.execute(POINT, {"w": WORD[1]})
    assert refused["errors"][0]["extensions"]["code"] == "NOT_OWNER"
    standby = (Role.ACTIVE, Role.STANDBY)
    answered = endpoint.execute(POINT, {"w": WORD[1]}, roles=standby)
    assert answered["data"] == {"wordCount": {"count": 7}}
    assert answered["extensions"]["freshness"] == [
        {
            "partition": 1,
            "node": "n1",
            "role": "STANDBY",
            "appliedOffset": 10,
            "lag": 2,
            "positions": {WORD_COUNTS.changelog_topic: 10},
            "applied": {WORD_COUNTS.changelog_topic: 10},
        }
    ]
    top = endpoint.execute("{ topWords(limit: 5, partitions: [0, 1]) { word } }", roles=standby)
    assert [row["word"] for row in top["data"]["topWords"]] == sorted([WORD[0], WORD[1]])
    # the default top-N reads what the node holds ACTIVE, asked for standbys or not
    local = endpoint.execute("{ topWords(limit: 5) { word } }", roles=standby)
    assert local["data"]["topWords"] == [{"word": WORD[0]}]


def test_read_standby_is_a_request_extension(endpoint: GraphQLEndpoint) -> None:
    async def post(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        transport = httpx.ASGITransport(app=endpoint)
        async with httpx.AsyncClient(transport=transport, base_url="http://n1") as client:
            response = await client.post("/graphql", json=body)
            return response.status_code, response.json()

    asked: dict[str, Any] = {
        "query": POINT,
        "variables": {"w": WORD[1]},
        "extensions": {"readStandby": True},
    }
    status, body = asyncio.run(post(asked))
    assert (status, body["data"]) == (200, {"wordCount": {"count": 7}})
    status, body = asyncio.run(post({**asked, "extensions": {"readStandby": "yes"}}))
    assert status == 400 and "readStandby" in str(body["errors"])
