"""A node SIGKILLed in the middle of a whole-view scan, on the real broker with real nodes and
the gateway under uvicorn: with standby copies the scan completes from them; without, the
killed node's partitions are PARTITION_UNAVAILABLE (with the rest of each page in `data`)
and the page's cursor resumes them once another node holds them. Either way every key
comes exactly once."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.cluster.pipeline import StatusBoard
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.model.errors import Reason
from runtime.topics import ensure_topics, statefed_topics
from schema import CountRow, View
from tests.gateway.fakes import ServerThread
from tests.node.harness import (
    P,
    ThreadNode,
    health,
    node_config,
    produce_counts,
    spawn_node,
    unique_count_view,
)
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

pytestmark = pytest.mark.timeout(300)

SCAN = (
    "query($n: Int!, $a: String) { allWordCounts(first: $n, after: $a) "
    "{ edges { node { word count } } pageInfo { hasNextPage endCursor } } }"
)
PAGE = 10


class Scanner:
    """A scan paged by the test: the rows, errors and freshness of every page so far."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        self.cursor: str | None = None
        self.done = False
        self.rows: list[tuple[str, int]] = []
        self.errors: list[dict[str, Any]] = []
        self.roles: Counter[str] = Counter()

    def next_page(self) -> bool:
        """Read one page; whether the scan is over."""
        variables = {"n": PAGE, "a": self.cursor}
        document = self.http.post("/graphql", json={"query": SCAN, "variables": variables}).json()
        page = document["data"]["allWordCounts"]
        self.rows.extend((e["node"]["word"], e["node"]["count"]) for e in page["edges"])
        self.errors.extend(document.get("errors", []))
        self.roles.update(entry["role"] for entry in document["extensions"]["freshness"])
        self.done = not page["pageInfo"]["hasNextPage"]
        self.cursor = page["pageInfo"]["endCursor"]
        return self.done


@dataclasses.dataclass
class TwoNodes:
    """Node a in a child process (to be SIGKILLed), node b in this one, and a gateway."""

    view: View
    truth: dict[str, int]
    a: subprocess.Popen[bytes]
    a_id: str
    b: ThreadNode
    http: httpx.Client


def _routed(http: httpx.Client, node_ids: set[str]) -> bool:
    doc = http.get("/health").json()
    alive = {n["id"] for n in doc["nodes"] if n["alive"]}
    return doc["routable"] == list(range(P)) and node_ids <= alive


def _split(a: dict[str, Any], b: dict[str, Any], standbys: bool) -> bool:
    """Both RUNNING with the partitions split and caught up; each the standby of the
    other's partitions when `standbys`."""
    if a["state"] != "RUNNING" or b["state"] != "RUNNING" or not a["active"] or not b["active"]:
        return False
    if sorted(a["active"] + b["active"]) != list(range(P)):
        return False
    if standbys and (a["standby"] != b["active"] or b["standby"] != a["active"]):
        return False
    return not any(c["restoring"] or c["lag"] for c in a["partitions"] + b["partitions"])


@pytest.fixture(params=[1, 0], ids=["standbys", "no-standbys"])
def two_nodes(
    request: pytest.FixtureRequest, broker: KafkaBroker, tmp_path: Path
) -> Iterator[TwoNodes]:
    replicas = str(request.param)
    view = unique_count_view()
    ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
    truth = {f"k{uuid.uuid4().hex[:6]}-{i:03d}": 1 + i % 5 for i in range(150)}
    produce_counts(broker.bootstrap, view, [CountRow(k, n, 0) for k, n in truth.items()])
    group = f"g-{view.name}"
    extra = {"STATEFED_STANDBY_REPLICAS": replicas}
    config_a = node_config(broker.bootstrap, tmp_path, f"sa-{uuid.uuid4().hex[:4]}", group, **extra)
    config_b = node_config(broker.bootstrap, tmp_path, f"sb-{uuid.uuid4().hex[:4]}", group, **extra)
    a = spawn_node(config_a, view, tmp_path / "a.log")
    b: ThreadNode | None = None
    try:
        with httpx.Client(base_url=config_a.url, timeout=5) as client_a:

            def a_health() -> dict[str, Any] | None:
                try:
                    return health(client_a)
                except httpx.TransportError:
                    assert a.poll() is None, (tmp_path / "a.log").read_text()
                    return None

            wait_until(a_health, 40, "node a to serve")
            b = ThreadNode(config_b, [view]).start()
            wait_until(
                lambda: (h := a_health()) is not None and _split(h, b.health(), replicas == "1"),
                90,
                "a and b RUNNING with the partitions split",
            )
        gateway_config = GatewayConfig(bootstrap=broker.bootstrap, timeout_ms=3000, retries=3)
        app = GatewayApp(gateway_config, statuses=StatusBoard(), catalogue=(view,))
        with (
            ServerThread(app, lifespan="on") as server,
            httpx.Client(base_url=server.url, timeout=30) as http,
        ):
            wait_until(
                lambda: _routed(http, {config_a.node_id, config_b.node_id}),
                30,
                "the gateway to route a and b",
            )
            yield TwoNodes(view, truth, a, config_a.node_id, b, http)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait(10)
        if b is not None:
            b.stop()


def test_a_node_killed_mid_scan_skips_and_repeats_nothing(two_nodes: TwoNodes) -> None:
    scanner = Scanner(two_nodes.http)
    assert not scanner.next_page() and len(scanner.rows) == PAGE
    two_nodes.a.send_signal(signal.SIGKILL)
    two_nodes.a.wait(10)
    # each call reads one more page: the scan goes on through the failover
    wait_until(scanner.next_page, 90, lambda: f"the scan to end ({len(scanner.rows)} rows)", 0.1)

    keys = [key for key, _ in scanner.rows]
    assert len(keys) == len(set(keys)), "a key came twice"
    assert dict(scanner.rows) == two_nodes.truth
    for error in scanner.errors:
        extensions = error["extensions"]
        assert extensions["code"] == "PARTITION_UNAVAILABLE", error
        assert extensions["reason"] in set(Reason), error
    reasons = Counter((e["extensions"]["reason"], e["extensions"]["node"]) for e in scanner.errors)
    print(
        f"{len(scanner.rows)} rows; errors by (reason, node): {dict(reasons)}; "
        f"partitions read by role: {dict(scanner.roles)}"
    )
    if two_nodes.b.config.standby_replicas:
        assert scanner.roles["STANDBY"] > 0, scanner.roles
    else:
        # without a standby, the killed node's partitions failed until b took them over,
        # and the cursors resumed them
        assert scanner.errors, "no page missed the killed node's partitions"
        assert {node for _, node in reasons} <= {two_nodes.a_id, two_nodes.b.config.node_id}
