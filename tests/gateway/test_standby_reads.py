"""Bounded-staleness reads: when a partition's active copy cannot answer, the gateway reads
a standby copy within `max_lag` and says so in extensions.freshness; with `max_lag` 0 only
one the node proves current for the read (`readCurrent`), or else none."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from gateway.cluster.routing import RoutingFeed, build_routing_table
from gateway.config import GatewayConfig
from runtime.clock import wall_clock_ms
from schema import MemberRecord, NodeState, PartitionStatus, Role, partition_for
from tests.gateway.fakes import FakeNode, Model, codes, post_query, running_gateway

P = 4
COUNTS = {f"w{i}": i + 1 for i in range(40)}
ALL = sorted(COUNTS)
STANDBY_LAG = 3
LOOKUP = "query($ws: [String!]!, $lag: Int) { wordCounts(words: $ws, maxLag: $lag) { word count } }"


class StandbyNode(FakeNode):
    """A fake node that also holds `standby` partitions, read only when a request asks, and
    proved current for a `readCurrent` read only when `current`."""

    def __init__(self, node_id: str, active: set[int], standby: set[int], current: bool) -> None:
        super().__init__(node_id, Model.of_counts(COUNTS), active, P)
        self.active, self.standby, self.current = set(active), set(standby), current
        self.proofs: list[dict[str, Any]] = []
        self.calls = 0

    async def _graphql(self, request: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        extensions = request.get("extensions") or {}
        asked = extensions.get("readStandby") is True
        if "readCurrent" in extensions:
            self.proofs.append(extensions["readCurrent"])
            asked = asked and self.current
        self.held = self.active | (self.standby if asked else set())
        doc = await super()._graphql(request)
        for entry in doc["extensions"]["freshness"]:
            if entry["partition"] in self.standby:
                entry.update(role="STANDBY", lag=STANDBY_LAG)
        return doc


def record(node_id: str, active: set[int], standby: frozenset[int] = frozenset()) -> MemberRecord:
    copies = [PartitionStatus(p, Role.ACTIVE, 10, 10) for p in sorted(active)]
    copies += [PartitionStatus(p, Role.STANDBY, 10, 10 + STANDBY_LAG) for p in sorted(standby)]
    url = f"http://{node_id}.test"
    return MemberRecord(node_id, url, NodeState.RUNNING, wall_clock_ms(), 1000, tuple(copies))


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("refused", request=request)


TOP = "query($lag: Int) { topWords(limit: 5, maxLag: $lag) { word count } }"


def lookup(
    max_lag: int,
    n0_in_membership: bool,
    argument: int | None = None,
    query: str = LOOKUP,
    n1: StandbyNode | None = None,
) -> dict[str, Any]:
    """n0 (active 0, 1) is down; n1 is active for 2, 3 and standby for 0, 1 (not current,
    unless `n1` says otherwise). `max_lag` is the gateway's default, `argument` the query's
    `maxLag`."""
    n1 = n1 or StandbyNode("n1", {2, 3}, {0, 1}, current=False)
    members = {"n1": record("n1", {2, 3}, frozenset({0, 1}))}
    if n0_in_membership:
        members["n0"] = record("n0", {0, 1})
    feed = RoutingFeed(build_routing_table(members, {"word_counts": P}, wall_clock_ms()))
    config = GatewayConfig(max_lag=max_lag, retries=1, backoff_ms=1)
    extra: dict[str, httpx.AsyncBaseTransport] = {"http://n0.test": httpx.MockTransport(refuse)}

    async def scenario() -> dict[str, Any]:
        async with running_gateway([n1], P, config=config, feed=feed, extra=extra) as http:
            variables: dict[str, Any] = {"lag": argument}
            if query == LOOKUP:
                variables["ws"] = ALL
            return (await post_query(http, query, variables))[1]

    return asyncio.run(scenario())


@pytest.mark.parametrize("n0_in_membership", [True, False])
def test_a_standby_within_max_lag_answers_for_the_failed_active(n0_in_membership: bool) -> None:
    body = lookup(max_lag=STANDBY_LAG, n0_in_membership=n0_in_membership)
    assert "errors" not in body, body
    assert body["data"]["wordCounts"] == [{"word": w, "count": COUNTS[w]} for w in ALL]
    freshness = {e["partition"]: e for e in body["extensions"]["freshness"]}
    assert {p: (e["node"], e["role"]) for p, e in freshness.items()} == {
        0: ("n1", "STANDBY"),
        1: ("n1", "STANDBY"),
        2: ("n1", "ACTIVE"),
        3: ("n1", "ACTIVE"),
    }
    assert freshness[0]["lag"] == STANDBY_LAG


def test_a_fan_out_reads_the_standby_too() -> None:
    body = lookup(max_lag=0, n0_in_membership=True, argument=STANDBY_LAG, query=TOP)
    assert "errors" not in body, body
    top = sorted(COUNTS.items(), key=lambda kc: -kc[1])[:5]
    assert body["data"]["topWords"] == [{"word": w, "count": c} for w, c in top]
    roles = {e["partition"]: e["role"] for e in body["extensions"]["freshness"]}
    assert roles == {0: "STANDBY", 1: "STANDBY", 2: "ACTIVE", 3: "ACTIVE"}


def test_the_query_may_allow_a_standby_the_default_does_not() -> None:
    body = lookup(max_lag=0, n0_in_membership=True, argument=STANDBY_LAG)
    assert "errors" not in body, body
    roles = {e["partition"]: e["role"] for e in body["extensions"]["freshness"]}
    assert roles == {0: "STANDBY", 1: "STANDBY", 2: "ACTIVE", 3: "ACTIVE"}


@pytest.mark.parametrize(
    ("max_lag", "argument"),
    [(0, None), (STANDBY_LAG - 1, None), (STANDBY_LAG, 0), (STANDBY_LAG, STANDBY_LAG - 1)],
)
def test_no_standby_read_beyond_max_lag(max_lag: int, argument: int | None) -> None:
    body = lookup(max_lag=max_lag, n0_in_membership=True, argument=argument)
    assert set(codes(body)) == {"PARTITION_UNAVAILABLE"}
    assert sorted(e["extensions"]["partition"] for e in body["errors"]) == [0, 1]
    rows = dict(zip(ALL, body["data"]["wordCounts"], strict=True))
    for word, row in rows.items():
        assert (row is None) == (partition_for(word, P) in (0, 1))
    assert all(e["role"] == "ACTIVE" for e in body["extensions"]["freshness"])


def test_with_max_lag_0_a_standby_answers_once_the_node_proves_it_current() -> None:
    n1 = StandbyNode("n1", {2, 3}, {0, 1}, current=True)
    body = lookup(max_lag=STANDBY_LAG, n0_in_membership=True, argument=0, n1=n1)
    assert "errors" not in body, body
    assert body["data"]["wordCounts"] == [{"word": w, "count": COUNTS[w]} for w in ALL]
    roles = {e["partition"]: e["role"] for e in body["extensions"]["freshness"]}
    assert roles == {0: "STANDBY", 1: "STANDBY", 2: "ACTIVE", 3: "ACTIVE"}
    # asked once per copy role, naming the view's changelog and the partitions, within the
    # deadline: the ACTIVE copies prove themselves too when a read accepts no lag
    proofs = sorted(n1.proofs, key=lambda p: p["partitions"])
    assert [(p["topic"], p["partitions"]) for p in proofs] == [
        ("statefed.word_counts.changelog", [0, 1]),
        ("statefed.word_counts.changelog", [2, 3]),
    ]
    assert all(0 < p["waitMs"] <= GatewayConfig().timeout_ms for p in proofs)


@pytest.mark.parametrize("max_lag", [0, STANDBY_LAG])
def test_a_restoring_owner_is_passed_over_for_a_standby_or_asked_to_prove_its_copy(
    max_lag: int,
) -> None:
    """n0 restores 0 and 1 (it answers them only proved current); n1's standby copies of them
    are STANDBY_LAG behind and cannot be proved current."""
    n0 = StandbyNode("n0", set(), {0, 1}, current=True)
    n1 = StandbyNode("n1", {2, 3}, {0, 1}, current=False)
    copies = tuple(PartitionStatus(p, Role.ACTIVE, 5, 10, restoring=True) for p in (0, 1))
    n0_record = MemberRecord(
        "n0", "http://n0.test", NodeState.RESTORING, wall_clock_ms(), 1000, copies
    )
    members = {"n0": n0_record, "n1": record("n1", {2, 3}, frozenset({0, 1}))}
    feed = RoutingFeed(build_routing_table(members, {"word_counts": P}, wall_clock_ms()))
    config = GatewayConfig(max_lag=max_lag, retries=2, backoff_ms=1)

    async def scenario() -> dict[str, Any]:
        async with running_gateway([n0, n1], P, config=config, feed=feed) as http:
            return (await post_query(http, LOOKUP, {"ws": ALL}))[1]

    body = asyncio.run(scenario())
    assert "errors" not in body, body
    assert body["data"]["wordCounts"] == [{"word": w, "count": COUNTS[w]} for w in ALL]
    answered_by = {e["partition"]: e["node"] for e in body["extensions"]["freshness"]}
    if max_lag:  # n1's copies are within the bound: n0 is not asked while it restores
        assert (answered_by[0], answered_by[1], n0.calls) == ("n1", "n1", 0)
    else:  # n1 cannot prove its copies current; n0, restoring, can
        assert (answered_by[0], answered_by[1]) == ("n0", "n0")
        assert sorted(p["partitions"] for p in n1.proofs) == [[0, 1], [2, 3]]
        assert [p["partitions"] for p in n0.proofs] == [[0, 1]]


@pytest.mark.parametrize("current", [True, False])
def test_a_partition_nobody_claims_is_read_from_a_restoring_standby_only_proved_current(
    current: bool,
) -> None:
    """n0 (active 0, 1) is gone; n1's copies of 0 and 1 are still restoring (handed over
    after n0 lost its group session, they may be behind): read only proved current."""
    n1 = StandbyNode("n1", {2, 3}, {0, 1}, current=current)
    copies = [PartitionStatus(p, Role.ACTIVE, 10, 10) for p in (2, 3)]
    copies += [PartitionStatus(p, Role.STANDBY, 5, 10, restoring=True) for p in (0, 1)]
    n1_record = MemberRecord(
        "n1", "http://n1.test", NodeState.RUNNING, wall_clock_ms(), 1000, tuple(copies)
    )
    feed = RoutingFeed(build_routing_table({"n1": n1_record}, {"word_counts": P}, wall_clock_ms()))
    config = GatewayConfig(max_lag=STANDBY_LAG, retries=1, backoff_ms=1)

    async def scenario() -> dict[str, Any]:
        async with running_gateway([n1], P, config=config, feed=feed) as http:
            return (await post_query(http, LOOKUP, {"ws": ALL}))[1]

    body = asyncio.run(scenario())
    assert n1.proofs and all(p["partitions"] == [0, 1] for p in n1.proofs)
    if current:
        assert "errors" not in body, body
        assert body["data"]["wordCounts"] == [{"word": w, "count": COUNTS[w]} for w in ALL]
        roles = {e["partition"]: e["role"] for e in body["extensions"]["freshness"]}
        assert roles == {0: "STANDBY", 1: "STANDBY", 2: "ACTIVE", 3: "ACTIVE"}
    else:  # not proved: its partitions fail, never answered from a copy that may be behind
        assert sorted(e["extensions"]["partition"] for e in body["errors"]) == [0, 1]
        assert set(codes(body)) == {"PARTITION_UNAVAILABLE"}
        answered = {r["word"] for r in body["data"]["wordCounts"] if r}
        assert answered == {w for w in ALL if partition_for(w, P) in (2, 3)}


SCAN = (
    "query($lag: Int) { allWordCounts(first: 100, maxLag: $lag) "
    "{ edges { node { word count } } pageInfo { hasNextPage endCursor } } }"
)


def test_a_scan_reads_the_standby_of_a_failed_partition() -> None:
    body = lookup(max_lag=STANDBY_LAG, n0_in_membership=True, query=SCAN)
    assert "errors" not in body, body
    page = body["data"]["allWordCounts"]
    in_order = sorted(ALL, key=str.encode)
    assert [e["node"] for e in page["edges"]] == [{"word": w, "count": COUNTS[w]} for w in in_order]
    assert not page["pageInfo"]["hasNextPage"]
    roles = {e["partition"]: e["role"] for e in body["extensions"]["freshness"]}
    assert roles == {0: "STANDBY", 1: "STANDBY", 2: "ACTIVE", 3: "ACTIVE"}


def test_a_scan_without_a_standby_in_reach_has_the_rest_and_a_cursor_to_resume() -> None:
    body = lookup(max_lag=STANDBY_LAG - 1, n0_in_membership=True, query=SCAN)
    failed = sorted(e["extensions"]["partition"] for e in body["errors"])
    assert failed == [0, 1]
    assert set(codes(body)) == {"PARTITION_UNAVAILABLE"}
    page = body["data"]["allWordCounts"]
    held = sorted((w for w in ALL if partition_for(w, P) in (2, 3)), key=str.encode)
    assert [e["node"]["word"] for e in page["edges"]] == held
    assert page["pageInfo"]["hasNextPage"] and page["pageInfo"]["endCursor"]
