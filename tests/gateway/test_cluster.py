"""`cluster` shows each node's lifecycle state and each partition copy's role, offsets,
lag and restore progress, as membership reports them."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.cluster.routing import RoutingFeed, build_routing_table
from runtime.clock import wall_clock_ms
from schema import MemberRecord, NodeState, PartitionStatus, Role
from tests.gateway.fakes import Model, fake_nodes, post_query, running_gateway

P = 2
QUERY = """{ cluster { nodes { id state active standby }
    partitions { partition node role appliedOffset endOffset lag
                 restoring restoreDone restoreTotal storeError } } }"""


def _record(node_id: str, state: NodeState, *partitions: PartitionStatus) -> MemberRecord:
    return MemberRecord(node_id, f"http://{node_id}.test", state, wall_clock_ms(), 1000, partitions)


def test_cluster_shows_states_roles_lag_and_restore_progress() -> None:
    members = {
        "n0": _record(
            "n0",
            NodeState.RESTORING,
            PartitionStatus(
                0, Role.ACTIVE, 40, 100, restoring=True, restore_done=30, restore_total=90
            ),
            PartitionStatus(1, Role.STANDBY, 70, 75, store_error="disk full: cannot write"),
        ),
        "n1": _record("n1", NodeState.RUNNING, PartitionStatus(1, Role.ACTIVE, 75, 75)),
    }
    feed = RoutingFeed(build_routing_table(members, {"word_counts": P}, wall_clock_ms()))
    nodes = fake_nodes(Model.of_counts({}), P, 2)

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, feed=feed) as http:
            return (await post_query(http, QUERY))[1]

    body = asyncio.run(scenario())
    assert "errors" not in body, body
    cluster = body["data"]["cluster"]
    assert cluster["nodes"] == [
        {"id": "n0", "state": "RESTORING", "active": [0], "standby": [1]},
        {"id": "n1", "state": "RUNNING", "active": [1], "standby": []},
    ]
    assert cluster["partitions"] == [
        {
            "partition": 0,
            "node": "n0",
            "role": "ACTIVE",
            "appliedOffset": "40",
            "endOffset": "100",
            "lag": "60",
            "restoring": True,
            "restoreDone": 30,
            "restoreTotal": 90,
            "storeError": None,
        },
        {
            "partition": 1,
            "node": "n0",
            "role": "STANDBY",
            "appliedOffset": "70",
            "endOffset": "75",
            "lag": "5",
            "restoring": False,
            "restoreDone": 0,
            "restoreTotal": 0,
            "storeError": "disk full: cannot write",
        },
        {
            "partition": 1,
            "node": "n1",
            "role": "ACTIVE",
            "appliedOffset": "75",
            "endOffset": "75",
            "lag": "0",
            "restoring": False,
            "restoreDone": 0,
            "restoreTotal": 0,
            "storeError": None,
        },
    ]


def test_offsets_and_lag_past_32_bits_are_longs() -> None:
    far = 2**40  # records of a partition a 32-bit Int cannot count
    members = {
        "n0": _record("n0", NodeState.RUNNING, PartitionStatus(0, Role.ACTIVE, far, far + 2**33))
    }
    feed = RoutingFeed(build_routing_table(members, {"word_counts": P}, wall_clock_ms()))
    nodes = fake_nodes(Model.of_counts({}), P, 1)
    query = "{ cluster { partitions { partition appliedOffset endOffset lag } } }"

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, feed=feed) as http:
            return (await post_query(http, query))[1]

    body = asyncio.run(scenario())
    assert "errors" not in body, body
    assert body["data"]["cluster"]["partitions"] == [
        {
            "partition": 0,
            "appliedOffset": str(far),
            "endOffset": str(far + 2**33),
            "lag": str(2**33),
        }
    ]
