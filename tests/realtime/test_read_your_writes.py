"""Read-your-writes through the gateway with the views in Spark's Real-Time Mode: a read
with the token of a write (`atLeast`) sees it every time, although the pipeline's status,
which such a read waits for, comes only per checkpoint (docs/operations.md#real-time-mode);
a read without it sees the write within the checkpoint, usually at once."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tooling.localcluster import LocalCluster

PRODUCE = """mutation($k: String!) { produce(topic: "words", key: $k) { token } }"""
READ = "query($w: String!, $t: String) { wordCount(word: $w, atLeast: $t) { count } }"
WRITERS = 20
ROUNDS = 3
# a checkpoint every 5 s, and on 2 busy cores one took up to 11 s: room for a few
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = {
        **os.environ,
        "STATEFED_PIPELINE_MODE": "real_time",
        "STATEFED_GATEWAY_TIMEOUT_MS": str(TIMEOUT_MS),
        "STATEFED_GATEWAY_PRODUCE": "true",
    }
    base = Path(tmp_path_factory.mktemp("realtime"))
    with LocalCluster(base, partitions=6, env=env, progress=print) as local:
        local.start_all(("n1",))
        yield local


async def _post(client: httpx.AsyncClient, url: str, query: str, **variables: Any) -> Any:
    response = await client.post(url, json={"query": query, "variables": variables})
    assert response.status_code == 200, response.text
    return response.json()


async def _writer(client: httpx.AsyncClient, url: str, word: str) -> tuple[list[str], list[float]]:
    """Produce `word` ROUNDS times, each read back with its token; the reads that missed
    their write, and how long each took."""
    wrong, waits = [], []
    for expected in range(1, ROUNDS + 1):
        produced = await _post(client, url, PRODUCE, k=word)
        assert "errors" not in produced, produced
        token = produced["data"]["produce"]["token"]
        began = time.monotonic()
        read = await _post(client, url, READ, w=word, t=token)
        waits.append(time.monotonic() - began)
        row = (read.get("data") or {}).get("wordCount")
        if "errors" in read or row is None or row["count"] != expected:
            wrong.append(f"{word} write {expected} ({token}): {read}")
    return wrong, waits


async def _rounds(url: str, words: list[str]) -> tuple[list[str], list[float]]:
    limits = httpx.Limits(max_connections=len(words), keepalive_expiry=2.0)
    async with httpx.AsyncClient(timeout=TIMEOUT_MS / 1000 + 30, limits=limits) as client:
        results = await asyncio.gather(*(_writer(client, url, w) for w in words))
    return [w for wrong, _ in results for w in wrong], [t for _, waits in results for t in waits]


def test_a_read_with_the_token_of_a_write_sees_it_in_real_time_mode(
    cluster: LocalCluster,
) -> None:
    assert cluster.pipeline is not None
    log = cluster.pipeline.log_path.read_text()
    assert "query statefed.word_counts started in Real-Time Mode" in log
    words = [f"rt-{n:02d}" for n in range(WRITERS)]
    wrong, waits = asyncio.run(_rounds(cluster.gateway_url, words))
    waits.sort()
    p50, most = waits[len(waits) // 2], waits[-1]
    print(f"atLeast reads in Real-Time Mode: p50 {p50:.2f} s, max {most:.2f} s")
    assert not wrong, f"{len(wrong)} of {len(waits)} reads missed their write: {wrong[:3]}"
