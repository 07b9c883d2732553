"""`MetricsServer` (the pipeline driver's `/metrics`, over real HTTP on a loopback port):
open to anyone without a guard or without STATEFED_METRICS_TOKEN_FILE, and with the token
file only for its bearer token, refusing the rest with the gateway's and nodes' 401; a
token file it cannot use stops `start` (and the pipeline's start-up) naming the variable."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from pipeline.config import PipelineConfig
from pipeline.metrics import PipelineMetrics
from pipeline.run import _serve_metrics
from runtime.config import ConfigError
from runtime.metrics import MIN_TOKEN_BYTES, TOKEN_VARIABLE, MetricsGuard, MetricsServer

TOKEN = "0123456789abcdef" * 4
METRIC = "statefed_test_scrapes_total"


def token_file(tmp_path: Path, text: str = TOKEN + "\n") -> Path:
    path = tmp_path / "metrics.token"
    path.write_text(text)
    return path


@contextmanager
def serving(guard: MetricsGuard | None) -> Iterator[httpx.Client]:
    """A started server of a registry holding METRIC, and a client of its address."""
    registry = CollectorRegistry()
    Counter(METRIC.removesuffix("_total"), "scrapes", registry=registry).inc()
    server = MetricsServer(registry, "127.0.0.1", 0, guard)
    server.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", trust_env=False) as http:
            yield http
    finally:
        server.stop()


def assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="statefed-metrics"'
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    (error,) = response.json()["errors"]
    assert TOKEN_VARIABLE in error["message"]
    assert error["extensions"]["code"] == "UNAUTHENTICATED"
    assert TOKEN not in response.text
    assert METRIC not in response.text


def test_without_a_guard_anyone_scrapes() -> None:
    with serving(None) as http:
        for headers in ({}, {"authorization": "Bearer whatever"}):
            response = http.get("/metrics", headers=headers, timeout=5)
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/plain")
            assert METRIC in response.text


def test_a_guard_without_a_token_file_leaves_it_open() -> None:
    with serving(MetricsGuard(None)) as http:
        response = http.get("/metrics", timeout=5)
    assert response.status_code == 200
    assert METRIC in response.text


def test_with_the_token_file_only_its_bearer_token_scrapes(tmp_path: Path) -> None:
    with serving(MetricsGuard(token_file(tmp_path))) as http:
        refused = [
            http.get("/metrics", timeout=5),
            http.get("/metrics", headers={"authorization": f"Basic {TOKEN}"}, timeout=5),
            http.get("/metrics", headers={"authorization": f"Bearer {TOKEN}x"}, timeout=5),
            http.get("/metrics", headers={"authorization": "Bearer"}, timeout=5),
            http.get("/other", timeout=5),  # prometheus_client answers every path
        ]
        right = http.get("/metrics", headers={"authorization": f"bearer  {TOKEN}"}, timeout=5)
    for response in refused:
        assert_refused(response)
    assert right.status_code == 200
    assert right.headers["content-type"].startswith("text/plain")
    assert f"{METRIC} 1.0" in right.text


@pytest.mark.parametrize(
    "text", ["", "  \n", "x" * (MIN_TOKEN_BYTES - 1), "with a space".ljust(MIN_TOKEN_BYTES, "y")]
)
def test_an_unusable_token_file_stops_the_start(tmp_path: Path, text: str) -> None:
    server = MetricsServer(
        CollectorRegistry(), "127.0.0.1", 0, MetricsGuard(token_file(tmp_path, text))
    )
    with pytest.raises(ConfigError, match=TOKEN_VARIABLE) as raised:
        server.start()
    assert raised.value.variable == TOKEN_VARIABLE
    server.stop()  # nothing started: nothing to stop


def test_a_missing_token_file_stops_the_start(tmp_path: Path) -> None:
    server = MetricsServer(
        CollectorRegistry(), "127.0.0.1", 0, MetricsGuard(tmp_path / "absent.token")
    )
    with pytest.raises(ConfigError, match=f"{TOKEN_VARIABLE}: cannot read"):
        server.start()


def test_the_pipeline_reads_the_setting_and_refuses_a_short_token_before_serving(
    tmp_path: Path,
) -> None:
    short = token_file(tmp_path, "x" * (MIN_TOKEN_BYTES - 1))
    # the port is never bound: the token is read first
    env = {"STATEFED_PIPELINE_METRICS_PORT": "9400", TOKEN_VARIABLE: str(short)}
    config = PipelineConfig.from_env(env)
    assert config.metrics_token_file == short
    with pytest.raises(
        ConfigError, match=f"{TOKEN_VARIABLE}: .* holds {MIN_TOKEN_BYTES - 1} bytes"
    ):
        _serve_metrics(config, PipelineMetrics())
    # without a metrics port nothing is served, and the token file is not read
    unserved = PipelineConfig.from_env({TOKEN_VARIABLE: str(short)})
    assert _serve_metrics(unserved, PipelineMetrics()) is None
