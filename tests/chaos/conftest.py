"""A cluster of its own for the chaos tests: broker, one Spark pipeline for the package,
nodes n1-n3 with one standby replica each, and a gateway that reads standbys within
`MAX_LAG` records when an active copy cannot answer. Tests add, kill, stop, freeze
(SIGSTOP) and slow down nodes."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.node.harness import settled
from tooling.localcluster import LocalCluster
from tooling.processes import poll_client, wait_until

P = 6
MAX_LAG = 1000


_PREFIXES: set[str] = set()


def words(prefix: str) -> list[str]:
    """40 words of one test: each test counts words of its own from 0, so a prefix is
    taken once per session (the tests share one cluster, and its counts)."""
    if prefix in _PREFIXES:
        raise ValueError(f"words({prefix!r}) is taken by another chaos test: pick a new prefix")
    _PREFIXES.add(prefix)
    return [f"{prefix}{i:02d}" for i in range(40)]


class ChaosCluster:
    """The running cluster and what the tests need to drive it: the live nodes."""

    def __init__(self, local: LocalCluster) -> None:
        self.local = local

    def live(self) -> list[str]:
        return sorted(n for n, process in self.local.nodes.items() if process.running())

    def healths(self, http: httpx.Client) -> dict[str, dict[str, Any]]:
        found = {}
        for node_id in self.live():
            try:
                found[node_id] = http.get(f"{self.local.node_urls[node_id]}/health").json()
            except (httpx.HTTPError, ValueError):
                found[node_id] = {}
        return found

    def stable(self, http: httpx.Client, gateway: str) -> bool:
        """Every live node RUNNING and caught up, the partitions split over all of them,
        each partition with a caught-up standby, and the gateway routing exactly them."""
        healths = self.healths(http)
        if not _group_stable(healths):
            return False
        try:
            routing = http.get(gateway.replace("/graphql", "/health")).json()
        except (httpx.HTTPError, ValueError):
            return False
        alive = {n["id"] for n in routing["nodes"] if n["alive"]}
        return routing["routable"] == list(range(P)) and alive == set(healths)

    def wait_stable(self, gateway: str, timeout_s: float = 120.0) -> float:
        """Poll until `stable`; returns when it was first seen (monotonic time)."""
        with poll_client(timeout_s=5.0) as http:
            try:
                wait_until(lambda: self.stable(http, gateway), timeout_s, "a stable group")
            except TimeoutError as exc:
                raise AssertionError(f"{exc}: {self.healths(http)}") from None
        return time.monotonic()


def _group_stable(healths: dict[str, dict[str, Any]]) -> bool:
    if not settled(healths.values(), P):
        return False
    copies = [c for h in healths.values() for c in h["partitions"]]
    standbys = {c["partition"] for c in copies if c["role"] == "STANDBY"}
    return len(healths) < 2 or standbys == set(range(P))


@pytest.fixture(scope="package")
def chaos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosCluster]:
    base = Path(tmp_path_factory.mktemp("chaos"))
    env = {
        **os.environ,
        "STATEFED_STANDBY_REPLICAS": "1",
        "STATEFED_GATEWAY_MAX_LAG": str(MAX_LAG),
    }
    with LocalCluster(base, partitions=P, env=env, progress=print) as local:
        local.start_all(("n1", "n2", "n3"))
        yield ChaosCluster(local)
