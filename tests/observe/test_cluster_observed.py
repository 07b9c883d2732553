"""Observing a real cluster (embedded broker, one node, the gateway, each a `statefed`
process with JSON logs at debug level and OTLP export to a receiver in the test): `/metrics`
of both parts move with produces and queries, the node's lag gauges equal what `cluster`
says, promtool accepts both outputs, a real Prometheus scrapes both, one client request
carries one request id and one trace id through both parts' logs, and its spans arrive as
one trace."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from schema import WORD_COUNTS, CountRow
from tests.node.harness import produce_counts
from tests.observe.support import (
    PROMETHEUS,
    OtlpReceiver,
    promtool_check,
    scrape,
    series,
    total,
)
from tooling.broker import free_port
from tooling.localcluster import LocalCluster
from tooling.processes import poll_client, wait_until

pytestmark = pytest.mark.timeout(300)

LOOKUP = "query($w: [String!]!) { wordCounts(words: $w) { word count } }"
CLUSTER = "{ cluster { partitions { partition node role appliedOffset endOffset lag } } }"
# a line of Python's text log format: what JSON logs must not contain
_TEXT_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING|ERROR) ")


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, otlp: OtlpReceiver) -> Iterator[LocalCluster]:
    env = {
        **os.environ,
        "STATEFED_LOG_FORMAT": "json",
        "STATEFED_LOG_LEVEL": "debug",
        "STATEFED_HEARTBEAT_MS": "250",
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    base = Path(tmp_path_factory.mktemp("observed"))
    with LocalCluster(base, partitions=6, env=env) as cluster:
        cluster.start_broker()
        cluster.start_node("n1")
        cluster.start_gateway()
        cluster.wait_routable()
        yield cluster


def _gateway(local: LocalCluster) -> str:
    return local.gateway_url.removesuffix("/graphql")


def _ask(local: LocalCluster, words: list[str], headers: dict[str, str] | None = None) -> Any:
    body = {"query": LOOKUP, "variables": {"w": words}}
    with poll_client(timeout_s=10.0) as http:
        response = http.post(local.gateway_url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response


def test_counters_move_after_produces_and_queries(local: LocalCluster) -> None:
    node, gateway = local.node_urls["n1"], _gateway(local)
    _, node_before = scrape(node)
    _, gateway_before = scrape(gateway)
    words = [f"obs-{uuid.uuid4().hex[:8]}-{i}" for i in range(60)]
    produce_counts(local.bootstrap, WORD_COUNTS, [CountRow(w, 3, 0) for w in words])
    applied_before = total(node_before, "statefed_node_applied_offset", view="word_counts")
    wait_until(
        lambda: (
            total(scrape(node)[1], "statefed_node_applied_offset", view="word_counts")
            >= applied_before + len(words)
        ),
        30,
        "the node's applied offsets to move by the records produced",
    )
    for _ in range(3):
        rows = _ask(local, words).json()["data"]["wordCounts"]
        assert [r["count"] for r in rows] == [3] * len(words)
    refused = httpx.post(local.gateway_url, json={"query": "{ nope }"}, timeout=10)
    assert refused.status_code in (200, 400)

    _, gateway_after = scrape(gateway)
    _, node_after = scrape(node)

    def moved(name: str, before: Any, after: Any, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    executed = "statefed_gateway_request_duration_seconds_count"
    labels = {"operation": "query", "root_field": "wordCounts"}
    assert moved(executed, gateway_before, gateway_after, **labels) == 3
    invalid = {"code": "GRAPHQL_VALIDATION_FAILED"}
    assert moved("statefed_gateway_errors_total", gateway_before, gateway_after, **invalid) == 1
    # the gateway cache holds none of the new keys, so their reads do not look in it: the
    # node is asked
    calls = "statefed_gateway_node_call_duration_seconds_count"
    assert moved(calls, gateway_before, gateway_after, node="n1") >= 1
    assert moved("statefed_gateway_coalesced_lookups_count", gateway_before, gateway_after) >= 1
    assert moved("statefed_node_request_duration_seconds_count", node_before, node_after) >= 1
    assert moved("statefed_node_store_reads_total", node_before, node_after) >= 1
    assert moved("statefed_gateway_cache_skipped_total", gateway_before, gateway_after) >= 3
    assert moved("statefed_gateway_cache_hits_total", gateway_before, gateway_after) == 0
    assert total(node_after, "statefed_node_state", state="RUNNING") == 1
    # asked again and again (a multi-key lookup that skips counts its keys one time in 16),
    # the keys are admitted and filled, and asking again is answered from the cache
    hits = total(gateway_after, "statefed_gateway_cache_hits_total")

    def hit() -> bool:
        _ask(local, words)
        return total(scrape(gateway)[1], "statefed_gateway_cache_hits_total") >= hits + 60

    # about 48 asks: three of them drawn to count, one in 16
    wait_until(hit, 90, "the gateway cache to answer the keys", 0.05)


def test_the_nodes_lag_gauges_equal_what_cluster_says(local: LocalCluster) -> None:
    node = local.node_urls["n1"]
    produce_counts(local.bootstrap, WORD_COUNTS, [CountRow(f"lag-{i}", 1, 0) for i in range(30)])
    seen: dict[str, Any] = {}

    def equal() -> bool:
        body = httpx.post(local.gateway_url, json={"query": CLUSTER}, timeout=10).json()
        copies = [c for c in body["data"]["cluster"]["partitions"] if c["node"] == "n1"]
        said = {  # offsets and lag are Longs: strings of decimal digits
            (("partition", str(c["partition"])), ("role", c["role"])): (
                int(c["lag"]),
                int(c["appliedOffset"]),
                int(c["endOffset"]),
            )
            for c in copies
        }
        samples = scrape(node)[1]
        lag = series(samples, "statefed_node_lag_records")
        applied = _per_copy(series(samples, "statefed_node_applied_offset"))
        end = _per_copy(series(samples, "statefed_node_end_offset"))
        gauged = {k: (lag[k], applied.get(k), end.get(k)) for k in lag}
        seen.update(said=said, gauged=gauged)
        return len(said) == 6 and said == gauged

    try:
        wait_until(equal, 30, "the node's gauges to equal the cluster query's", 0.2)
    except TimeoutError:
        raise AssertionError(f"cluster and /metrics differ: {seen}") from None


def _per_copy(by_view: dict[tuple[tuple[str, str], ...], float]) -> dict[Any, float]:
    """Per-view gauges summed per (partition, role), as `cluster` sums them."""
    summed: dict[Any, float] = {}
    for labels, value in by_view.items():
        have = dict(labels)
        key = (("partition", have["partition"]), ("role", have["role"]))
        summed[key] = summed.get(key, 0) + value
    return summed


def test_promtool_accepts_the_gateway_and_node_metrics(local: LocalCluster) -> None:
    _ask(local, ["promtool"])  # so the labelled histograms have series
    for url in (_gateway(local), local.node_urls["n1"]):
        text, samples = scrape(url)
        assert samples, url
        promtool_check(text)


def test_a_real_prometheus_scrapes_the_gateway_and_a_node(
    local: LocalCluster, tmp_path: Path
) -> None:
    _ask(local, ["prometheus"])
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {
                "job_name": "statefed",
                "static_configs": [
                    {
                        "targets": [
                            _gateway(local).removeprefix("http://"),
                            local.node_urls["n1"].removeprefix("http://"),
                        ]
                    }
                ],
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    command = [
        PROMETHEUS,
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
    ]
    with open(tmp_path / "prometheus.log", "wb") as log:
        prometheus = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        api = f"http://127.0.0.1:{port}/api/v1/query"
        found: dict[str, list[Any]] = {}

        def read(query: str) -> bool:
            assert prometheus.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                with poll_client(timeout_s=5.0) as http:
                    answer = http.get(api, params={"query": query})
            except httpx.TransportError:
                return False
            if answer.status_code == 503:  # listening, but its storage not yet ready
                return False
            found[query] = answer.json().get("data", {}).get("result", [])
            return bool(found[query])

        gateway_query = 'statefed_gateway_request_duration_seconds_count{root_field="wordCounts"}'
        node_query = 'statefed_node_applied_offset{view="word_counts"}'
        wait_until(lambda: read(gateway_query), 60, "Prometheus to have the gateway's metric", 0.5)
        wait_until(lambda: read(node_query), 60, "Prometheus to have the node's metric", 0.5)
        assert float(found[gateway_query][0]["value"][1]) >= 1
        partitions = {r["metric"]["partition"] for r in found[node_query]}
        assert partitions == {str(p) for p in range(6)}
    finally:
        prometheus.terminate()
        try:
            prometheus.wait(30)
        except subprocess.TimeoutExpired:  # it did not stop on SIGTERM
            prometheus.kill()
            prometheus.wait(10)


def test_one_request_id_and_trace_id_in_the_gateway_and_node_logs(
    local: LocalCluster, otlp: OtlpReceiver
) -> None:
    request_id = f"obs-{uuid.uuid4().hex}"
    trace_id, parent = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    headers = {"x-request-id": request_id, "traceparent": f"00-{trace_id}-{parent}-01"}
    answer = _ask(local, [f"never-asked-{uuid.uuid4().hex}"], headers)  # a miss: the node is asked
    assert answer.headers["x-request-id"] == request_id
    gateway_log = local.base_dir / "gateway.log"
    node_log = local.base_dir / "node-n1.log"

    def mine(path: Path) -> list[dict[str, Any]]:
        return [line for line in _json_lines(path) if line.get("request_id") == request_id]

    wait_until(lambda: mine(gateway_log) and mine(node_log), 20, "the request in both logs", 0.2)
    for line in mine(gateway_log):
        assert line["part"] == "gateway" and line["trace_id"] == trace_id, line
    at_node = mine(node_log)
    for line in at_node:
        assert line["part"] == "node" and line["node"] == "n1", line
        assert line["trace_id"] == trace_id and line["span_id"] != parent, line
        assert {"time", "level", "logger", "message"} <= set(line), line

    # the same request as spans of one trace: gateway request > plan > node call > node request
    def spans() -> dict[tuple[str, str], dict[str, str]]:
        return {(s["service"], s["name"]): s for s in otlp.spans() if s["trace_id"] == trace_id}

    wanted = {
        ("statefed-gateway", "request"),
        ("statefed-gateway", "plan"),
        ("statefed-gateway", "node call"),
        ("statefed-node", "request"),
    }
    wait_until(lambda: wanted <= set(spans()), 30, "the request's spans at the receiver", 0.2)
    got = spans()
    assert got[("statefed-gateway", "request")]["parent"] == parent
    request = got[("statefed-gateway", "request")]
    assert got[("statefed-gateway", "plan")]["parent"] == request["span_id"]
    node_call = got[("statefed-gateway", "node call")]
    assert got[("statefed-node", "request")]["parent"] == node_call["span_id"]
    assert {line["span_id"] for line in at_node} == {got[("statefed-node", "request")]["span_id"]}


def _json_lines(path: Path) -> list[dict[str, Any]]:
    """Every log line of `path` that is a JSON object; no line may be a text log line."""
    lines = []
    for text in path.read_text(errors="replace").splitlines():
        assert not _TEXT_LOG_LINE.match(text), f"a text log line in {path.name}: {text}"
        if text.startswith("{"):
            lines.append(json.loads(text))
    return lines
