"""Windowed views through the gateway: a key's windows from its owner, the top of one window
merged from every partition, alignment and range checks, partial results."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import GatewayConfig
from gateway.model.rows import WindowCount
from gateway.model.timestamps import from_ms
from gateway.nodes.transport import HttpxCaller
from gateway.nodes.upstream import Upstream
from gateway.reads.planner import Planner
from schema import partition_for
from tests.gateway.fakes import (
    FULL,
    PER_MINUTE,
    Model,
    client_for,
    codes,
    fake_nodes,
    feed_for,
    post_query,
    running_gateway,
    to_iso,
)

P = 6
SIZE = 60_000
BASE = 28_333_333 * SIZE  # an aligned start in November 2023
HOSTS = [f"h{i}.example" for i in range(12)]
WINDOWS = {
    (host, BASE + w * SIZE): (i * 5 + w * 3) % 7 + 1
    for i, host in enumerate(HOSTS)
    for w in range(4)
    if (i + w) % 3
}


def model(windows: dict[tuple[str, int], int] = WINDOWS) -> Model:
    return Model(windows={PER_MINUTE.name: dict(windows)})


def run(node_count: int, query: str, variables: dict[str, Any] | None = None) -> Any:
    nodes = fake_nodes(model(), P, node_count, FULL)

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, catalogue=FULL) as http:
            status, body = await post_query(http, query, variables)
            assert status == 200
            return body

    return asyncio.run(scenario()), nodes


def expected_windows(host: str, since: int | None, until: int | None) -> list[dict[str, Any]]:
    return [
        {"host": host, "start": to_iso(s), "end": to_iso(s + SIZE), "count": c}
        for s, c in model().windows_of(PER_MINUTE, host, since, until)
    ]


def normalized(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with DateTime texts as UTC ISO-8601 with +00:00, as the gateway writes them."""
    return [
        {k: v.replace("Z", "+00:00") if k in ("start", "end") else v for k, v in r.items()}
        for r in rows
    ]


WINDOWS_QUERY = """query($h: String!, $f: DateTime, $t: DateTime) {
  hostAccessWindows(host: $h, from: $f, to: $t) { host start end count } }"""


@pytest.mark.parametrize("node_count", [1, 3])
@pytest.mark.parametrize(
    ("since", "until"),
    [
        (None, None),
        (BASE + SIZE, None),
        (None, BASE + 2 * SIZE),
        (BASE + SIZE, BASE + 3 * SIZE),
        (BASE + 1, BASE + 2 * SIZE + 1),  # mid-window bounds: from <= start < to
        (BASE + SIZE, BASE + SIZE),
    ],
)
def test_windows_of_a_key_come_from_its_owner_in_time_order(
    node_count: int, since: int | None, until: int | None
) -> None:
    host = "h1.example"
    variables = {
        "h": host,
        "f": None if since is None else to_iso(since),
        "t": None if until is None else to_iso(until),
    }
    body, nodes = run(node_count, WINDOWS_QUERY, variables)
    assert "errors" not in body
    assert body["data"]["hostAccessWindows"] == normalized(expected_windows(host, since, until))
    owner = partition_for(host, P)
    assert [n.requests for n in nodes] == [int(owner in n.held) for n in nodes]
    assert [f["partition"] for f in body["extensions"]["freshness"]] == [owner]


def test_windows_of_an_unknown_key_are_empty() -> None:
    body, _ = run(3, WINDOWS_QUERY, {"h": "nope.example"})
    assert body == {"data": {"hostAccessWindows": []}, "extensions": body["extensions"]}


def test_sub_millisecond_and_pre_epoch_bounds_select_the_same_windows() -> None:
    host = "h2.example"
    # from just after BASE excludes BASE's window; a `to` before 1970 selects nothing
    after_base = from_ms(BASE).isoformat().replace("+00:00", ".000001+00:00")
    body, _ = run(1, WINDOWS_QUERY, {"h": host, "f": after_base})
    assert body["data"]["hostAccessWindows"] == normalized(expected_windows(host, BASE + 1, None))
    body, _ = run(1, WINDOWS_QUERY, {"h": host, "f": "1960-01-01T00:00:00Z"})
    assert body["data"]["hostAccessWindows"] == normalized(expected_windows(host, None, None))
    body, _ = run(1, WINDOWS_QUERY, {"h": host, "t": "1969-12-31T23:59:59+02:00"})
    assert body["data"]["hostAccessWindows"] == []


def test_offsets_other_than_utc_are_converted() -> None:
    host = "h4.example"
    since = from_ms(BASE + SIZE).astimezone().isoformat()  # the machine's local offset
    body, _ = run(1, WINDOWS_QUERY, {"h": host, "f": since, "t": "2100-01-01T01:00:00+01:00"})
    assert body["data"]["hostAccessWindows"] == normalized(
        expected_windows(host, BASE + SIZE, None)
    )
    assert all(w["start"].endswith("+00:00") for w in body["data"]["hostAccessWindows"])


TOP_QUERY = """query($l: Int!, $s: DateTime!) {
  topHostsPerMinute(limit: $l, window: {start: $s}) { host start end count } }"""


@pytest.mark.parametrize("node_count", [1, 3])
def test_top_of_a_window_asks_every_partition_once(node_count: int) -> None:
    start = BASE + 2 * SIZE
    body, nodes = run(node_count, TOP_QUERY, {"l": 5, "s": to_iso(start)})
    assert "errors" not in body
    expected = [
        {"host": k, "start": to_iso(start), "end": to_iso(start + SIZE), "count": c}
        for k, c in model().top(PER_MINUTE, 5, start)
    ]
    assert body["data"]["topHostsPerMinute"] == normalized(expected)
    assert sorted(p for n in nodes for p in n.partitions_read) == list(range(P))
    assert [n.requests for n in nodes] == [1] * node_count
    assert sorted(f["partition"] for f in body["extensions"]["freshness"]) == list(range(P))


def test_top_limit_defaults_to_ten() -> None:
    query = "query($s: DateTime!) { topHostsPerMinute(window: {start: $s}) { host count } }"
    body, _ = run(3, query, {"s": to_iso(BASE)})
    assert [(r["host"], r["count"]) for r in body["data"]["topHostsPerMinute"]] == [
        (k, c) for k, c in model().top(PER_MINUTE, 10, BASE)
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    windows=st.dictionaries(
        st.tuples(st.text(alphabet="abxyz.é", min_size=1, max_size=4), st.integers(0, 3)),
        st.integers(1, 9),
        max_size=60,
    ),
    partitions=st.integers(1, 8),
    node_count=st.sampled_from([1, 3]),
    limit=st.integers(1, 40),
    window=st.integers(0, 3),
)
def test_windowed_top_equals_the_model(
    windows: dict[tuple[str, int], int],
    partitions: int,
    node_count: int,
    limit: int,
    window: int,
) -> None:
    truth = model({(k, BASE + w * SIZE): c for (k, w), c in windows.items()})
    nodes = fake_nodes(truth, partitions, node_count, FULL)
    start = from_ms(BASE + window * SIZE)

    async def scenario() -> list[Any]:
        async with client_for(nodes) as client:
            planner = Planner(
                feed_for(nodes, partitions), Upstream(HttpxCaller(client)), GatewayConfig(), FULL
            )
            result = await planner.top(PER_MINUTE, limit, planner.deadline(), start)
            assert result.failures == {}
            return result.rows

    rows = asyncio.run(scenario())
    end = from_ms(BASE + (window + 1) * SIZE)
    assert rows == [
        WindowCount(k, start, end, c) for k, c in truth.top(PER_MINUTE, limit, BASE + window * SIZE)
    ]
    assert sorted(p for n in nodes for p in n.partitions_read) == list(range(partitions))
    assert all(n.requests == 1 for n in nodes if n.held)


BAD = [
    (TOP_QUERY, {"l": 3, "s": to_iso(BASE + 1)}, "BAD_USER_INPUT"),  # not aligned
    (TOP_QUERY, {"l": 3, "s": from_ms(BASE).isoformat()[:-6] + ".5+00:00"}, "BAD_USER_INPUT"),
    (TOP_QUERY, {"l": 3, "s": "2023-11-14T22:00:00"}, "BAD_USER_INPUT"),  # no offset
    (TOP_QUERY, {"l": 3, "s": "1969-12-31T23:59:00Z"}, "BAD_USER_INPUT"),  # before 1970
    (TOP_QUERY, {"l": 0, "s": to_iso(BASE)}, "BAD_USER_INPUT"),
    (TOP_QUERY, {"l": 1001, "s": to_iso(BASE)}, "BAD_USER_INPUT"),
    (TOP_QUERY, {"l": 3, "s": "yesterday"}, "BAD_USER_INPUT"),
    (TOP_QUERY, {"l": 3}, "BAD_USER_INPUT"),
    ("{ topHostsPerMinute(limit: 3) { host } }", None, "GRAPHQL_VALIDATION_FAILED"),
    ('{ topHostsPerMinute(window: {start: "soon"}) { host } }', None, "GRAPHQL_VALIDATION_FAILED"),
    (WINDOWS_QUERY, {"h": ""}, "BAD_USER_INPUT"),
    (WINDOWS_QUERY, {"h": "a", "f": to_iso(BASE + 1), "t": to_iso(BASE)}, "BAD_USER_INPUT"),
    (WINDOWS_QUERY, {"h": "a", "t": "2023-11-14T22:00:00"}, "BAD_USER_INPUT"),
    ('{ hostAccessWindows(host: "a", from: 5) { count } }', None, "GRAPHQL_VALIDATION_FAILED"),
]


@pytest.mark.parametrize(("query", "variables", "code"), BAD)
def test_bad_windows_and_ranges_are_errors_with_codes(
    query: str, variables: dict[str, Any] | None, code: str
) -> None:
    body, nodes = run(3, query, variables)
    assert codes(body) == [code]
    assert not any((body.get("data") or {}).values())
    assert sum(n.requests for n in nodes) == 0


SCAN_QUERY = """query($o: WindowScanOrder!, $sf: DateTime, $st: DateTime, $w: WindowInput,
  $n: Int, $a: String, $x: String! = "") {
  allHostAccessWindows(order: $o, startFrom: $sf, startTo: $st, window: $w, first: $n,
                       after: $a, prefix: $x) {
    edges { node { host start count } }
    pageInfo { hasNextPage endCursor }
  }
}"""
SCAN_BAD = [
    ({"o": "KEY", "sf": to_iso(BASE)}, "startFrom and startTo apply to order: START only"),
    ({"o": "KEY", "w": {"start": to_iso(BASE)}}, "window applies to order: COUNT only"),
    ({"o": "START", "w": {"start": to_iso(BASE)}}, "window applies to order: COUNT only"),
    ({"o": "START", "x": "h1"}, "prefix, from and to apply to the key order only"),
    ({"o": "COUNT"}, "order: COUNT needs a window"),
    ({"o": "COUNT", "w": {"start": to_iso(BASE + 1)}}, "is not aligned"),
    ({"o": "START", "sf": to_iso(BASE + SIZE), "st": to_iso(BASE)}, "is after to"),
]


@pytest.mark.parametrize(("variables", "problem"), SCAN_BAD)
def test_window_orders_refuse_the_arguments_of_other_orders(
    variables: dict[str, Any], problem: str
) -> None:
    body, nodes = run(2, SCAN_QUERY, variables)
    assert codes(body) == ["BAD_USER_INPUT"]
    assert problem in body["errors"][0]["message"]
    assert sum(n.requests for n in nodes) == 0


def _page_all(node_count: int, variables: dict[str, Any], size: int) -> list[tuple[str, int, int]]:
    nodes = fake_nodes(model(), P, node_count, FULL)

    async def scenario() -> list[tuple[str, int, int]]:
        found: list[tuple[str, int, int]] = []
        cursor = None
        async with running_gateway(nodes, P, catalogue=FULL) as http:
            for _ in range(100):
                asked = {**variables, "n": size, "a": cursor}
                status, body = await post_query(http, SCAN_QUERY, asked)
                assert status == 200 and "errors" not in body, body
                page = body["data"]["allHostAccessWindows"]
                found.extend(
                    (e["node"]["host"], from_iso_ms(e["node"]["start"]), e["node"]["count"])
                    for e in page["edges"]
                )
                if not page["pageInfo"]["hasNextPage"]:
                    return found
                cursor = page["pageInfo"]["endCursor"]
        raise AssertionError("the scan does not end")

    return asyncio.run(scenario())


def from_iso_ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


@pytest.mark.parametrize("node_count", [1, 3])
def test_windows_page_by_start_and_one_window_by_count(node_count: int) -> None:
    rows = [(k, s, c) for (k, s), c in WINDOWS.items()]
    since, until = BASE + SIZE, BASE + 3 * SIZE
    by_start = sorted((r for r in rows if since <= r[1] < until), key=lambda r: (r[1], r[0]))
    variables: dict[str, Any] = {"o": "START", "sf": to_iso(since), "st": to_iso(until)}
    assert _page_all(node_count, variables, 4) == by_start
    by_count = sorted((r for r in rows if r[1] == BASE + SIZE), key=lambda r: (-r[2], r[0]))
    variables = {"o": "COUNT", "w": {"start": to_iso(BASE + SIZE)}}
    assert _page_all(node_count, variables, 3) == by_count


def test_an_unaligned_window_names_the_window_before() -> None:
    body, _ = run(1, TOP_QUERY, {"l": 3, "s": to_iso(BASE + 90_000)})
    assert f"starts at {from_ms(BASE + SIZE).isoformat()}" in body["errors"][0]["message"]


def test_a_dead_node_gives_partial_windowed_results() -> None:
    nodes = fake_nodes(model(), P, 3, FULL)
    dead = nodes[1]
    dead_host = next(h for h in HOSTS if partition_for(h, P) in dead.held)

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        config = GatewayConfig(retries=1, backoff_ms=5)
        extra = {dead.url(): httpx.MockTransport(refuse)}
        feed = feed_for(nodes, P)
        async with running_gateway(nodes, P, config, feed, extra, FULL) as http:
            top = (await post_query(http, TOP_QUERY, {"l": 100, "s": to_iso(BASE)}))[1]
            one = (await post_query(http, WINDOWS_QUERY, {"h": dead_host}))[1]
            return top, one

    top, one = asyncio.run(scenario())
    missing = sorted(e["extensions"]["partition"] for e in top["errors"])
    assert missing == sorted(dead.held)
    assert set(codes(top)) == {"PARTITION_UNAVAILABLE"}
    readable = {
        k: c for (k, s), c in WINDOWS.items() if s == BASE and partition_for(k, P) not in dead.held
    }
    assert [(r["host"], r["count"]) for r in top["data"]["topHostsPerMinute"]] == sorted(
        readable.items(), key=lambda kc: (-kc[1], kc[0])
    )
    assert one["data"] == {"hostAccessWindows": []}
    [error] = one["errors"]
    assert error["extensions"]["code"] == "PARTITION_UNAVAILABLE"
    assert error["extensions"]["partition"] == partition_for(dead_host, P)
    assert error["extensions"]["node"] == dead.node_id
    assert repr(dead_host) in error["message"] and error["path"] == ["hostAccessWindows"]
