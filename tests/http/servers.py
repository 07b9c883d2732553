"""A real gateway and a real node, each under its own uvicorn settings (uvloop and the
project's httptools protocol) on a loopback port, in a thread of the test process."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import uvicorn

from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from gateway.edge.server import uvicorn_config as gateway_uvicorn_config
from gateway.writes.producer import EventProducer
from node.changelog.partitions import PartitionRegistry
from node.serve.app import NodeApp
from node.serve.server import NodeServer
from node.storage.store import PartitionStore
from runtime.topics import ensure_topics, statefed_topics
from schema import PartitionStatus, Role
from tests.gateway.fakes import FakeNode, Model, client_for, feed_for
from tests.node.harness import P, node_config, unique_count_view
from tooling.broker import KafkaBroker, free_port

__all__ = ["CountingRegistry", "ServedGateway", "ServedNode", "served_gateway", "served_node"]

T = TypeVar("T")


class CountingRegistry(PartitionRegistry):
    """A node's partitions, counting the reads the subgraph's fields make."""

    reads = 0

    def read_at(
        self,
        partition: int,
        reader: Callable[[PartitionStore], T],
        roles: Collection[Role] = (Role.ACTIVE,),
        proved: Mapping[str, int] | None = None,
    ) -> tuple[T, PartitionStatus, dict[str, int], dict[str, int]] | None:
        self.reads += 1
        return super().read_at(partition, reader, roles, proved)


def _serve(server: uvicorn.Server, name: str) -> threading.Thread:
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, f"{name} did not start"
        time.sleep(0.01)
    return thread


def _stop(server: uvicorn.Server, thread: threading.Thread) -> None:
    server.should_exit = True
    thread.join(30)
    assert not thread.is_alive(), "a uvicorn server did not stop"


class ServedGateway:
    def __init__(self, url: str, node: FakeNode) -> None:
        self.url = url
        self.node = node  # the fake node it routes to; counts the requests it got


class ServedNode:
    def __init__(self, url: str, registry: CountingRegistry) -> None:
        self.url = url
        self.registry = registry


@contextmanager
def served_gateway(
    config: GatewayConfig | None = None, producer: EventProducer | None = None
) -> Iterator[ServedGateway]:
    """The gateway (introspection on, unless `config` says otherwise; on a free port) over
    one fake node holding every partition, producing through `producer` if given."""
    node = FakeNode("n0", Model.of_counts({"kafka": 3}), range(P), P)
    upstream = client_for([node])
    config = dataclasses.replace(
        config or GatewayConfig(introspection=True), host="127.0.0.1", port=free_port()
    )
    app = GatewayApp(config, feed=feed_for([node], P), client=upstream, producer=producer)
    server = uvicorn.Server(gateway_uvicorn_config(app))
    thread = _serve(server, "gateway")
    try:
        yield ServedGateway(f"http://127.0.0.1:{config.port}/graphql", node)
    finally:
        _stop(server, thread)
        asyncio.run(upstream.aclose())


@contextmanager
def served_node(broker: KafkaBroker, state_dir: Path) -> Iterator[ServedNode]:
    """A node of a view of its own, started against the embedded broker."""
    view = unique_count_view()
    ensure_topics(broker.bootstrap, statefed_topics(P, [view]))
    # the audits ask `__type`: introspection is off on a node by default
    extra = {"STATEFED_NODE_INTROSPECTION": "true"}
    config = node_config(broker.bootstrap, state_dir, "n1", f"g-{view.name}", **extra)
    registry = CountingRegistry(config.node_id)
    server = NodeServer(NodeApp(config, [view], registry=registry), freeze_gc=False)
    thread = _serve(server, "node")
    try:
        yield ServedNode(f"{config.url}/graphql", registry)
    finally:
        _stop(server, thread)
