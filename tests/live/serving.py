"""The real gateway app under uvicorn (the gateway's own settings: uvloop, httptools,
websockets) on a loopback port, in a thread of the test process, serving the tiny test
schema: nothing is read from Kafka and no node is called."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.edge.server import uvicorn_config
from tests.live.schema import SCHEMA
from tooling.broker import free_port

__all__ = ["served"]


@contextmanager
def served(config: GatewayConfig | None = None) -> Iterator[str]:
    """The base URL (`http://127.0.0.1:<port>`) of a gateway over the test schema."""
    config = dataclasses.replace(config or GatewayConfig(), host="127.0.0.1", port=free_port())
    app = GatewayApp(
        config, feed=RoutingFeed(), statuses=StatusBoard(), catalogue=(), schema=SCHEMA
    )
    server = uvicorn.Server(uvicorn_config(app))
    thread = threading.Thread(target=server.run, name="gateway", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive(), "the gateway did not stop"


def running_sources(base: str) -> int:
    """The subscription sources running now (the test schema's `running`), asked of the
    gateway at `base`. It counts the sources of every server and test of this process, so
    a test that shows its own source stop compares with what ran before it: once, in a
    clean-clone run, a source of some earlier test was still counted (which one, and why,
    is not known)."""
    answer = httpx.post(base + "/graphql", json={"query": "{ running }"}, timeout=10)
    count: int = answer.json()["data"]["running"]
    return count
