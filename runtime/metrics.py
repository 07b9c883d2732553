"""Prometheus metrics shared by every part: one registry per app, served as `/metrics`.

Each part keeps its metrics in its own `CollectorRegistry` (never the process-wide default
one), so several apps in one process (tests) do not collide. Counters and histograms are
updated where things happen, at most one observation a request; figures that a part already
keeps (offsets, lag, restore progress, cache counts) are read when Prometheus scrapes, by a
collector (`Collected`), so nothing is done per record on a hot path. Names follow the
Prometheus conventions (`statefed_<part>_..._seconds`, `..._total`), and no label takes a
key or anything else unbounded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from wsgiref.simple_server import WSGIServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from runtime.graphql_http import Send, send_body

__all__ = [
    "METRICS_PATH",
    "Collected",
    "MetricsServer",
    "bounded",
    "exposition",
    "send_metrics",
]

METRICS_PATH = "/metrics"
_CONTENT_TYPE = CONTENT_TYPE_LATEST.encode()


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry's metrics in the Prometheus text format."""
    return generate_latest(registry)


async def send_metrics(send: Send, registry: CollectorRegistry) -> None:
    """Answer `GET /metrics` with the registry's metrics."""
    await send_body(send, 200, exposition(registry), _CONTENT_TYPE)


class Collected(Collector):
    """A collector whose metrics `collect` builds at scrape time."""

    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        return self._collect()


def bounded(value: str, known: set[str], limit: int = 64, other: str = "other") -> str:
    """`value` as a label value while fewer than `limit` distinct values were seen (they
    are added to `known`), else `other`: a label fed by a peer stays bounded."""
    if value in known:
        return value
    if len(known) < limit:
        known.add(value)
        return value
    return other


class MetricsServer:
    """`/metrics` of `registry` on `host:port` in a thread, for a part without an HTTP
    server of its own (the pipeline's driver)."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._registry = registry
        self._address = (host, port)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from prometheus_client import start_http_server

        self._server, self._thread = start_http_server(
            self._address[1], self._address[0], registry=self._registry
        )

    @property
    def port(self) -> int:
        """The port served on (the one the OS chose, for port 0)."""
        assert self._server is not None, "start() the server first"
        return int(self._server.server_address[1])

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = self._thread = None
