"""One real local cluster for the end-to-end tests: broker, pipeline, two nodes, gateway.

Every test that produces records adds them to `truth`, the ground truth of everything the
run produced, so any test can compare the system's answers with it.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.produce import produce_keys
from tooling.localcluster import LocalCluster
from tooling.processes import wait_until

_MINUTE_MS = 60_000
# the gateway's request deadline (STATEFED_GATEWAY_TIMEOUT_MS): a read with `atLeast` waits
# up to it for the pipeline, so give a busy 2-core CI machine more than the 5 s default
GATEWAY_TIMEOUT_MS = 20_000


class Cluster:
    """The running cluster plus a GraphQL client and the ground truth of produced words."""

    def __init__(self, local: LocalCluster) -> None:
        self.local = local
        self.truth: Counter[str] = Counter()
        # idle connections dropped before the gateway's 5 s keep-alive would close them
        self.http = httpx.Client(timeout=30.0, limits=httpx.Limits(keepalive_expiry=2.0))
        self._max_event_ms = 0

    def saw_event_times(self, times_ms: Iterable[int]) -> None:
        self._max_event_ms = max(self._max_event_ms, *times_ms, 0)

    def next_epoch_ms(self) -> int:
        """A minute-aligned event-time epoch past every event produced so far (and past
        their grace periods), so a test's windows and watermark start clean."""
        floor = max(time.time_ns() // 1_000_000, self._max_event_ms + 5 * _MINUTE_MS)
        return (floor // _MINUTE_MS + 1) * _MINUTE_MS

    def produce(self, words: list[str]) -> None:
        produce_keys(self.local.kafka, "words", words)  # the settings the parts get
        self.truth.update(words)

    def query(
        self, query: str, variables: dict[str, Any] | None = None, url: str | None = None
    ) -> httpx.Response:
        body = {"query": query, "variables": variables or {}}
        return self.http.post(url or self.local.gateway_url, json=body)

    def data(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The `data` of a query that must succeed without errors."""
        response = self.query(query, variables)
        body = response.json()
        assert response.status_code == 200, body
        assert "errors" not in body, body
        return body["data"]

    def counts(self, words: list[str]) -> dict[str, int | None]:
        rows = self.data(
            "query($w: [String!]!) { wordCounts(words: $w) { word count } }", {"w": words}
        )["wordCounts"]
        return {w: (row["count"] if row else None) for w, row in zip(words, rows, strict=True)}

    def wait_counts_equal_truth(self, words: list[str], timeout_s: float = 120.0) -> None:
        expected = {w: self.truth[w] or None for w in words}
        last: dict[str, int | None] = {}

        def equal() -> bool:
            nonlocal last
            body = self.query(
                "query($w: [String!]!) { wordCounts(words: $w) { word count } }", {"w": words}
            ).json()
            if body.get("errors") or not body.get("data"):
                return False
            rows = body["data"]["wordCounts"]
            last = {w: (r["count"] if r else None) for w, r in zip(words, rows, strict=True)}
            return last == expected

        try:
            wait_until(equal, timeout_s, "gateway counts to equal the ground truth", 0.5)
        except TimeoutError:
            wrong = {w: (last.get(w), expected[w]) for w in words if last.get(w) != expected[w]}
            raise AssertionError(
                f"(got, expected) where they differ: {dict(list(wrong.items())[:20])}"
            ) from None


# Package scope: the cluster (and its Spark JVM) is gone before other packages' tests run.
@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = Path(tmp_path_factory.mktemp("cluster"))
    # the read-your-writes tests write through the gateway's produce mutation (off by default)
    env = {
        **os.environ,
        "STATEFED_GATEWAY_TIMEOUT_MS": str(GATEWAY_TIMEOUT_MS),
        "STATEFED_GATEWAY_PRODUCE": "true",
    }
    with LocalCluster(base, partitions=6, env=env, progress=print) as local:
        local.start_all(("n1", "n2"))
        running = Cluster(local)
        yield running
        running.http.close()
