"""The gateway cache (gateway.reads.cache) against the nodes: one gateway with the cache on
(the cluster's, by default) and one with it off (STATEFED_GATEWAY_CACHE=false) serve the
same cluster of three nodes, under a random interleaving of produces, queries and node
restarts (graceful and SIGKILL).

Two checks per query step, on both gateways alike:
- point lookups with `atLeast` (the token of the key's newest write) answer exactly what the
  model computes: a cache hit must then hold every change the token needs;
- multi-key lookups (count and latest views) and the top-N without `atLeast` come to answer
  what the model computes, the same on both: a cached row or top the feed failed to replace
  would stay wrong.
The cache gateway must have answered keys and a top from memory (its /health `cache`
counts) and filled rows from the node reads that missed them, so the checks are of the
cache, not only of its fallback; and once nothing is
produced any more, its `extensions.freshness` from memory equals the nodes'.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from runtime.produce import Record, Write, produce_records
from tests.e2e.conftest import Cluster
from tooling.broker import free_port
from tooling.processes import ManagedProcess, poll_client, wait_until

WORDS = 5
CUSTOMERS = 3
TRIPS = ("LIS-BER", "BER-OSL", "OSL-LIS")
NODES = ("d1", "d2", "d3")
REBALANCE_S = 300.0
_examples = itertools.count()
Step = tuple[str, list[int]]

produce_words = st.tuples(
    st.just("words"), st.lists(st.integers(0, WORDS - 1), min_size=1, max_size=8)
)
produce_bookings = st.tuples(
    st.just("bookings"), st.lists(st.integers(0, CUSTOMERS - 1), min_size=1, max_size=4)
)
point_queries = st.tuples(
    st.just("point"), st.lists(st.integers(0, WORDS - 1), min_size=1, max_size=3)
)
many_queries = st.tuples(st.just("many"), st.just(list[int]()))
steps = st.lists(
    st.one_of(produce_words, produce_bookings, point_queries, many_queries),
    min_size=6,
    max_size=12,
)
# every plan restarts one node gracefully and SIGKILLs one, at places hypothesis picks
restarts = st.tuples(st.sampled_from(["restart", "kill"]), st.integers(0, len(NODES) - 1))
plans = st.tuples(steps, st.lists(st.tuples(st.integers(0, 12), restarts), min_size=2, max_size=2))


def _interleaved(plan: tuple[list[Step], list[tuple[int, tuple[str, int]]]]) -> list[Step]:
    steps, stops = plan
    merged = list(steps)
    kinds = ["restart", "kill"]
    for (at, (_, node)), kind in zip(stops, kinds, strict=True):
        merged.insert(min(at, len(merged)), (kind, [node]))
    return merged


@dataclass
class Gateways:
    cached: str
    uncached: str
    http: httpx.Client

    def stats(self) -> dict[str, int]:
        body = self.http.get(self.cached.replace("/graphql", "/health")).json()
        assert "cache" in body, "the cluster's gateway runs without its cache"
        stats: dict[str, int] = body["cache"]
        return stats


@dataclass
class Model:
    prefix: str
    epoch_ms: int
    counts: Counter[str] = field(default_factory=Counter)
    last_write: dict[str, Write] = field(default_factory=dict)
    bookings: dict[str, tuple[str, int]] = field(default_factory=dict)
    at_ms: int = 0

    def word(self, index: int) -> str:
        return f"{self.prefix}w{index}"

    def customer(self, index: int) -> str:
        return f"{self.prefix}c{index}"


@pytest.fixture(scope="module")
def gateways(grown_cluster: Cluster) -> Iterator[Gateways]:
    local = grown_cluster.local
    for node_id in NODES:
        if node_id not in local.nodes:
            local.start_node(node_id)
    local.wait_routable()
    port = free_port()
    env = local.env(STATEFED_GATEWAY_PORT=str(port), STATEFED_GATEWAY_CACHE="false")
    log = local.base_dir / "gateway-uncached.log"
    uncached = ManagedProcess("gateway (cache off)", ["gateway"], env, log).start()
    try:
        uncached.wait_for_http(f"http://127.0.0.1:{port}/health", 60)
        with httpx.Client(timeout=30.0) as http:
            health = http.get(f"http://127.0.0.1:{port}/health").json()
            assert "cache" not in health, "STATEFED_GATEWAY_CACHE=false left the cache on"
            yield Gateways(local.gateway_url, f"http://127.0.0.1:{port}/graphql", http)
    finally:
        uncached.stop()


def _answer(gateways: Gateways, url: str, query: str, variables: dict[str, Any]) -> Any:
    """The data of a query, or None when it failed (a node restarting, a read timing out)."""
    try:
        body = gateways.http.post(url, json={"query": query, "variables": variables}).json()
    except (httpx.HTTPError, ValueError):
        return None
    return None if body.get("errors") else body.get("data")


def _produce(cluster: Cluster, model: Model, topic: str, indexes: list[int]) -> None:
    bootstrap = cluster.local.bootstrap
    if topic == "words":
        keys = [model.word(i) for i in indexes]
        records = [Record(k, b"") for k in keys]
        model.counts.update(keys)
    else:
        records = []
        for index in indexes:
            model.at_ms += 1000
            at, trip = model.epoch_ms + model.at_ms, TRIPS[(index + model.at_ms // 1000) % 3]
            value = orjson.dumps({"timestamp": at, "trip": trip})
            records.append(Record(model.customer(index), value, at))
            model.bookings[model.customer(index)] = (trip, at)
    for write in produce_records(bootstrap, topic, records):
        model.last_write[write.key] = write
    cluster.saw_event_times(r.timestamp_ms or 0 for r in records)


POINT = "query($k: String!, $t: String) { wordCount(word: $k, atLeast: $t) { word count } }"
MANY = (
    "query($w: [String!]!, $c: [String!]!) { wordCounts(words: $w) { word count }"
    " wordTallies(terms: $w) { term count } lastBookings(customers: $c) { customer trip }"
    " topWords(limit: 1000) { word count } }"
)


def _point_step(gateways: Gateways, model: Model, indexes: list[int]) -> None:
    for index in dict.fromkeys(indexes):
        word = model.word(index)
        write = model.last_write.get(word)
        token = None if write is None else f"words:{write.partition}:{write.offset}"
        count = model.counts[word]
        expected = {"wordCount": {"word": word, "count": count} if count else None}
        for url in (gateways.cached, gateways.uncached):
            answer = _answered(gateways, url, {"k": word, "t": token})
            # an answer given at least as of the key's newest write is that write's count
            assert answer == expected, (url, word, token)


def _answered(gateways: Gateways, url: str, variables: dict[str, Any]) -> Any:
    last: list[Any] = [None]

    def answered() -> bool:
        last[0] = _answer(gateways, url, POINT, variables)
        return last[0] is not None

    wait_until(answered, 60, f"{url} to answer wordCount {variables}")
    return last[0]


def _many_expected(model: Model) -> dict[str, Any]:
    words = [model.word(i) for i in range(WORDS)]
    rows = [{"word": w, "count": model.counts[w]} if model.counts[w] else None for w in words]
    tallies = [{"term": w, "count": model.counts[w]} if model.counts[w] else None for w in words]
    bookings = [
        {"customer": c, "trip": model.bookings[c][0]} if c in model.bookings else None
        for c in (model.customer(i) for i in range(CUSTOMERS))
    ]
    ranked = sorted((w for w in words if model.counts[w]), key=lambda w: (-model.counts[w], w))
    top = [{"word": w, "count": model.counts[w]} for w in ranked]
    return {"wordCounts": rows, "wordTallies": tallies, "lastBookings": bookings, "topWords": top}


def _ours(model: Model, data: Any) -> Any:
    """`data` with only this example's words in its top (the cluster holds others too)."""
    if data is None:
        return None
    top = [row for row in data["topWords"] if row["word"].startswith(model.prefix)]
    return {**data, "topWords": top}


def _many_step(gateways: Gateways, model: Model) -> None:
    variables = {
        "w": [model.word(i) for i in range(WORDS)],
        "c": [model.customer(i) for i in range(CUSTOMERS)],
    }
    expected = _many_expected(model)
    for url in (gateways.cached, gateways.uncached):
        last: list[Any] = [None]

        def agrees(url: str = url, last: list[Any] = last) -> bool:
            last[0] = _ours(model, _answer(gateways, url, MANY, variables))
            return bool(last[0] == expected)

        try:
            wait_until(agrees, 90, f"{url} to answer what the model computes", 0.2)
        except TimeoutError:
            raise AssertionError(f"{url} answers {last[0]}, the model {expected}") from None


def _settled(cluster: Cluster) -> None:
    """Wait until every node runs and owns partitions. A node killed while the group
    rebalances stalls the group until the rebalance times out (minutes): the restarts
    perturb the produces and queries after them, not each other."""
    health = cluster.local.gateway_url.replace("/graphql", "/health")

    def settled() -> bool:
        try:
            body = http.get(health).json()
        except (httpx.HTTPError, ValueError):
            return False
        nodes = body.get("nodes", [])
        running = [n for n in nodes if n["alive"] and n["state"] == "RUNNING" and n["active"]]
        return len(running) == len(NODES) and len(body.get("routable", [])) == body["partitions"]

    with poll_client(timeout_s=2.0) as http:
        wait_until(settled, REBALANCE_S, "every node to run and own partitions")


def _restart(cluster: Cluster, kind: str, indexes: list[int]) -> None:
    _settled(cluster)
    local = cluster.local
    node_id = NODES[indexes[0] if indexes else 0]
    process = local.nodes[node_id]
    if kind == "kill":
        process.kill()
    else:
        process.stop()
    local.start_node(node_id)


_SETTINGS = settings(
    max_examples=3,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # each example costs real processing
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_SETTINGS
@given(plan=plans)
def test_answers_with_the_cache_equal_those_without(
    grown_cluster: Cluster,
    gateways: Gateways,
    plan: tuple[list[Step], list[tuple[int, tuple[str, int]]]],
) -> None:
    model = Model(f"x{next(_examples)}-", grown_cluster.next_epoch_ms())
    before = gateways.stats()
    interleaved = _interleaved(plan)
    print(f"cache differential {model.prefix}: {interleaved}")
    for kind, indexes in interleaved:
        if kind in ("words", "bookings"):
            _produce(grown_cluster, model, kind, indexes)
        elif kind == "point":
            _point_step(gateways, model, indexes)
        elif kind == "many":
            _many_step(gateways, model)
        else:
            _restart(grown_cluster, kind, indexes)
    _point_step(gateways, model, list(range(WORDS)))
    _settled(grown_cluster)  # hits need a RUNNING active owner per partition

    def from_memory() -> bool:  # in the end both agree with the model, from memory too
        _many_step(gateways, model)
        stats = gateways.stats()
        return stats["hits"] > before["hits"] and stats["top_hits"] > before["top_hits"]

    wait_until(from_memory, 60, "the cache gateway to answer keys and the top from memory")
    # its rows came at least partly from the node reads that missed them, not all from
    # snapshots: those fills are checked against the model too
    assert gateways.stats()["filled_from_reads"] > 0, gateways.stats()
    _same_freshness(gateways, model)


def _freshness(gateways: Gateways, url: str, variables: dict[str, Any]) -> Any:
    body = gateways.http.post(url, json={"query": MANY, "variables": variables}).json()
    return (body.get("extensions") or {}).get("freshness")


def _same_freshness(gateways: Gateways, model: Model) -> None:
    """With nothing produced any more, a read answered from memory shows the freshness a
    node read shows: the same copies, applied offsets and lags."""
    variables = {
        "w": [model.word(i) for i in range(WORDS)],
        "c": [model.customer(i) for i in range(CUSTOMERS)],
    }
    last: list[Any] = [None, None]

    def same() -> bool:
        hits = gateways.stats()["hits"]
        last[0] = _freshness(gateways, gateways.cached, variables)
        from_memory = gateways.stats()["hits"] >= hits + WORDS
        last[1] = _freshness(gateways, gateways.uncached, variables)
        return from_memory and last[0] == last[1]

    try:
        wait_until(same, 60, "a hit's freshness to equal a node read's", 0.2)
    except TimeoutError:
        raise AssertionError(f"freshness (cache, nodes): {last}") from None
