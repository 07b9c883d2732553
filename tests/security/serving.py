"""Real servers for the security tests: the gateway and fake or real nodes under uvicorn in
threads of the test process, on loopback ports, each stopped on leaving its context."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence

import uvicorn

from gateway.cluster.routing import RoutingFeed
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.edge.server import uvicorn_config
from schema import View
from tests.gateway.fakes import FakeNode, table_for
from tooling.processes import wait_until


@contextlib.contextmanager
def serving(config: uvicorn.Config, name: str) -> Iterator[uvicorn.Server]:
    """`config` served by uvicorn in a thread until the context ends."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()

    def started() -> bool:
        if not thread.is_alive():
            raise RuntimeError(f"{name} stopped before it started")
        return server.started

    try:
        wait_until(started, 30, f"{name} to start", 0.01)
        yield server
    finally:
        server.should_exit = True
        thread.join(15)


@contextlib.contextmanager
def fake_node_served(
    node: FakeNode, port: int, tls: tuple[str, str] | None = None
) -> Iterator[str]:
    """A fake node under uvicorn, serving HTTPS with `tls` (certificate, key file); its URL."""
    cert, key = tls or (None, None)
    config = uvicorn.Config(
        node,
        host="127.0.0.1",
        port=port,
        lifespan="off",
        log_level="warning",
        ssl_certfile=cert,
        ssl_keyfile=key,
    )
    scheme = "https" if tls else "http"
    with serving(config, f"fake node {node.node_id}"):
        yield f"{scheme}://127.0.0.1:{port}"


@contextlib.contextmanager
def gateway_served(
    config: GatewayConfig,
    claims: Mapping[str, tuple[str, Sequence[int]]],
    partitions: int,
    catalogue: Sequence[View],
) -> Iterator[str]:
    """The real gateway (its own uvicorn settings and node connections) routing by
    `claims` (node id -> URL, partitions held); its base URL."""
    feed = RoutingFeed(table_for(claims, partitions, catalogue))
    app = GatewayApp(config, feed=feed, catalogue=catalogue)
    with serving(uvicorn_config(app), "gateway"):
        yield config.url
