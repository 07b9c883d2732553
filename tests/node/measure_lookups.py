"""CPU per lookup call of a node's `/graphql`, fast lookups on and off, in process: the
gateway's lookup bodies of 1 and 32 keys (count and latest views) sent straight to the
ASGI endpoint (no server, no network) over real LevelDB stores; compared against a direct
`wordCount(word:)` query. Run: `python -m tests.node.measure_lookups [--calls N]`."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import orjson

from gateway.kinds import view_queries
from node.config import NodeConfig
from node.graphql_http import GraphQLEndpoint
from node.partitions import PartitionRegistry
from node.store import ChangeBatch, LevelDBStore
from node.subgraph import build_subgraph
from schema import WORD_COUNTS, CountRow, EventRow, Role, View, partition_for, view_by_name

P = 4
LATEST = view_by_name("last_booking")
VIEWS = (WORD_COUNTS, LATEST)
KEYS = [f"key-{i}" for i in range(2000)]


def _registry(root: Path) -> tuple[PartitionRegistry, list[LevelDBStore]]:
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


async def _call(endpoint: GraphQLEndpoint, body: bytes) -> bytes:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/graphql",
        "headers": [(b"content-type", b"application/json"), (b"accept", b"application/json")],
    }
    sent: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.append(message.get("body", b""))

    await endpoint(scope, receive, send)
    return b"".join(sent)


def _cpu_us(endpoint: GraphQLEndpoint, bodies: Callable[[int], bytes], calls: int) -> float:
    """Mean CPU microseconds per call over `calls` calls (after as many warm-up calls)."""

    async def run(count: int) -> None:
        for n in range(count):
            answer = await _call(endpoint, bodies(n))
            assert b'"errors"' not in answer, answer

    asyncio.run(run(calls // 4))
    start = time.process_time()
    asyncio.run(run(calls))
    return (time.process_time() - start) / calls * 1e6


def _lookups(view: View, size: int) -> Callable[[int], bytes]:
    """The n-th body of lookups of `size` keys of `view`."""
    queries = view_queries(view)
    return lambda n: queries.lookup_body([KEYS[(n * size + i) % len(KEYS)] for i in range(size)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=4000)
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as root:
        registry, stores = _registry(Path(root))
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
                cases[f"{view.name} lookup, {size} keys"] = _lookups(view, size)
        print(f"CPU per call, us ({calls} calls each, in process)")
        print(f"{'request':<32} {'fast off':>9} {'fast on':>9}")
        for name, bodies in cases.items():
            off, on = (_cpu_us(endpoints[fast], bodies, calls) for fast in (False, True))
            print(f"{name:<32} {off:>9.1f} {on:>9.1f}")
        for partition in range(P):
            registry.detach(partition)
        for store in stores:
            store.close()


if __name__ == "__main__":
    main()
