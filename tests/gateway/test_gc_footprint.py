"""What the gateway keeps between requests adds nothing to what a full garbage collection
walks: under lookups spread over many keys, its memos (a key's partition, the object a
count row makes) stay full, and a collection walking their entries paused the event loop
for 15-40 ms every few seconds (issue 31). Entries of atoms are untracked by the collector,
so the count of tracked objects does not grow with them."""

from __future__ import annotations

import asyncio
import dataclasses
import gc

import httpx
import orjson

from gateway.cluster.pipeline import StatusBoard
from gateway.cluster.routing import group_keys
from gateway.config import GatewayConfig
from gateway.edge.app import GatewayApp
from tests.gateway.fakes import WORDS, Model, client_for, fake_nodes, feed_for

P = 4
KEYS = 20_000  # more than the fast path's memo of made rows holds (16,384)
BATCH = 200
# objects a run may leave tracked besides its memos: connections, documents, metrics
SLACK = 2_000


def _tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


def test_the_partition_memo_adds_no_tracked_objects() -> None:
    keys = [f"memo-{i}" for i in range(70_000)]  # past the memo's bound of 65,536 keys
    before = _tracked()
    partitions, _ = group_keys(keys, P, WORDS)
    assert len(partitions) == len(keys)
    assert _tracked() - before < SLACK


async def _lookups(words: list[str]) -> int:
    """Tracked objects added by answering `words` through the fast path, in batches."""
    nodes = fake_nodes(Model.of_counts(dict.fromkeys(words, 7)), P, 1)
    upstream = client_for(nodes)
    config = dataclasses.replace(GatewayConfig(), cache=False)
    feed = feed_for(nodes, P, (WORDS,))
    app = GatewayApp(config, feed=feed, client=upstream, statuses=StatusBoard(), catalogue=(WORDS,))
    await app.startup()
    query = "query($w: [String!]!) { wordCounts(words: $w) { word count } }"
    fast = app._graphql.fast_path
    assert fast is not None
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:

            async def ask(batch: list[str]) -> None:
                body = {"query": query, "variables": {"w": batch}}
                answer = orjson.loads((await http.post("/graphql", json=body)).content)
                assert answer["data"]["wordCounts"] == [{"word": w, "count": 7} for w in batch]

            await ask(words[:BATCH])  # the document, connections and metrics made once
            before, answered = _tracked(), fast.answered
            for at in range(BATCH, len(words), BATCH):
                await ask(words[at : at + BATCH])
            assert fast.answered - answered == len(words) // BATCH - 1  # all by the fast path
            return _tracked() - before
    finally:
        await app.shutdown()
        await upstream.aclose()


def test_the_fast_paths_memo_of_made_rows_adds_no_tracked_objects() -> None:
    added = asyncio.run(_lookups([f"row-{i}" for i in range(KEYS)]))
    assert added < SLACK
