"""The planner against fake nodes: grouping per node, top-N merge, retries, partial results."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.cluster.routing import Liveness, RoutingFeed, RoutingTable, build_routing_table
from gateway.config import GatewayConfig
from gateway.model.rows import Ranked, ranked_count
from gateway.nodes.transport import HttpxCaller
from gateway.nodes.upstream import Upstream
from gateway.reads.planner import Planner
from runtime.clock import wall_clock_ms
from schema import NodeState, partition_for
from tests.gateway.fakes import (
    FULL,
    WORDS,
    FakeNode,
    Model,
    client_for,
    fake_nodes,
    feed_for,
    member,
    post_query,
    running_gateway,
    split,
    table_for,
    top_truth,
)
from tooling.broker import free_port

P = 6
COUNTS = {f"w{i:02d}": (i * 7) % 11 for i in range(60)}  # many ties


def three_nodes(counts: Mapping[str, int] = COUNTS, partitions: int = P) -> list[FakeNode]:
    return fake_nodes(Model.of_counts(counts), partitions, 3)


def unavailable(body: dict[str, Any]) -> dict[int, dict[str, Any]]:
    errors = [
        e for e in body.get("errors", []) if e["extensions"]["code"] == "PARTITION_UNAVAILABLE"
    ]
    return {e["extensions"]["partition"]: e for e in errors}


def test_multi_key_lookup_is_one_request_per_node_in_input_order() -> None:
    nodes = three_nodes()
    words = [
        "w05",
        "nope",
        "w17",
        "w05",
        "w42",
        "w00",
        "zzz",
        *[f"w{i:02d}" for i in range(30, 50)],
    ]

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P) as http:
            status, body = await post_query(
                http, "query($w: [String!]!) { wordCounts(words: $w) { word count } }", {"w": words}
            )
            assert status == 200
            return body

    body = asyncio.run(scenario())
    expected = [{"word": w, "count": COUNTS[w]} if w in COUNTS else None for w in words]
    assert body["data"]["wordCounts"] == expected
    assert "errors" not in body
    assert [n.requests for n in nodes] == [1, 1, 1]
    assert sorted(k for n in nodes for k in n.keys_asked) == sorted(set(words))


def test_lookups_of_one_request_share_the_node_requests() -> None:
    nodes = three_nodes()
    query = """{ a: wordCount(word: "w01") { count } b: wordCount(word: "w02") { count }
                 c: wordCounts(words: ["w03", "w04", "w05", "nope"]) { word } }"""

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P) as http:
            return (await post_query(http, query))[1]

    body = asyncio.run(scenario())
    assert body["data"]["a"] == {"count": COUNTS["w01"]}
    assert body["data"]["c"] == [{"word": "w03"}, {"word": "w04"}, {"word": "w05"}, None]
    assert all(n.requests <= 1 for n in nodes)
    assert sum(n.requests for n in nodes) == len({n.node_id for n in nodes if n.keys_asked})


def test_top_n_asks_every_partition_exactly_once_and_merges() -> None:
    nodes = three_nodes()

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P) as http:
            return (await post_query(http, "{ topWords(limit: 7) { word count } }"))[1]

    body = asyncio.run(scenario())
    assert body["data"]["topWords"] == top_truth(COUNTS, 7)
    assert sorted(p for n in nodes for p in n.partitions_read) == list(range(P))
    assert [n.requests for n in nodes] == [1, 1, 1]
    fresh = body["extensions"]["freshness"]
    assert [(f["partition"], f["node"]) for f in fresh] == [(p, f"n{p % 3}") for p in range(P)]


def test_top_default_limit_is_ten() -> None:
    nodes = three_nodes()

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P) as http:
            return (await post_query(http, "{ topWords { word count } }"))[1]

    assert asyncio.run(scenario())["data"]["topWords"] == top_truth(COUNTS, 10)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counts=st.dictionaries(
        st.text(alphabet="abcdxyzé", min_size=1, max_size=4), st.integers(0, 9), max_size=60
    ),
    partitions=st.integers(1, 8),
    node_count=st.sampled_from([1, 3]),
    limit=st.integers(1, 40),
)
def test_top_n_equals_sorted_truth(
    counts: dict[str, int], partitions: int, node_count: int, limit: int
) -> None:
    nodes = fake_nodes(Model.of_counts(counts), partitions, node_count)

    async def scenario() -> list[Ranked]:
        async with client_for(nodes) as client:
            planner = Planner(
                feed_for(nodes, partitions), Upstream(HttpxCaller(client)), GatewayConfig()
            )
            result = await planner.top(WORDS, limit, planner.deadline())
            assert result.failures == {}
            return result.rows

    rows = asyncio.run(scenario())
    assert [{"word": r.key, "count": ranked_count(r)} for r in rows] == top_truth(counts, limit)
    assert sorted(p for n in nodes for p in n.partitions_read) == list(range(partitions))


def test_a_node_that_times_out_gives_a_partial_result() -> None:
    nodes = three_nodes()
    timeouts = 0

    def hang(request: httpx.Request) -> httpx.Response:
        nonlocal timeouts
        timeouts += 1
        raise httpx.ReadTimeout("node did not answer", request=request)

    dead = nodes[2]
    config = GatewayConfig(timeout_ms=2000, retries=2, backoff_ms=10)

    async def scenario() -> dict[str, Any]:
        extra = {dead.url(): httpx.MockTransport(hang)}
        async with running_gateway(nodes[:2], P, config, feed_for(nodes, P), extra) as http:
            return (await post_query(http, "{ topWords(limit: 100) { word count } }"))[1]

    body = asyncio.run(scenario())
    missing = unavailable(body)
    assert sorted(missing) == sorted(dead.held) == [2, 5]
    for partition, error in missing.items():
        assert error["extensions"]["node"] == "n2"
        assert error["extensions"]["reason"] == "TIMEOUT"
        assert error["path"] == ["topWords"]
        assert f"partition {partition}" in error["message"] and "n2" in error["message"]
    readable = {
        k: c for p, kc in split(COUNTS, P).items() if p not in dead.held for k, c in kc.items()
    }
    assert body["data"]["topWords"] == top_truth(readable, 100)
    assert timeouts == 3  # first try and two retries


def test_a_hanging_node_is_cut_at_the_deadline() -> None:
    nodes = three_nodes()
    nodes[1].delay_s = 30
    config = GatewayConfig(timeout_ms=300)

    async def scenario() -> tuple[dict[str, Any], float]:
        async with running_gateway(nodes, P, config) as http:
            started = time.monotonic()
            body = (
                await post_query(
                    http, '{ wordCounts(words: ["w00","w01","w02","w03"]) { word count } }'
                )
            )[1]
            return body, time.monotonic() - started

    body, elapsed = asyncio.run(scenario())
    assert elapsed < 2.0
    hung = unavailable(body)
    slow_parts = sorted({partition_for(w, P) for w in ["w00", "w01", "w02", "w03"]} & nodes[1].held)
    assert sorted(hung) == slow_parts
    for word, row in zip(["w00", "w01", "w02", "w03"], body["data"]["wordCounts"], strict=True):
        if partition_for(word, P) in nodes[1].held:
            assert row is None
            assert any(repr(word) in e["message"] for e in hung.values())
        else:
            assert row == {"word": word, "count": COUNTS[word]}


def test_not_owner_refreshes_routing_and_retries() -> None:
    nodes = three_nodes()
    a, b, c = nodes
    # stale table: a still claims partition 1, which b holds now
    stale = table_for(
        {
            "n0": (a.url(), [*a.held, 1]),
            "n1": (b.url(), sorted(b.held - {1})),
            "n2": (c.url(), c.held),
        },
        P,
    )
    fresh = table_for({n.node_id: (n.url(), n.held) for n in nodes}, P)
    feed = feed_for(nodes, P)
    feed.publish(stale)

    def refresh() -> None:  # membership catches up when asked to
        if feed.current.claims != fresh.claims:
            feed.publish(fresh)

    feed.on_refresh(refresh)
    # The refresh, not the backoff, unblocks the retry: a 20 s backoff would show as > 10 s.
    config = GatewayConfig(backoff_ms=20_000, timeout_ms=30_000)

    async def scenario() -> tuple[dict[str, Any], float]:
        async with running_gateway(nodes, P, config, feed) as http:
            started = time.monotonic()
            body = (await post_query(http, "{ topWords(limit: 60) { word count } }"))[1]
            return body, time.monotonic() - started

    body, elapsed = asyncio.run(scenario())
    assert "errors" not in body
    assert body["data"]["topWords"] == top_truth(COUNTS, 60)
    assert elapsed < 10.0
    assert sorted(p for n in nodes for p in n.partitions_read) == list(range(P))


def test_not_owner_falls_back_to_another_claimant_without_a_new_table() -> None:
    nodes = three_nodes()
    a, b, _ = nodes
    claims = {n.node_id: (n.url(), sorted(n.held)) for n in nodes}
    claims["n0"] = (a.url(), [*sorted(a.held), *sorted(b.held)])  # a's claim is newer...
    feed = feed_for(nodes, P)
    feed.publish(table_for(claims, P))
    words = ["w01", "w02", "w03", "w04", "w05", "w06", "w07"]

    async def scenario() -> dict[str, Any]:
        config = GatewayConfig(backoff_ms=5)
        async with running_gateway(nodes, P, config, feed) as http:
            return (
                await post_query(
                    http,
                    "query($w:[String!]!){ wordCounts(words: $w) { word count } }",
                    {"w": words},
                )
            )[1]

    body = asyncio.run(scenario())
    assert "errors" not in body
    assert body["data"]["wordCounts"] == [{"word": w, "count": COUNTS[w]} for w in words]


def test_refused_connections_are_retried_then_reported() -> None:
    nodes = three_nodes()
    refused = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    claims = {n.node_id: (n.url(), n.held) for n in nodes}
    claims["n1"] = (refused, nodes[1].held)
    config = GatewayConfig(retries=2, backoff_ms=5)

    async def scenario() -> dict[str, Any]:
        # the refused node is reached over real loopback TCP
        extra = {refused: httpx.AsyncHTTPTransport()}
        async with running_gateway(
            nodes, P, config, RoutingFeed(table_for(claims, P)), extra
        ) as http:
            return (await post_query(http, "{ topWords(limit: 100) { word count } }"))[1]

    body = asyncio.run(scenario())
    missing = unavailable(body)
    assert sorted(missing) == sorted(nodes[1].held)
    for error in missing.values():
        assert error["extensions"]["reason"] == "NODE_UNAVAILABLE"
        assert error["extensions"]["node"] == "n1"
        assert "ConnectError" in error["message"]
    assert nodes[1].requests == 0


def test_partitions_no_node_ever_held_are_never_assigned_and_name_no_node() -> None:
    nodes = three_nodes()
    feed = feed_for(nodes[:2], P)  # nobody claims n2's partitions
    config = GatewayConfig(retries=1, backoff_ms=5)

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, config, feed) as http:
            return (
                await post_query(
                    http, '{ wordCount(word: "w05") { count } topWords(limit: 3) { word } }'
                )
            )[1]

    body = asyncio.run(scenario())
    missing = [e for e in body["errors"] if e["path"] == ["topWords"]]
    assert sorted(e["extensions"]["partition"] for e in missing) == sorted(nodes[2].held)
    assert all(e["extensions"]["node"] is None for e in missing)
    assert all(e["extensions"]["reason"] == "NEVER_ASSIGNED" for e in missing)
    assert all("no node has held it" in e["message"] for e in missing)
    assert nodes[2].requests == 0


def test_partitions_whose_owner_left_name_it_and_when_it_was_last_seen() -> None:
    nodes = three_nodes()
    beat = 1_700_000_000_000
    owned = {n.node_id: (n.url(), n.held) for n in nodes}
    feed = RoutingFeed(table_for(owned, P, heartbeat_ms=beat))
    config = GatewayConfig(retries=1, backoff_ms=5)

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, config, feed) as http:
            # n2's record is gone (it left, or its record was pruned after it died)
            survivors = {k: v for k, v in owned.items() if k != "n2"}
            feed.publish(table_for(survivors, P, heartbeat_ms=beat + 5000))
            return (await post_query(http, "{ topWords(limit: 3) { word } }"))[1]

    body = asyncio.run(scenario())
    missing = unavailable(body)
    assert sorted(missing) == sorted(nodes[2].held)
    for error in missing.values():
        assert error["extensions"]["reason"] == "UNASSIGNED"
        assert error["extensions"]["node"] == "n2"
        assert error["extensions"]["lastSeen"] == "2023-11-14T22:13:20.000+00:00"
        assert "node n2 last did" in error["message"]
        assert "on node n2" not in error["message"]  # it was not asked
    assert nodes[2].requests == 0


def _rebalancing_table(nodes: list[FakeNode], owned: list[FakeNode], beat: int) -> RoutingTable:
    """n2's partitions without an owner while n0 and n1 rebalance (n2's record is gone)."""
    members = {
        n.node_id: member(n.node_id, n.url(), n.held if n in owned else (), beat, 1000,
                          NodeState.REBALANCING)
        for n in nodes[:2]
    }  # fmt: skip
    return build_routing_table(members, {v.name: P for v in FULL}, beat)


def test_past_its_retries_a_read_waits_for_an_owner_while_a_rebalance_hands_one_over() -> None:
    """The rebalance after a broker outage takes longer than the retries: the partitions
    it is handing over are answered once a table names their owner, within the deadline."""
    nodes = three_nodes()
    owned = {n.node_id: (n.url(), n.held) for n in nodes}
    beat = wall_clock_ms()
    feed = RoutingFeed(table_for(owned, P, heartbeat_ms=beat))
    config = GatewayConfig(retries=1, backoff_ms=5, timeout_ms=10_000)

    refreshes = [0]
    feed.on_refresh(lambda: refreshes.__setitem__(0, refreshes[0] + 1))

    async def past_the_retries() -> None:
        """Until the read asked for a table more often than its retries allow."""
        deadline = time.monotonic() + 5.0
        while refreshes[0] <= config.retries + 1:
            assert time.monotonic() < deadline, f"{refreshes[0]} refreshes in 5 s"
            await asyncio.sleep(0.01)  # a poll of the condition above

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, config, feed) as http:
            feed.publish(_rebalancing_table(nodes, nodes[:2], beat + 1))
            asked = asyncio.create_task(post_query(http, "{ topWords(limit: 60) { word count } }"))
            await past_the_retries()
            assert not asked.done(), "the read gave up while the rebalance was under way"
            feed.publish(table_for(owned, P, heartbeat_ms=beat + 2))  # n2's are handed over
            return (await asked)[1]

    body = asyncio.run(scenario())
    assert "errors" not in body, body
    assert body["data"]["topWords"] == top_truth(COUNTS, 60)


def test_past_its_retries_a_read_waits_for_an_owner_while_routing_is_stale() -> None:
    """After a broker outage the nodes rejoin the group before the gateway's membership
    reader hears from the broker: n2 already gave up its partitions, but the stale table
    still names it. The read waits for a current table instead of failing them."""
    nodes = three_nodes()
    beat = wall_clock_ms()
    owned = {n.node_id: (n.url(), set(n.held)) for n in nodes}
    members = {
        node_id: member(node_id, url, parts, beat) for node_id, (url, parts) in owned.items()
    }
    counts = {v.name: P for v in FULL}
    stale = build_routing_table(members, counts, beat + 1, Liveness(beat, stale_since_ms=beat))
    feed = RoutingFeed(stale)
    config = GatewayConfig(retries=1, backoff_ms=5, timeout_ms=10_000)
    given_up = set(nodes[2].held)
    nodes[2].held.clear()  # it answers NOT_OWNER for them now
    refreshes = [0]
    feed.on_refresh(lambda: refreshes.__setitem__(0, refreshes[0] + 1))

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, config, feed) as http:
            asked = asyncio.create_task(post_query(http, "{ topWords(limit: 60) { word count } }"))
            deadline = time.monotonic() + 5.0
            while refreshes[0] <= config.retries + 1:
                assert not asked.done(), "the read gave up while routing was stale"
                assert time.monotonic() < deadline, f"{refreshes[0]} refreshes in 5 s"
                await asyncio.sleep(0.01)  # a poll of the condition above
            nodes[0].held |= given_up  # the group gave n2's partitions to n0
            taken = {**owned, "n0": (nodes[0].url(), nodes[0].held), "n2": (nodes[2].url(), ())}
            feed.publish(table_for(taken, P, heartbeat_ms=beat + 2))
            return (await asked)[1]

    body = asyncio.run(scenario())
    assert "errors" not in body, body
    assert body["data"]["topWords"] == top_truth(COUNTS, 60)


def test_routing_tables_coming_fast_do_not_use_up_the_retries_before_their_backoffs() -> None:
    """While nodes rebalance, every heartbeat brings a newer table and ends a retry round
    early: the read still waits out its backoffs (200 + 400 + 800 ms here) for an owner.
    Here a newer table answers each of its first ten refreshes, more than its 3 retries."""
    nodes = three_nodes()
    owned = {n.node_id: (n.url(), n.held) for n in nodes}
    survivors = {k: v for k, v in owned.items() if k != "n2"}
    beat = wall_clock_ms()
    feed = RoutingFeed(table_for(survivors, P, heartbeat_ms=beat))
    heartbeats = 10
    refreshes = [0]

    def a_heartbeat() -> None:  # n2's partitions still unowned
        refreshes[0] += 1
        if refreshes[0] <= heartbeats:
            feed.publish(table_for(survivors, P, heartbeat_ms=beat + refreshes[0]))

    feed.on_refresh(a_heartbeat)
    # the cache off: it would follow the partitions over the fake nodes' unresolvable URLs
    config = GatewayConfig(retries=3, backoff_ms=200, timeout_ms=10_000, cache=False)

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, config, feed) as http:
            asked = asyncio.create_task(post_query(http, "{ topWords(limit: 60) { word count } }"))
            deadline = time.monotonic() + 5.0
            while refreshes[0] <= heartbeats:
                assert not asked.done(), f"the read gave up after {refreshes[0]} tables"
                assert time.monotonic() < deadline, f"{refreshes[0]} refreshes in 5 s"
                await asyncio.sleep(0.01)  # a poll of the condition above
            assert not asked.done(), "the read gave up before its backoffs' time"
            feed.publish(table_for(owned, P, heartbeat_ms=beat + 100))  # n2's are handed over
            return (await asked)[1]

    body = asyncio.run(scenario())
    assert "errors" not in body, body
    assert body["data"]["topWords"] == top_truth(COUNTS, 60)


def test_past_its_retries_a_read_of_a_partition_nobody_is_handed_fails_at_once() -> None:
    """Every node is RUNNING: no rebalance will give the partitions an owner."""
    nodes = three_nodes()
    owned = {n.node_id: (n.url(), n.held) for n in nodes}
    feed = RoutingFeed(table_for({k: v for k, v in owned.items() if k != "n2"}, P))
    config = GatewayConfig(retries=1, backoff_ms=5, timeout_ms=30_000)

    async def scenario() -> tuple[dict[str, Any], float]:
        async with running_gateway(nodes, P, config, feed) as http:
            started = time.monotonic()
            body = (await post_query(http, "{ topWords(limit: 3) { word } }"))[1]
            return body, time.monotonic() - started

    body, elapsed = asyncio.run(scenario())
    assert sorted(unavailable(body)) == sorted(nodes[2].held)
    assert elapsed < 15.0, f"the read waited {elapsed:.1f} s of its 30 s deadline"
