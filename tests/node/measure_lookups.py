"""CPU per lookup call of a node's `/graphql`, fast lookups on and off, in process: the
gateway's lookup bodies of 1 and 32 keys (count and latest views), with the headers the
gateway sends, handed straight to the ASGI endpoint and (fast lookups on) to the whole
`NodeApp` the server runs (call guard, routing, metrics), with no server and no network,
over real LevelDB stores; compared against a direct `wordCount(word:)` query.
Run: `python -m tests.node.measure_lookups [--calls N]`; the same calls through a real
server: `tests.node.measure_server`."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import orjson

from gateway.reads.kinds import view_queries
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.serve.app import NodeApp
from node.serve.graphql_http import GraphQLEndpoint
from node.storage.store import ChangeBatch, LevelDBStore
from node.subgraph.schema import build_subgraph
from schema import WORD_COUNTS, CountRow, EventRow, Role, View, partition_for, view_by_name

P = 4
LATEST = view_by_name("last_booking")
VIEWS = (WORD_COUNTS, LATEST)
KEYS = [f"key-{i}" for i in range(2000)]
# what the gateway's node call carries besides the body (gateway.nodes.transport,
# gateway.nodes.upstream)
GATEWAY_HEADERS = [
    (b"host", b"127.0.0.1:8101"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json"),
    (b"statefed-caller", b"gateway"),
    (b"statefed-request-id", b"g1a2b3c4-1f"),
    (b"x-request-id", b"0f3c2a9e-5d1b-4c8e-9a7f-2b6d8e1c4a90"),
    (b"traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
]
App = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


def build_registry(root: Path) -> tuple[PartitionRegistry, list[LevelDBStore]]:
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({v.changelog_topic: P for v in VIEWS})
    stores = []
    for partition in range(P):
        store = LevelDBStore(root / f"p{partition}").open()
        change = ChangeBatch(offsets={v.changelog_topic: 1 for v in VIEWS})
        for n, key in enumerate(KEYS):
            if partition_for(key, P) == partition:
                change.put_count(WORD_COUNTS.name, CountRow(key, n, 0))
                row = EventRow(key, 1_700_000_000_000 + n, partition, n, {"trip": f"t{n}"})
                change.put_latest(LATEST.name, row)
        store.apply(change)
        registry.attach(partition, store, Role.ACTIVE, store.offsets())
        stores.append(store)
    return registry, stores


async def _call(app: App, body: bytes) -> bytes:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/graphql",
        "raw_path": b"/graphql",
        "query_string": b"",
        "client": ("127.0.0.1", 50000),
        "headers": [*GATEWAY_HEADERS, (b"content-length", str(len(body)).encode())],
    }
    sent: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.append(message.get("body", b""))

    await app(scope, receive, send)
    return b"".join(sent)


def _cpu_us(app: App, bodies: Callable[[int], bytes], calls: int) -> float:
    """Mean CPU microseconds per call over `calls` calls (after as many warm-up calls)."""

    async def run(count: int) -> None:
        for n in range(count):
            answer = await _call(app, bodies(n))
            assert b'"errors"' not in answer, answer

    asyncio.run(run(calls // 4))
    start = time.process_time()
    asyncio.run(run(calls))
    return (time.process_time() - start) / calls * 1e6


def lookups(view: View, size: int) -> Callable[[int], bytes]:
    """The n-th body of lookups of `size` keys of `view`."""
    queries = view_queries(view)
    return lambda n: queries.lookup_body([KEYS[(n * size + i) % len(KEYS)] for i in range(size)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=4000)
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as root:
        registry, stores = build_registry(Path(root))
        subgraph = build_subgraph(VIEWS)
        endpoints = {
            fast: GraphQLEndpoint(subgraph, registry, config=NodeConfig(fast_lookups=fast))
            for fast in (False, True)
        }
        direct = "query($w:String!){wordCount(word:$w){word count}}"
        cases: dict[str, Callable[[int], bytes]] = {
            "wordCount(word:)": lambda n: orjson.dumps(
                {"query": direct, "variables": {"w": KEYS[n % len(KEYS)]}}
            ),
        }
        for view in VIEWS:
            for size in (1, 32):
                cases[f"{view.name} lookup, {size} keys"] = lookups(view, size)
        # the app the server runs, over the same registry (no lifespan: nothing started)
        app = NodeApp(NodeConfig(fast_lookups=True), VIEWS, registry=registry)
        print(f"CPU per call, us ({calls} calls each, in process)")
        print(f"{'request':<32} {'fast off':>9} {'fast on':>9} {'NodeApp':>9}")
        for name, bodies in cases.items():
            off, on = (_cpu_us(endpoints[fast], bodies, calls) for fast in (False, True))
            whole = _cpu_us(app, bodies, calls)
            print(f"{name:<32} {off:>9.1f} {on:>9.1f} {whole:>9.1f}")
        for partition in range(P):
            registry.detach(partition)
        for store in stores:
            store.close()


if __name__ == "__main__":
    main()
