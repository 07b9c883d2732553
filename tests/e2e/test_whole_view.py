"""A view held whole (STATEFED_GATEWAY_CACHE_WHOLE_VIEWS) by a real gateway in front of the
cluster's real nodes: once every partition is loaded, a lookup of any key of the view,
counted, absent or produced after the load, is answered from memory (the gateway's cache
counts a hit for every key asked, and no lookup that skipped the cache or missed it) and
equals the ground truth."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Cluster
from tooling.broker import free_port
from tooling.processes import ManagedProcess, wait_until

pytestmark = pytest.mark.timeout(300)

COUNTS = "query($w: [String!]!) { wordCounts(words: $w) { word count } }"


class WholeGateway:
    def __init__(self, url: str, http: httpx.Client) -> None:
        self.url, self.http = url, http

    def cache(self) -> dict[str, int]:
        stats: dict[str, int] = self.http.get(f"{self.url}/health").json()["cache"]
        return stats

    def counts(self, words: list[str]) -> dict[str, int | None]:
        request = {"query": COUNTS, "variables": {"w": words}}
        body = self.http.post(f"{self.url}/graphql", json=request).json()
        assert "errors" not in body, body
        rows: list[Any] = body["data"]["wordCounts"]
        return {w: (r["count"] if r else None) for w, r in zip(words, rows, strict=True)}


@pytest.fixture
def whole_gateway(cluster: Cluster) -> Iterator[WholeGateway]:
    local = cluster.local
    port = free_port()
    env = local.env(
        STATEFED_GATEWAY_PORT=str(port), STATEFED_GATEWAY_CACHE_WHOLE_VIEWS="word_counts"
    )
    log = local.base_dir / "gateway-whole.log"
    gateway = ManagedProcess("gateway (word_counts whole)", ["gateway"], env, log).start()
    try:
        url = f"http://127.0.0.1:{port}"
        gateway.wait_for_http(f"{url}/health", 60)
        with httpx.Client(timeout=30.0) as http:
            yield WholeGateway(url, http)
    finally:
        gateway.stop()


def test_a_view_held_whole_answers_every_key_from_memory_new_and_absent_ones_too(
    cluster: Cluster, whole_gateway: WholeGateway
) -> None:
    tag = uuid.uuid4().hex[:8]
    words = [f"whole{tag}w{i}" for i in range(12)]
    cluster.produce(words + words[:5] + words[:2])
    cluster.wait_counts_equal_truth(words)
    wait_until(lambda: whole_gateway.cache()["whole_views"] == 1, 90, "word_counts held whole", 0.2)
    absent = [f"whole{tag}absent{i}" for i in range(5)]
    asked = words + absent
    truth = {w: cluster.truth[w] or None for w in asked}
    skipped = whole_gateway.cache()["skipped"]

    def from_memory(keys: list[str], expected: Mapping[str, int | None]) -> bool:
        """One lookup of `keys`: whether it answered `expected`, every key a cache hit. A
        lookup met while a feed frame waits to be handled is read from the nodes (a miss),
        and the load may have read below a record the follow then brought: hence polled."""
        before = whole_gateway.cache()
        answered = whole_gateway.counts(keys)
        after = whole_gateway.cache()
        hits, misses = after["hits"] - before["hits"], after["misses"] - before["misses"]
        return answered == expected and (hits, misses) == (len(keys), 0)

    wait_until(lambda: from_memory(asked, truth), 60, "every key from memory = truth", 0.2)
    # a key produced after the load comes by the feed, and is answered from memory too
    new = f"whole{tag}new"
    cluster.produce([new, new, words[0]])
    wanted = {new: 2, words[0]: cluster.truth[words[0]]}
    wait_until(lambda: from_memory(list(wanted), wanted), 60, "the new key from memory", 0.2)
    # the cache held every key, absent and new ones too: no lookup went round it
    assert whole_gateway.cache()["skipped"] == skipped
