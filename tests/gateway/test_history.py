"""History views through the gateway: pages forwarded to the key's owner, followed by cursor
until the end, equal to the model; bad page sizes and cursors; partial results."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import GatewayConfig
from schema import EventRow, partition_for
from tests.gateway.fakes import (
    BOOKING_HISTORY,
    FULL,
    FakeNode,
    Model,
    codes,
    cursor_of,
    fake_nodes,
    feed_for,
    post_query,
    running_gateway,
    to_iso,
)

P = 4
T0 = 1_700_000_000_000
PAGE = """query($c: String!, $n: Int!, $a: String, $f: DateTime, $t: DateTime,
    $o: Boolean! = false) {
  bookingHistory(customer: $c, first: $n, after: $a, from: $f, to: $t, newestFirst: $o) {
    edges { cursor node { customer trip eventTime } }
    pageInfo { hasNextPage endCursor } } }"""


def node_of(event: EventRow) -> dict[str, Any]:
    time = to_iso(event.event_ms).replace("Z", "+00:00")
    return {"customer": event.key, "trip": event.fields.get("trip"), "eventTime": time}


async def all_pages(
    http: httpx.AsyncClient,
    customer: str,
    first: int,
    since: int | None,
    until: int | None,
    newest_first: bool = False,
) -> list[dict[str, Any]]:
    """Every page of `customer`'s history, following endCursor until hasNextPage is false."""
    variables: dict[str, Any] = {
        "o": newest_first,
        "c": customer,
        "n": first,
        "a": None,
        "f": None if since is None else to_iso(since),
        "t": None if until is None else to_iso(until),
    }
    pages = []
    while True:
        status, body = await post_query(http, PAGE, variables)
        assert status == 200 and "errors" not in body, body
        page = body["data"]["bookingHistory"]
        pages.append(page)
        if not page["pageInfo"]["hasNextPage"]:
            return pages
        assert len(pages) < 1000, "pagination does not end"
        variables["a"] = page["pageInfo"]["endCursor"]


events = st.lists(
    st.tuples(
        st.sampled_from(["ann", "bob", "cy"]),
        st.integers(0, 6),  # few distinct event times: many ties
        st.integers(0, 3),  # source partition
        st.sampled_from(["paris", "rome", None]),
    ),
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    drawn=events,
    first=st.integers(1, 7),
    since=st.none() | st.integers(0, 6),
    until=st.none() | st.integers(0, 7),
    node_count=st.sampled_from([1, 3]),
    newest_first=st.booleans(),
)
def test_following_cursors_reads_the_models_history_page_by_page(
    drawn: list[tuple[str, int, int, str | None]],
    first: int,
    since: int | None,
    until: int | None,
    node_count: int,
    newest_first: bool,
) -> None:
    truth = Model()
    for offset, (customer, second, partition, trip) in enumerate(drawn):
        fields = {} if trip is None else {"trip": trip}
        truth.add_event(
            BOOKING_HISTORY, EventRow(customer, T0 + second * 1000, partition, offset, fields)
        )
    nodes = fake_nodes(truth, P, node_count, FULL)
    low = None if since is None else T0 + since * 1000
    high = None if until is None else T0 + until * 1000
    if low is not None and high is not None and low > high:
        low, high = high, low

    async def scenario() -> dict[str, list[dict[str, Any]]]:
        async with running_gateway(nodes, P, catalogue=FULL) as http:
            return {
                c: await all_pages(http, c, first, low, high, newest_first)
                for c in ("ann", "bob", "cy")
            }

    pages = asyncio.run(scenario())
    for customer, seen in pages.items():
        expected = truth.history(BOOKING_HISTORY, customer, low, high)
        if newest_first:
            expected.reverse()
        edges = [edge for page in seen for edge in page["edges"]]
        assert [e["node"] for e in edges] == [node_of(e) for e in expected]
        assert [e["cursor"] for e in edges] == [cursor_of(e) for e in expected]
        assert all(len(page["edges"]) == first for page in seen[:-1])
        assert len(seen) == max(1, -(-len(expected) // first))
    # every page was one request, to the owner of its customer only
    for node in nodes:
        owned = [c for c in pages if partition_for(c, P) in node.held]
        assert node.requests == sum(len(pages[c]) for c in owned)
        assert set(node.keys_asked) == set(owned)


def run(query: str, variables: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any]:
    truth = Model()
    for i in range(5):
        truth.add_event(BOOKING_HISTORY, EventRow("ann", T0 + i, 0, i, {"trip": f"t{i}"}))
    nodes = fake_nodes(truth, P, 3, FULL)

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, catalogue=FULL) as http:
            status, body = await post_query(http, query, variables)
            assert status == 200
            return body

    return asyncio.run(scenario()), nodes


AS_OF = "query($c: String!, $at: DateTime!) { bookingHistoryAsOf(customer: $c, at: $at) { trip } }"


def _within_ms(ms: int, micros: int) -> str:
    """`ms` plus `micros` microseconds, in ISO-8601 with six decimals."""
    return to_iso(ms).replace("Z", f"{micros:03d}Z")


@pytest.mark.parametrize(
    ("at", "trip"),
    [
        (to_iso(T0 - 1), None),
        (to_iso(T0), "t0"),
        (to_iso(T0 + 2), "t2"),
        (_within_ms(T0 + 2, 999), "t2"),  # not the event of the next ms
        (to_iso(T0 + 3), "t3"),
        (to_iso(T0 + 10_000), "t4"),
        ("9999-12-31T23:59:59.999999Z", "t4"),  # the latest instant there is
    ],
)
def test_as_of_is_the_newest_event_at_or_before_the_time(at: str, trip: str | None) -> None:
    body, nodes = run(AS_OF, {"c": "ann", "at": at})
    assert "errors" not in body, body
    assert body["data"]["bookingHistoryAsOf"] == (None if trip is None else {"trip": trip})
    assert sum(n.requests for n in nodes) == 1


def test_as_of_a_time_without_an_offset_is_refused_naming_at() -> None:
    body, nodes = run(AS_OF, {"c": "ann", "at": "2023-11-14T22:13:20"})
    assert codes(body) == ["BAD_USER_INPUT"]
    assert "at 2023-11-14T22:13:20 needs a UTC offset" in body["errors"][0]["message"]
    assert sum(n.requests for n in nodes) == 0


def test_first_defaults_to_one_hundred_and_an_unknown_key_is_an_empty_page() -> None:
    body, _ = run(
        '{ bookingHistory(customer: "ann") { edges { cursor } pageInfo { hasNextPage } } }'
    )
    assert len(body["data"]["bookingHistory"]["edges"]) == 5
    body, _ = run(PAGE, {"c": "nobody", "n": 3})
    assert body["data"]["bookingHistory"] == {
        "edges": [],
        "pageInfo": {"hasNextPage": False, "endCursor": None},
    }


BAD = [
    (PAGE, {"c": "ann", "n": 0}, "BAD_USER_INPUT", 0),
    (PAGE, {"c": "ann", "n": 1001}, "BAD_USER_INPUT", 0),
    (PAGE, {"c": "", "n": 3}, "BAD_USER_INPUT", 0),
    (PAGE, {"c": "ann", "n": 3, "a": ""}, "BAD_USER_INPUT", 0),
    (PAGE, {"c": "ann", "n": 3, "a": "not a cursor!"}, "BAD_USER_INPUT", 0),
    (PAGE, {"c": "ann", "n": 3, "a": "A" * 600}, "BAD_USER_INPUT", 0),
    (PAGE, {"c": "ann", "n": 3, "a": "QUJD"}, "BAD_USER_INPUT", 1),  # base64url the node rejects
    (PAGE, {"c": "ann", "n": 3, "f": to_iso(T0 + 9), "t": to_iso(T0)}, "BAD_USER_INPUT", 0),
    (PAGE, {"c": "ann", "n": 3, "f": "2023-11-14T22:00:00"}, "BAD_USER_INPUT", 0),
    (PAGE, {"c": "ann", "n": "3"}, "BAD_USER_INPUT", 0),
    ('{ bookingHistory(customer: "ann", first: 1.5) { edges { cursor } } }', None,
     "GRAPHQL_VALIDATION_FAILED", 0),
    ('{ bookingHistory(customer: "ann") { edges { node { nope } } } }', None,
     "GRAPHQL_VALIDATION_FAILED", 0),
]  # fmt: skip


@pytest.mark.parametrize(("query", "variables", "code", "node_requests"), BAD)
def test_bad_pages_are_errors_with_codes(
    query: str, variables: dict[str, Any] | None, code: str, node_requests: int
) -> None:
    body, nodes = run(query, variables)
    assert codes(body) == [code]
    assert body.get("data") is None
    assert sum(n.requests for n in nodes) == node_requests


def test_a_node_rejecting_a_cursor_is_not_retried_or_reported_unavailable() -> None:
    body, _ = run(PAGE, {"c": "ann", "n": 3, "a": "QUJD"})
    [error] = body["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "view": BOOKING_HISTORY.name}
    assert "bad cursor" in error["message"] and "node n" in error["message"]


def test_an_unavailable_owner_gives_an_empty_page_and_an_error_naming_the_key() -> None:
    truth = Model()
    truth.add_event(BOOKING_HISTORY, EventRow("ann", T0, 0, 0, {"trip": "x"}))
    nodes = fake_nodes(truth, P, 3, FULL)
    owner: FakeNode = next(n for n in nodes if partition_for("ann", P) in n.held)

    async def scenario() -> dict[str, Any]:
        config = GatewayConfig(retries=0)
        feed = feed_for([n for n in nodes if n is not owner], P)
        async with running_gateway(nodes, P, config, feed, catalogue=FULL) as http:
            query = """{ bookingHistory(customer: "ann") {
                           edges { cursor } pageInfo { hasNextPage } }
                         cluster { unassigned } }"""
            return (await post_query(http, query))[1]

    body = asyncio.run(scenario())
    assert body["data"]["bookingHistory"] == {"edges": [], "pageInfo": {"hasNextPage": False}}
    assert body["data"]["cluster"]["unassigned"] == sorted(owner.held)
    [error] = body["errors"]
    assert error["extensions"]["code"] == "PARTITION_UNAVAILABLE"
    # the feed never showed the owner: no node is named
    assert error["extensions"]["reason"] == "NEVER_ASSIGNED"
    assert error["extensions"]["node"] is None
    assert error["extensions"]["partition"] == partition_for("ann", P)
    assert "'ann'" in error["message"] and error["path"] == ["bookingHistory"]
    assert owner.requests == 0


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_as_of_a_time_outside_the_years_utc_holds_is_refused_naming_at(at: str) -> None:
    """Year 1 at +14:00 is before the first instant UTC holds: an internal error before."""
    body, nodes = run(AS_OF, {"c": "ann", "at": at})
    assert codes(body) == ["BAD_USER_INPUT"]
    assert "outside the years 1 to 9999 in UTC" in body["errors"][0]["message"]
    assert sum(n.requests for n in nodes) == 0
