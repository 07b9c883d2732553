"""The generated subscription fields, run with graphql-core's subscribe() on the gateway's
schema over fake node feeds (`tests.live.fake_feed`): first rows, every change once, resume
tokens (also across a failover), conflation for a slow subscriber, the errors of bad
arguments and of a missing scope."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from graphql import ExecutionResult, parse, subscribe

from gateway.api.request import RequestContext
from gateway.api.schema import build_schema
from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.model.principal import ANONYMOUS, Principal
from gateway.nodes.hub import FeedHub
from gateway.nodes.transport import HttpxCaller
from gateway.nodes.upstream import Upstream
from gateway.reads.planner import Planner
from gateway.reads.protocol import Reads
from gateway.subscriptions.tokens import ResumeToken
from runtime.clock import wall_clock_ms
from runtime.trust import NodeCallSigner
from schema import View, view_by_name
from tests.gateway.fakes import BOOKING_HISTORY, HOSTS, LAST_BOOKING, PER_MINUTE, WORDS
from tests.live.fake_feed import Changelog, FakeFeedNode, count_row, wait_for
from tests.live.test_hub import P, keys_in, record, table

pytestmark = pytest.mark.timeout(60)

SECURED = View(
    name="secret_counts",
    topic="secrets",
    kind=WORDS.kind,
    key_field="thing",
    type_name="SecretCount",
    point_field="secretCount",
    many_field="secretCounts",
    top_field="topSecrets",
    scope="read:secrets",
)
HOST_PAGES = view_by_name("host_pages")  # an aggregate view
CATALOGUE = (WORDS, HOSTS, PER_MINUTE, LAST_BOOKING, BOOKING_HISTORY, SECURED, HOST_PAGES)
SCHEMA = build_schema(CATALOGUE)._schema

COUNT = """subscription($word: String!, $after: String) {
  wordCount(word: $word, after: $after) {
    word count offset token freshness { partition node role appliedOffset lag }
  }
}"""
COUNTS = (
    "subscription($words: [String!]!) { wordCounts(words: $words) { word count offset token } }"
)


class Cluster:
    """Fake feed nodes over changelogs, the routing feed naming them, a started hub."""

    def __init__(self, logs: dict[str, Changelog]) -> None:
        self.logs = logs
        self.nodes: list[FakeFeedNode] = []
        self.feed = RoutingFeed()
        self.hub = FeedHub(self.feed, NodeCallSigner(None), max_lag=100)
        self.client = httpx.AsyncClient()
        config = GatewayConfig()
        self.planner: Reads = Planner(
            self.feed, Upstream(HttpxCaller(self.client)), config, CATALOGUE
        )
        self.config = config

    async def node(self, node_id: str, view: View = WORDS) -> FakeFeedNode:
        node = await FakeFeedNode(node_id, self.logs[view.name], range(P)).start()
        self.nodes.append(node)
        return node

    def route(self, *records: Any) -> None:
        routing = table(*records)
        counts = {view.name: P for view in CATALOGUE}
        self.feed.publish(routing.__class__(**{**routing.__dict__, "partition_counts": counts}))

    def context(self, principal: Principal | None = None) -> RequestContext:
        return RequestContext(
            planner=self.planner,
            feed=self.feed,
            config=self.config,
            deadline=asyncio.get_running_loop().time() + self.config.timeout_s,
            clock=wall_clock_ms,
            hub=self.hub,
            principal=principal or ANONYMOUS,
        )

    async def publish(self) -> None:
        for node in self.nodes:
            await node.publish()

    async def close(self) -> None:
        await self.hub.stop()
        for node in self.nodes:
            await node.stop()
        await self.client.aclose()


@contextlib.asynccontextmanager
async def cluster(*views: View) -> AsyncIterator[Cluster]:
    running = Cluster({view.name: Changelog(view, P) for view in views})
    await running.hub.start()
    try:
        yield running
    finally:
        await running.close()


async def open_subscription(
    running: Cluster, query: str, variables: dict[str, Any], principal: Principal | None = None
) -> AsyncIterator[ExecutionResult] | ExecutionResult:
    result = subscribe(
        SCHEMA, parse(query), context_value=running.context(principal), variable_values=variables
    )
    return await result if asyncio.iscoroutine(result) else result  # type: ignore[return-value]


def delivered(running: Any, offset: int) -> bool:
    """Whether the changes up to `offset` reached the subscription: a key subscription reads
    them from its own follow or, once that caught up, from the partition's shared one."""
    streams = running.hub.streams()
    reached = max((s.reached or 0 for s in streams), default=0)
    return reached == offset and all(s.held == 0 for s in streams)


async def take(results: Any, count: int, timeout_s: float = 10) -> list[dict[str, Any]]:
    """The data of the next `count` results (each must be error-free)."""
    got = []
    async with asyncio.timeout(timeout_s):
        for _ in range(count):
            result = await anext(results)
            assert result.errors is None, result.errors
            got.append(result.data)
    return got


def test_a_key_subscription_starts_with_the_current_row_then_gets_every_change() -> None:
    async def scenario() -> None:
        async with cluster(WORDS) as running:
            log = running.logs[WORDS.name]
            key, other = keys_in(0, 2)
            log.append(key, count_row(key, 1))
            log.append(key, count_row(key, 2))
            n1 = await running.node("n1")
            running.route(record(n1, [0, 1]))
            results = await open_subscription(running, COUNT, {"word": key})
            (first,) = await take(results, 1)
            update = first["wordCount"]
            # read at applied offset 2: it holds the records up to offset 1
            assert (update["word"], update["count"], update["offset"]) == (key, 2, "1")
            assert update["freshness"] == {
                "partition": 0,
                "node": "n1",
                "role": "ACTIVE",
                "appliedOffset": "2",
                "lag": "0",
            }
            assert ResumeToken.parse(WORDS.name, update["token"]).offsets == {0: 2}
            log.append(other, count_row(other, 1))
            log.append(key, count_row(key, 3))
            await running.publish()
            (second,) = await take(results, 1)
            assert (second["wordCount"]["count"], second["wordCount"]["offset"]) == (3, "3")
            assert ResumeToken.parse(WORDS.name, second["wordCount"]["token"]).offsets == {0: 4}
            await results.aclose()  # type: ignore[union-attr]
            await wait_for(lambda: n1.follows_open() == 0, 10, "the follow to end")

    asyncio.run(scenario())


def test_an_unknown_key_starts_with_null_and_several_keys_span_partitions() -> None:
    async def scenario() -> None:
        async with cluster(WORDS) as running:
            log = running.logs[WORDS.name]
            (a,), (b,) = keys_in(0, 1), keys_in(1, 1)
            log.append(a, count_row(a, 5))
            n1 = await running.node("n1")
            running.route(record(n1, [0, 1]))
            results = await open_subscription(running, COUNTS, {"words": [a, b]})
            first = [d["wordCounts"] for d in await take(results, 2)]
            assert sorted((u["word"], u["count"]) for u in first) == sorted([(a, 5), (b, None)])
            log.append(b, count_row(b, 1))
            await running.publish()
            (update,) = await take(results, 1)
            assert {k: update["wordCounts"][k] for k in ("word", "count", "offset")} == {
                "word": b,
                "count": 1,
                "offset": "0",
            }
            await results.aclose()  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_resuming_with_a_token_misses_nothing_and_repeats_nothing_across_a_failover() -> None:
    async def scenario() -> None:
        async with cluster(WORDS) as running:
            log = running.logs[WORDS.name]
            (key,) = keys_in(1, 1)
            log.append(key, count_row(key, 1))
            n1, n2 = await running.node("n1"), await running.node("n2")
            running.route(record(n1, [0, 1]), record(n2, []))
            results = await open_subscription(running, COUNT, {"word": key})
            (first,) = await take(results, 1)
            token = first["wordCount"]["token"]
            await results.aclose()  # type: ignore[union-attr]
            # while nobody listens: two changes, and the owner dies; n2 takes over
            log.append(key, count_row(key, 2))
            log.append(key, count_row(key, 3))
            await n1.stop()
            running.route(record(n2, [0, 1]))
            resumed = await open_subscription(running, COUNT, {"word": key, "after": token})
            got = [d["wordCount"] for d in await take(resumed, 1)]
            while got[-1]["count"] != 3:  # 2 may be conflated away: the newest row counts
                got.extend(d["wordCount"] for d in await take(resumed, 1))
            assert [(u["count"], u["offset"]) for u in got] in ([(2, "1"), (3, "2")], [(3, "2")])
            assert got[-1]["freshness"]["node"] == "n2"
            log.append(key, count_row(key, 4))
            await running.publish()
            (last,) = await take(resumed, 1)
            assert (last["wordCount"]["count"], last["wordCount"]["offset"]) == (4, "3")
            assert n2.follows_asked[0]["from"] == {WORDS.changelog_topic: 1}
            assert n2.follows_asked[0]["snapshot"] is False
            await resumed.aclose()  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_a_slow_subscriber_gets_the_newest_row_per_key_and_a_token_that_skips_nothing() -> None:
    async def scenario() -> None:
        async with cluster(WORDS) as running:
            log = running.logs[WORDS.name]
            a, b = keys_in(0, 2)
            n1 = await running.node("n1")
            running.route(record(n1, [0, 1]))
            running.config = dataclasses.replace(running.config, subscription_queue=2)
            results = await open_subscription(running, COUNTS, {"words": [a, b]})
            await take(results, 2)  # the first (null) rows
            log.append(a, count_row(a, 1))  # offset 0
            log.append(b, count_row(b, 1))  # 1
            log.append(a, count_row(a, 2))  # 2: a's 0 is superseded
            await running.publish()
            # nobody reads until the subscription holds all three, over its bound of 2: two
            # updates remain
            await wait_for(lambda: delivered(running, 3), 10, "all three in")
            got = [d["wordCounts"] for d in await take(results, 2)]
            assert [(u["word"], u["count"], u["offset"]) for u in got] == [(b, 1, "1"), (a, 2, "2")]
            # b's update said: resume from 2 (a's pending change), a's: from 3
            assert [ResumeToken.parse(WORDS.name, u["token"]).offsets for u in got] == [
                {0: 2},
                {0: 3},
            ]
            await results.aclose()  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_below_its_bound_a_subscriber_that_catches_up_gets_every_row() -> None:
    async def scenario() -> None:
        async with cluster(WORDS) as running:
            log = running.logs[WORDS.name]
            (a,) = keys_in(0, 1)
            n1 = await running.node("n1")
            running.route(record(n1, [0, 1]))
            results = await open_subscription(running, COUNT, {"word": a})
            await take(results, 1)  # the first (null) row
            for count in (1, 2, 3):  # offsets 0, 1, 2
                log.append(a, count_row(a, count))
            await running.publish()
            await wait_for(lambda: delivered(running, 3), 10, "all three in")
            got = [d["wordCount"] for d in await take(results, 3)]
            assert [(u["count"], u["offset"]) for u in got] == [(1, "0"), (2, "1"), (3, "2")]
            await results.aclose()  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_a_latest_subscription_shows_the_events_fields() -> None:
    async def scenario() -> None:
        async with cluster(LAST_BOOKING) as running:
            log = running.logs[LAST_BOOKING.name]
            (customer,) = keys_in(0, 1)
            n1 = await running.node("n1", LAST_BOOKING)
            running.route(record(n1, [0, 1]))
            query = (
                "subscription($c: String!) { lastBooking(customer: $c) "
                "{ customer trip eventTime offset } }"
            )
            results = await open_subscription(running, query, {"c": customer})
            (first,) = await take(results, 1)
            assert first["lastBooking"] == {
                "customer": customer,
                "trip": None,
                "eventTime": None,
                "offset": "-1",
            }
            row = {
                "key": customer,
                "event_ms": 1_700_000_000_000,
                "source_partition": 0,
                "source_offset": 7,
                "fields": {"trip": "lisbon"},
            }
            log.append(customer, row)
            await running.publish()
            (update,) = await take(results, 1)
            assert update["lastBooking"]["trip"] == "lisbon"
            assert update["lastBooking"]["eventTime"] == "2023-11-14T22:13:20+00:00"
            await results.aclose()  # type: ignore[union-attr]

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("after", "message"),
    [
        ("garbage", "view word_counts: `after` 'garbage' is no resume token"),
        (ResumeToken("last_booking", {0: 1}).text(), "a resume token of view last_booking"),
        (ResumeToken("word_counts", {9: 1}).text(), "names partition 9, but the view has 2"),
        ("sf1.bm90IGpzb24", "view word_counts: `after` is a damaged resume token"),
    ],
)
def test_a_malformed_or_foreign_token_is_an_error_naming_the_view_and_the_fix(
    after: str, message: str
) -> None:
    async def scenario() -> None:
        async with cluster(WORDS) as running:
            n1 = await running.node("n1")
            running.route(record(n1, [0, 1]))
            result = await open_subscription(running, COUNT, {"word": "w", "after": after})
            assert isinstance(result, ExecutionResult) and result.errors
            (error,) = result.errors
            assert message in error.message
            assert "leave `after` out to start anew" in error.message
            assert n1.follows_asked == []

    asyncio.run(scenario())


def test_a_view_needing_a_scope_refuses_a_subscriber_without_it() -> None:
    async def scenario() -> None:
        async with cluster(SECURED) as running:
            n1 = await running.node("n1", SECURED)
            running.route(record(n1, [0, 1]))
            query = 'subscription { secretCount(thing: "x") { thing count } }'
            anonymous = await open_subscription(running, query, {})
            assert isinstance(anonymous, ExecutionResult) and anonymous.errors
            assert "read:secrets" in anonymous.errors[0].message
            holder = Principal("alice", frozenset({"read:secrets"}), True)
            allowed = await open_subscription(running, query, {}, holder)
            (first,) = await take(allowed, 1)
            assert first == {"secretCount": {"thing": "x", "count": None}}
            await allowed.aclose()  # type: ignore[union-attr]

    asyncio.run(scenario())
