"""Hedged reads and suspect nodes, through the gateway app over fake nodes: an owner that has
not answered within its hedge delay is raced by a standby within maxLag, the first answer
of each partition wins and the slower call is cancelled; a node that missed heartbeats or
left calls unanswered is not asked (a standby answers at once, or the read fails at once)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import pytest

from gateway.cluster.routing import RoutingFeed, build_routing_table
from gateway.config import GatewayConfig
from gateway.nodes.hedging import NodeWatch
from runtime.clock import wall_clock_ms
from schema import READ_CURRENT, MemberRecord, NodeState, PartitionStatus, Role
from tests.gateway.fakes import FakeNode, Model, post_query, running_gateway, top_truth

P = 4
COUNTS = {f"w{i}": i + 1 for i in range(40)}
ALL = sorted(COUNTS)
STANDBY_LAG = 3
LOOKUP = "query($ws: [String!]!, $lag: Int) { wordCounts(words: $ws, maxLag: $lag) { word count } }"
TOP = "{ topWords(limit: 100) { word count } }"
# hedges after 100 ms for a node that has not answered yet (the max), 10 ms at least
HEDGED = GatewayConfig(hedge_min_ms=10, hedge_max_ms=100)
SLOW_S = 5.0  # a node that slow is never waited for: the tests end long before


class CopyNode(FakeNode):
    """A fake node with ACTIVE and STANDBY copies (the latter read only when a request asks
    for them), answering after `slow_s`; it notes when each request came, which asked for
    standby copies, and which were cancelled before the answer."""

    def __init__(
        self, node_id: str, active: Iterable[int], standby: Iterable[int] = (), slow_s: float = 0
    ) -> None:
        super().__init__(node_id, Model.of_counts(COUNTS), set(active), P)
        self.active, self.standby = set(active), set(standby)
        self.slow_s = slow_s
        self.asked_at: list[float] = []
        self.standby_asked_at: list[float] = []
        self.proofs_asked = 0  # standby reads that must be proved current (maxLag 0)
        self.cancelled = 0

    def record(self, heartbeat_ms: int | None = None) -> MemberRecord:
        copies = [PartitionStatus(p, Role.ACTIVE, 10, 10) for p in sorted(self.active)]
        copies += [
            PartitionStatus(p, Role.STANDBY, 10, 10 + STANDBY_LAG) for p in sorted(self.standby)
        ]
        beat = wall_clock_ms() if heartbeat_ms is None else heartbeat_ms
        return MemberRecord(self.node_id, self.url(), NodeState.RUNNING, beat, 1000, tuple(copies))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.asked_at.append(asyncio.get_running_loop().time())
        try:
            if self.slow_s:
                await asyncio.sleep(self.slow_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        await super().__call__(scope, receive, send)

    async def _graphql(self, request: dict[str, Any]) -> dict[str, Any]:
        asked = (request.get("extensions") or {}).get("readStandby") is True
        if asked:
            self.standby_asked_at.append(asyncio.get_running_loop().time())
        if READ_CURRENT in (request.get("extensions") or {}):
            self.proofs_asked += 1
        self.held = self.active | (self.standby if asked else set())
        doc = await super()._graphql(request)
        for entry in doc["extensions"]["freshness"]:
            if entry["partition"] in self.standby:
                entry.update(role="STANDBY", lag=STANDBY_LAG)
        return doc


def feed_of(nodes: Sequence[CopyNode], beats: dict[str, int] | None = None) -> RoutingFeed:
    now = wall_clock_ms()
    members = {n.node_id: n.record((beats or {}).get(n.node_id, now)) for n in nodes}
    return RoutingFeed(build_routing_table(members, {"word_counts": P}, now))


class Answered(NamedTuple):
    body: dict[str, Any]
    took: float  # seconds
    sent_at: float  # event-loop time, the clock of CopyNode's notes


def ask(
    nodes: Sequence[CopyNode],
    config: GatewayConfig,
    requests: Sequence[tuple[str, dict[str, Any]]],
    feed: RoutingFeed | None = None,
) -> list[Answered]:
    """Each request in turn through one gateway: its body, how long it took, when it went."""

    async def scenario() -> list[Answered]:
        loop = asyncio.get_running_loop()
        answers = []
        async with running_gateway(nodes, P, config, feed or feed_of(nodes)) as http:
            for query, variables in requests:
                sent_at = loop.time()
                body = (await post_query(http, query, variables))[1]
                answers.append(Answered(body, loop.time() - sent_at, sent_at))
        return answers

    return asyncio.run(scenario())


def copies(body: dict[str, Any]) -> dict[int, tuple[str, str]]:
    """partition -> (node, role) of the copy that answered it, from extensions.freshness."""
    entries = body["extensions"]["freshness"]
    found = {e["partition"]: (e["node"], e["role"]) for e in entries}
    assert len(found) == len(entries), f"a partition answered twice: {entries}"
    return found


def reasons(body: dict[str, Any]) -> dict[int, tuple[str, str]]:
    return {
        e["extensions"]["partition"]: (e["extensions"]["reason"], e["extensions"]["node"])
        for e in body.get("errors", [])
    }


def lookup_all(max_lag: int | None = None) -> tuple[str, dict[str, Any]]:
    return LOOKUP, {"ws": ALL, "lag": max_lag}


EVERY_ROW = [{"word": w, "count": COUNTS[w]} for w in ALL]


def test_a_slow_owner_is_raced_by_a_standby_after_its_delay_and_cancelled() -> None:
    n0 = CopyNode("n0", {0, 1}, slow_s=SLOW_S)
    n1 = CopyNode("n1", {2, 3}, {0, 1})
    [(body, took, sent_at)] = ask([n0, n1], HEDGED, [lookup_all()])
    assert "errors" not in body, body
    assert body["data"]["wordCounts"] == EVERY_ROW
    assert copies(body) == {
        0: ("n1", "STANDBY"),
        1: ("n1", "STANDBY"),
        2: ("n1", "ACTIVE"),
        3: ("n1", "ACTIVE"),
    }
    [hedge_asked] = n1.standby_asked_at
    assert hedge_asked - sent_at >= 0.1  # n0's delay: the max, as it never answered yet
    assert n0.cancelled == 1
    assert took < SLOW_S / 5


def test_an_owner_answering_within_its_delay_is_not_raced() -> None:
    n0 = CopyNode("n0", {0, 1})
    n1 = CopyNode("n1", {2, 3}, {0, 1})
    answers = ask([n0, n1], HEDGED, [lookup_all()] * 3)
    for body, *_ in answers:
        assert body["data"]["wordCounts"] == EVERY_ROW
        assert {role for _, role in copies(body).values()} == {"ACTIVE"}
    assert n1.standby_asked_at == []


def test_with_hedging_off_the_slow_owner_is_waited_for() -> None:
    n0 = CopyNode("n0", {0, 1}, slow_s=0.3)
    n1 = CopyNode("n1", {2, 3}, {0, 1})
    config = GatewayConfig(hedge=False, hedge_min_ms=10, hedge_max_ms=10)
    [(body, took, _)] = ask([n0, n1], config, [lookup_all()])
    assert body["data"]["wordCounts"] == EVERY_ROW
    assert copies(body)[0] == ("n0", "ACTIVE")
    assert took >= 0.3 and n1.standby_asked_at == [] and n0.cancelled == 0


@pytest.mark.parametrize("query", [TOP, LOOKUP])
def test_copies_that_both_answer_give_each_partition_once(query: str) -> None:
    """n0 (0, 1) answers after its hedge fired; by then n1's standby copy of 0 answered, and
    n2's of 1 is still slow: n0's answer counts for 1 only, and n2's call is cancelled."""
    n0 = CopyNode("n0", {0, 1}, slow_s=0.4)
    n1 = CopyNode("n1", {2, 3}, {0})
    n2 = CopyNode("n2", (), {1}, slow_s=SLOW_S)
    variables = {"ws": ALL, "lag": None} if query == LOOKUP else {}
    [(body, *_)] = ask([n0, n1, n2], HEDGED, [(query, variables)])
    assert "errors" not in body, body
    if query == TOP:
        assert body["data"]["topWords"] == top_truth(COUNTS, 100)
    else:
        assert body["data"]["wordCounts"] == EVERY_ROW
    assert copies(body) == {
        0: ("n1", "STANDBY"),
        1: ("n0", "ACTIVE"),
        2: ("n1", "ACTIVE"),
        3: ("n1", "ACTIVE"),
    }
    assert n2.cancelled == 1 and n0.cancelled == 0


def test_a_node_that_missed_heartbeats_is_not_asked() -> None:
    """n0's heartbeat is 2.5 intervals behind n1's: alive (under 3) but suspect."""
    n0 = CopyNode("n0", {0, 1}, slow_s=SLOW_S)
    n1 = CopyNode("n1", {2, 3}, {0, 1})
    beats = {"n0": wall_clock_ms() - 2500}
    requests = [lookup_all(), lookup_all(max_lag=0)]
    [standby, active_only] = ask([n0, n1], HEDGED, requests, feed_of([n0, n1], beats))
    assert standby.body["data"]["wordCounts"] == EVERY_ROW
    assert copies(standby.body)[0] == copies(standby.body)[1] == ("n1", "STANDBY")
    # maxLag 0: only a standby proved current may answer for n0 (readCurrent), and n0 is
    # not waited for; n1 proves its ACTIVE copies too (every copy does for maxLag 0)
    assert active_only.body["data"]["wordCounts"] == EVERY_ROW
    assert copies(active_only.body)[0] == copies(active_only.body)[1] == ("n1", "STANDBY")
    assert n1.proofs_asked == 2
    assert n0.asked_at == []


def test_a_node_that_leaves_calls_unanswered_fails_fast_once_suspect() -> None:
    """No other copy of n0's partitions: once suspect, they fail at once."""
    n0 = CopyNode("n0", {0, 1}, slow_s=SLOW_S)
    n1 = CopyNode("n1", {2, 3})
    # a deadline long enough that a fifth of it is no race on a loaded machine
    config = GatewayConfig(
        timeout_ms=3000, retries=0, suspect_calls=2, hedge_min_ms=10, hedge_max_ms=100
    )
    answers = ask([n0, n1], config, [lookup_all(max_lag=0)] * 3)
    assert [reasons(a.body)[0][0] for a in answers] == ["TIMEOUT", "TIMEOUT", "SUSPECT"]
    # not asked, so not waited for: the third answer comes well before the deadline (it
    # takes ~5 ms; half the deadline leaves room for a stalled CI machine, which once
    # took 0.9 s)
    assert len(n0.asked_at) == 2
    assert answers[2].took < config.timeout_s / 2


def test_a_suspect_node_s_partitions_go_straight_to_a_standby() -> None:
    n0 = CopyNode("n0", {0, 1}, slow_s=SLOW_S)
    n1 = CopyNode("n1", {2, 3}, {0, 1})
    config = GatewayConfig(suspect_calls=1, hedge_min_ms=10, hedge_max_ms=100)
    answers = ask([n0, n1], config, [lookup_all()] * 3)
    for body, *_ in answers:
        assert body["data"]["wordCounts"] == EVERY_ROW
        assert copies(body)[0] == ("n1", "STANDBY")
    # outraced once after waiting its delay: suspect, so not asked again (for 1 s)
    assert len(n0.asked_at) == 1 and n0.cancelled == 1


def suspects_in_health(
    nodes: Sequence[CopyNode],
    config: GatewayConfig,
    requests: Sequence[tuple[str, dict[str, Any]]],
    feed: RoutingFeed | None = None,
) -> dict[str, bool]:
    """node id -> `suspect` of the gateway's /health after `requests` were answered (the
    `cluster` field saying the same)."""

    async def scenario() -> dict[str, bool]:
        async with running_gateway(nodes, P, config, feed or feed_of(nodes)) as http:
            for query, variables in requests:
                await post_query(http, query, variables)
            health = (await http.get("/health")).json()
            cluster = (await post_query(http, "{ cluster { nodes { id suspect } } }"))[1]
        in_health = {node["id"]: node["suspect"] for node in health["nodes"]}
        in_cluster = {node["id"]: node["suspect"] for node in cluster["data"]["cluster"]["nodes"]}
        assert in_health == in_cluster
        return in_health

    return asyncio.run(scenario())


def test_health_and_cluster_name_the_nodes_reads_avoid() -> None:
    """A node suspect from calls left without an answer, or from missed heartbeats, is
    alive in /health and `cluster` (its heartbeats are recent) and `suspect`: what the
    reads do."""
    n0 = CopyNode("n0", {0, 1}, slow_s=SLOW_S)
    n1 = CopyNode("n1", {2, 3}, {0, 1})
    config = GatewayConfig(suspect_calls=1, hedge_min_ms=10, hedge_max_ms=100)
    assert suspects_in_health([n0, n1], config, []) == {"n0": False, "n1": False}
    assert suspects_in_health([n0, n1], config, [lookup_all()]) == {"n0": True, "n1": False}
    late = feed_of([n0, n1], {"n0": wall_clock_ms() - 2500})
    assert suspects_in_health([n0, n1], HEDGED, [], late) == {"n0": True, "n1": False}


# -- the watch alone: delays and suspicion over explicit times -----------------------------


def watch(**settings: Any) -> NodeWatch:
    return NodeWatch(GatewayConfig(**{"hedge_min_ms": 10, "hedge_max_ms": 400, **settings}))


def test_a_node_never_answered_gets_the_max_delay() -> None:
    assert watch().delay("n0") == 0.4


def test_the_delay_follows_the_latency_within_its_bounds() -> None:
    steady, fast, slow = watch(), watch(), watch()
    for _ in range(60):
        steady.answered("n0", 0.05)
        fast.answered("n0", 0.0005)
        slow.answered("n0", 3.0)
    assert 0.05 <= steady.delay("n0") < 0.06
    assert fast.delay("n0") == 0.01
    assert slow.delay("n0") == 0.4


def test_a_jittery_node_gets_a_longer_delay_than_a_steady_one() -> None:
    steady, jittery = watch(), watch()
    for i in range(60):
        steady.answered("n0", 0.05)
        jittery.answered("n0", 0.02 if i % 2 else 0.08)  # the same mean
    assert jittery.delay("n0") > steady.delay("n0") + 0.05


def test_waits_on_purpose_and_errors_are_no_samples() -> None:
    seen = watch()
    seen.answered("n0", 0.02)
    before = seen.delay("n0")
    seen.answered("n0", None)
    assert seen.delay("n0") == before


def test_unanswered_calls_in_a_row_make_a_node_suspect_for_a_while() -> None:
    seen = watch(suspect_calls=3, suspect_ms=1000)
    seen.unanswered("n0", 10.0)
    seen.unanswered("n0", 10.1)
    assert not seen.suspect("n0", 10.2)
    seen.unanswered("n0", 10.2)
    assert seen.suspect("n0", 10.2) and seen.suspect("n0", 11.1)
    assert not seen.suspect("n0", 11.2)  # asked again after suspect_ms
    seen.unanswered("n0", 11.3)  # and still not answering: suspect again at once
    assert seen.suspect("n0", 11.3)
    seen.answered("n0", None)
    assert not seen.suspect("n0", 11.3)
    seen.unanswered("n0", 11.4)
    assert not seen.suspect("n0", 11.4)  # an answer started the count over
    assert not seen.suspect("n1", 11.4)
