"""The gateway process (`python -m gateway` = run_gateway) over real loopback HTTP and the real
broker: membership records published here point at fake nodes served by uvicorn."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer

from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.edge.server import uvicorn_config
from runtime.clock import wall_clock_ms
from runtime.topics import ensure_topics, partition_count, statefed_topics
from schema import (
    CATALOGUE,
    MEMBERS_TOPIC,
    PIPELINE_TOPIC,
    ViewStatus,
    encode_member,
    encode_status,
)
from tests.gateway.fakes import (
    WORDS,
    FakeNode,
    Model,
    ServerThread,
    member,
    round_robin,
    top_truth,
)
from tooling.broker import KafkaBroker, free_port
from tooling.processes import poll_client, wait_until

REPO = Path(__file__).resolve().parents[2]
COUNTS = {f"word{i}": i % 13 + 1 for i in range(200)}


def poll_health(
    url: str, process: subprocess.Popen[bytes], want: set[str], p: int
) -> dict[str, Any]:
    """GET /health until the gateway routes every partition to the nodes in `want`."""
    health: dict[str, Any] = {}

    def routed() -> dict[str, Any] | None:
        nonlocal health
        assert process.poll() is None, "the gateway process exited"
        try:
            health = http.get(f"{url}/health").json()
        except httpx.TransportError:
            health = {}
        alive = {n["id"] for n in health.get("nodes", []) if n["alive"]}
        return health if health.get("routable") == list(range(p)) and want <= alive else None

    with poll_client(timeout_s=2.0) as http:
        return wait_until(
            routed, 60, lambda: f"the gateway to route all {p} partitions: {health}", 0.05
        )


def poll_late_dropped(http: httpx.Client, view: str, want: int) -> list[dict[str, Any]]:
    """Query cluster.views until `view` shows `want` late events dropped."""
    views: list[dict[str, Any]] = []

    def dropped() -> list[dict[str, Any]] | None:
        nonlocal views
        body = http.post(
            "/graphql", json={"query": "{ cluster { views { name kind lateDropped } } }"}
        )
        views = body.json()["data"]["cluster"]["views"]
        return views if {"name": view, "kind": "COUNT", "lateDropped": want} in views else None

    return wait_until(
        dropped, 30, lambda: f"cluster.views to show {want} late events of {view}: {views}", 0.05
    )


def test_gateway_process_serves_queries_from_nodes_found_in_membership(
    broker: KafkaBroker, tmp_path: Path
) -> None:
    ensure_topics(broker.bootstrap, statefed_topics(4))
    p = partition_count(broker.bootstrap, WORDS.changelog_topic)  # whatever an earlier test made
    model = Model.of_counts(COUNTS)
    ids = [f"gw-e2e-{uuid.uuid4().hex[:6]}-{i}" for i in range(2)]
    nodes = [
        FakeNode(ids[i], model, held, p, CATALOGUE) for i, held in enumerate(round_robin(p, 2))
    ]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "gateway.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "STATEFED_BOOTSTRAP": broker.bootstrap,
        "STATEFED_GATEWAY_PORT": str(port),
        "STATEFED_GATEWAY_LOG_LEVEL": "warning",
    }
    with ServerThread(nodes[0]) as first, ServerThread(nodes[1]) as second:
        for node, server in zip(nodes, (first, second), strict=True):
            record = member(
                node.node_id, server.url, node.held, wall_clock_ms(), interval_ms=60_000
            )
            producer.produce(MEMBERS_TOPIC, key=node.node_id.encode(), value=encode_member(record))
        # the newest status of a view is what counts, whatever earlier tests published
        late = uuid.uuid4().int % 1_000_000 + 1
        status = ViewStatus(WORDS.name, batch_id=7, updated_ms=wall_clock_ms(), late_dropped=late)
        producer.produce(PIPELINE_TOPIC, key=WORDS.name.encode(), value=encode_status(status))
        producer.flush(10)
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "gateway"], cwd=REPO, env=env, stdout=out, stderr=out
            )
        try:
            health = poll_health(url, process, set(ids), p)
            assert health["partitions"] == p
            with httpx.Client(base_url=url, trust_env=False, timeout=10) as http:
                top = http.post(
                    "/graphql", json={"query": "{ topWords(limit: 12) { word count } }"}
                )
                words = ["word7", "nope", "word150", "word3"]
                many = http.post(
                    "/graphql",
                    json={
                        "query": "query($w: [String!]!) { wordCounts(words: $w) { word count } }",
                        "variables": {"w": words},
                    },
                )
                page = http.get("/graphql")
                asset = http.get("/static/graphiql.min.js")
                views = poll_late_dropped(http, WORDS.name, late)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                code = process.wait(20)
            except subprocess.TimeoutExpired:  # hung on SIGTERM: killed, and failed below
                process.kill()
                code = process.wait(10)
        for node in nodes:
            producer.produce(MEMBERS_TOPIC, key=node.node_id.encode(), value=None)
        producer.flush(10)
        producer.close()
    output = log.read_text()
    assert code == 0, output
    assert f"statefed gateway: ready on {url}/graphql" in output
    assert top.status_code == 200
    assert top.json()["data"]["topWords"] == top_truth(COUNTS, 12), top.json()
    fresh = top.json()["extensions"]["freshness"]
    assert sorted(f["partition"] for f in fresh) == list(range(p))
    assert many.json()["data"]["wordCounts"] == [
        {"word": w, "count": COUNTS[w]} if w in COUNTS else None for w in words
    ]
    assert page.status_code == 200 and "graphiql.min.js" in page.text
    assert asset.status_code == 200 and len(asset.content) > 100_000
    assert sum(n.requests for n in nodes) <= 4  # one top-N and one lookup per node at most
    assert [v["name"] for v in views] == [v.name for v in CATALOGUE]


def test_nothing_between_uvicorn_and_the_gateway_rewrites_requests_from_proxy_headers() -> None:
    """The gateway trusts no X-Forwarded-* header (docs/security.md): uvicorn's proxy-headers
    middleware, on by default for loopback peers, is not put in front of it."""
    app = GatewayApp(GatewayConfig(), feed=RoutingFeed())
    config = uvicorn_config(app)
    config.load()
    assert config.loaded_app is app
