"""The fast path's reads (gateway.execute.fastpath, the cache off): a query of lookups,
top-N, totals (of count and windowed views), pages of a key's events, a key's event as of
a time and scans answered
from the planner's reads without execution gives the bytes execution gives, over fake nodes failing
each way a partition can fail (refused, an answer that is no GraphQL, a node that is not
the owner, a partition nobody holds).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

import httpx
import orjson
import pytest

from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from schema import EventRow, partition_for
from tests.gateway.fakes import BOOKING_HISTORY, PER_MINUTE, WORDS, FakeNode, Model, table_for

P = 4
VIEWS = (WORDS, BOOKING_HISTORY, PER_MINUTE)
COUNTS = {f"w{i}": i + 1 for i in range(12)}
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
# events of customers named as words: the checks below find a query's partitions by them
EVENTS = [EventRow(f"w{i % 3}", T0 + i * 1000, 0, i, {"trip": f"t{i}"}) for i in range(7)]
PAGE = (
    "edges { cursor node { customer trip eventTime __typename } } "
    "pageInfo { hasNextPage endCursor }"
)
QUERIES = (
    '{ wordCount(word: "w0") { word count } }',
    '{ a: wordCounts(words: ["w1", "w2", "nope", "w3", "w1"]) { count __typename } }',
    '{ wordCount(word: "w5") { count } b: wordCounts(words: ["w6", "w7"]) { word } __typename }',
    '{ x: wordCount(word: "w8", maxLag: 0) { word } y: wordCount(word: "w9", maxLag: 3) '
    "{ count } }",
    '{ wordCounts(words: ["w10", "w11", "w4"]) { word count } }',
    '{ e: _entities(representations: [{__typename: "WordCount", word: "w1"}, {__typename: '
    '"WordCount", word: "nope"}, {__typename: "WordCount", word: "w6"}]) { __typename '
    "... on WordCount { count word } } }",
    "{ topWords(limit: 3) { word count } }",
    '{ wordCount(word: "w2") { count } t: topWords(limit: 5, maxLag: 2) { word } __typename }',
    "{ wordCountTotals { keys count __typename } }",
    '{ t: wordCountTotals(maxLag: 1) { count } wordCounts(words: ["w3", "w7"]) { count } }',
    f'{{ bookingHistory(customer: "w0") {{ {PAGE} }} }}',
    "{ hostAccessWindowTotals { start end keys count __typename } }",
    "{ allWordCounts(first: 3) { edges { cursor node { word count } } pageInfo { hasNextPage "
    "endCursor startCursor hasPreviousPage } } }",
    '{ s: allWordCounts(last: 2, prefix: "w1") { edges { node { word } } } '
    'wordCount(word: "w3") { count } }',
    "{ allWordCounts(first: 4, order: COUNT) { edges { node { count } } __typename } }",
    "{ allBookingHistory(first: 5) { edges { cursor node { customer trip } } } }",
    '{ bookingHistoryAsOf(customer: "w1", at: "2026-01-01T00:00:04Z") { trip eventTime } '
    'n: bookingHistoryAsOf(customer: "w2", at: "2025-01-01T00:00:00Z") { trip } }',
    '{ t: hostAccessWindowTotals(from: "2026-01-01T00:01:00Z", maxLag: 2) { count } '
    'wordCount(word: "w1") { word } }',
    f'{{ h: bookingHistory(customer: "w1", first: 1, newestFirst: true) {{ {PAGE} }} '
    'wordCount(word: "w2") { count } }',
    '{ bookingHistory(customer: "w2", from: "2026-01-01T00:00:02Z", to: "2026-01-01T00:00:06Z") '
    "{ edges { node { trip } } } }",
    '{ bookingHistory(customer: "w5") { ...P } } fragment P on BookingEventConnection '
    "{ pageInfo { hasNextPage } edges { cursor } }",
)
# a slow node is left out: what the gateway learns of it (suspect, hedge delays) changes
# from one request to the next, so two requests in a row differ whoever answers them
FAULTS = ("none", "refused", "garbage", "not owner", "unassigned", "rejected")
REJECTED = b'{"errors": [{"message": "no", "extensions": {"code": "BAD_USER_INPUT"}}]}'


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def _garbage(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=b"<html>not GraphQL</html>")


class _Rejecting:
    """A node saying the arguments are bad (the planner raises BadRequestError: the fast
    path hands its read to execution), counting the requests it gets."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return httpx.Response(200, content=REJECTED)


async def _garbage_lookups_first(request: httpx.Request) -> httpx.Response:
    """No GraphQL from n1, later for every read but the lookup of `w1`: the read of the
    field asked first ends last."""
    if b"w1" not in request.content:
        await asyncio.sleep(0.05)
    return _garbage(request)


def _setup(fault: str) -> tuple[list[FakeNode], dict[str, Any], dict[str, httpx.BaseTransport]]:
    """Two nodes, n0 and n1 (n1 failing as `fault` says), the routing claims, and the
    transports standing in for a failed n1."""
    model = Model.of_counts(COUNTS)
    for event in EVENTS:
        model.add_event(BOOKING_HISTORY, event)
    model.windows[PER_MINUTE.name] = {(f"w{i}", T0 + (i % 3) * 60_000): i + 1 for i in range(8)}
    odd = [p for p in range(P) if p % 2]
    even = [p for p in range(P) if not p % 2]
    n0 = FakeNode("n0", model, even, P, VIEWS)
    n1 = FakeNode("n1", model, [] if fault == "not owner" else odd, P, VIEWS)
    claims = {"n0": (n0.url(), even), "n1": (n1.url(), odd)}
    if fault == "unassigned":
        del claims["n1"]
    extra: dict[str, Any] = {}
    if fault == "refused":
        extra[n1.url()] = httpx.MockTransport(_refuse)
    if fault == "garbage":
        extra[n1.url()] = httpx.MockTransport(_garbage)
    if fault == "garbage, lookups first":
        extra[n1.url()] = httpx.MockTransport(_garbage_lookups_first)
    if fault == "rejected":
        extra[n1.url()] = httpx.MockTransport(_Rejecting())
    return [n0, n1], claims, extra


async def _answers(
    fault: str, queries: Sequence[str], cache: bool = False, known: Sequence[Any] = VIEWS
) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    """Per query: (fast path on: answered by it, status, headers, body) then the same off;
    and the transports standing in for n1. The routing table knows the partition counts of
    the views `known`."""
    nodes, claims, extra = _setup(fault)
    mounts: dict[str, Any] = {n.url(): httpx.ASGITransport(app=n) for n in nodes}
    mounts.update(extra)
    upstream = httpx.AsyncClient(mounts=mounts)
    # the retries end every failing read, never the deadline: which of the two came first
    # decided the reason (NODE_UNAVAILABLE or TIMEOUT) on a busy machine, path by path
    config = dataclasses.replace(
        GatewayConfig(), cache=cache, timeout_ms=10_000, retries=2, backoff_ms=1
    )
    feed = RoutingFeed(table_for(claims, P, tuple(known)))
    app = GatewayApp(config, feed=feed, client=upstream, statuses=StatusBoard(), catalogue=VIEWS)
    await app.startup()
    seen = []
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            endpoint = app._graphql
            fast = endpoint.fast_path
            assert fast is not None
            for query in queries:
                for path in (fast, None):
                    endpoint.fast_path = path
                    before = fast.answered
                    response = await http.post("/graphql", json={"query": query})
                    headers = {
                        k: v
                        for k, v in response.headers.items()
                        if k not in ("x-request-id", "date", "server-timing")
                    }
                    seen.append(
                        (fast.answered > before, response.status_code, headers, response.content)
                    )
            endpoint.fast_path = fast
    finally:
        await app.shutdown()
        await upstream.aclose()
    return seen, extra


@pytest.mark.parametrize("fault", FAULTS)
def test_reads_answer_as_execution_does(fault: str) -> None:
    seen, _ = asyncio.run(_answers(fault, QUERIES))
    failing = {p for p in range(P) if p % 2}
    for query, (on, off) in zip(QUERIES, zip(seen[::2], seen[1::2], strict=True), strict=True):
        answered, *fast = on
        executed, *full = off
        assert not executed
        assert fast == full, f"{fault}: {query}"
        body = orjson.loads(fast[2])
        codes = [e["extensions"]["code"] for e in body.get("errors", [])]
        keys = [k for k in (*COUNTS, "nope") if f'"{k}"' in query]
        # read from every partition
        every = any(f in query for f in ("top", "Totals", "allWordCounts", "allBookingHistory"))
        touched = {partition_for(k, P) for k in keys} | (set(range(P)) if every else set())
        rejected = fault == "rejected" and bool(touched & failing)
        assert answered is not rejected, f"{fault}: {query}: {body}"
        if rejected:
            assert "BAD_USER_INPUT" in codes and all("locations" in e for e in body["errors"])
        elif fault != "none" and touched & failing:
            assert "PARTITION_UNAVAILABLE" in codes, f"{fault}: {query}: {body}"
        else:
            assert codes == [], f"{fault}: {query}: {body}"
        assert all(e["partition"] not in failing for e in body["extensions"]["freshness"]) or (
            fault == "none"
        )


def _read_once(query: str) -> bytes:
    """The answer to `query` with n1 rejecting reads, the fast path on and off: equal, not
    the fast path's, and n1 asked once per request (execution answered from the fast path's
    read, never reading again)."""
    seen, extra = asyncio.run(_answers("rejected", [query]))
    (answered, status, _, content), (_, status_off, _, content_off) = seen
    assert not answered and (status, content) == (status_off, content_off)
    (rejecting,) = extra.values()
    assert rejecting.handler.requests == 2
    return content


def test_a_read_that_raised_is_not_made_again_by_execution() -> None:
    assert partition_for("w4", P) % 2  # in an odd partition, n1's
    _read_once('{ wordCount(word: "w4") { word } }')


def test_an_entities_read_that_raised_is_not_made_again_by_execution() -> None:
    _read_once(
        '{ _entities(representations: [{__typename: "WordCount", word: "w4"}]) { __typename } }'
    )


def test_a_top_n_read_that_raised_is_not_made_again_by_execution() -> None:
    """A top-N reads every partition (the lookup beside it is of n0's partition, answered)."""
    assert not partition_for("w2", P) % 2
    content = _read_once('{ wordCount(word: "w2") { word } topWords(limit: 2) { word } }')
    codes = [e["extensions"]["code"] for e in orjson.loads(content)["errors"]]
    assert codes == ["BAD_USER_INPUT"], content


def test_a_totals_read_that_raised_is_not_made_again_by_execution() -> None:
    """Totals read every partition."""
    assert not partition_for("w2", P) % 2
    _read_once('{ wordCount(word: "w2") { word } wordCountTotals { count } }')


def test_a_history_read_that_raised_is_not_made_again_by_execution() -> None:
    """A page of the events of a customer in n1's partition."""
    _read_once('{ bookingHistory(customer: "w4") { edges { cursor } } }')


def test_a_windowed_totals_read_that_raised_is_not_made_again_by_execution() -> None:
    _read_once('{ hostAccessWindowTotals(from: "2026-01-01T00:01:00Z") { count } }')


def test_a_scan_read_that_raised_is_not_made_again_by_execution() -> None:
    _read_once("{ allWordCounts(first: 2) { edges { cursor } } }")


def test_errors_come_in_the_order_of_the_fields_whichever_read_ends_first() -> None:
    """The root fields' reads run concurrently; the errors of the partitions they could not
    read follow the fields' order in the query, then the partitions', on both paths."""
    query = (
        '{ t: hostAccessWindowTotals(from: "2026-01-01T00:01:00Z", maxLag: 2) { count } '
        'wordCount(word: "w1") { word } }'
    )
    assert partition_for("w1", P) % 2  # in an odd partition, n1's
    seen, _ = asyncio.run(_answers("garbage, lookups first", [query]))
    (answered, *fast), (executed, *full) = seen
    assert answered and not executed
    assert fast == full
    errors = orjson.loads(fast[2])["errors"]
    places = [(e["path"], e["extensions"]["partition"]) for e in errors]
    assert places == [(["t"], 1), (["t"], 3), (["wordCount"], partition_for("w1", P))], places


def test_a_top_n_of_a_view_whose_partition_count_is_not_read_yet_is_a_field_error() -> None:
    """With the cache on (the default), the fast path asked the cache for a kept top-N with
    the view's partition count, which the gateway has not read yet at start-up: the error
    escaped it as an internal error (HTTP 500) where execution answers ROUTING_NOT_READY."""
    query = "{ topWords(limit: 2) { word count } }"
    known = [v for v in VIEWS if v is not WORDS]
    seen, _ = asyncio.run(_answers("none", [query], cache=True, known=known))
    (_, *fast), (_, *full) = seen
    assert fast == full
    assert fast[0] == 200
    (error,) = orjson.loads(fast[2])["errors"]
    assert error["extensions"]["code"] == "ROUTING_NOT_READY" and error["path"] == ["topWords"]
