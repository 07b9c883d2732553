"""Read-your-writes through the gateway: the `produce` mutation returns a consistency
token, and a read with `atLeast: token` sees the write every time (issue 4: 1,000
iterations), while reads without it may not. Also the mutation's and the token's errors."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import httpx

from tests.e2e.conftest import GATEWAY_TIMEOUT_MS, Cluster
from tooling.processes import wait_until

PRODUCE = """mutation($k: String!) {
  produce(topic: "words", key: $k) { topic partition offset token }
}"""
READ = "query($w: String!, $t: String) { wordCount(word: $w, atLeast: $t) { count } }"
# concurrent clients, one word each: every client is its word's only writer. A round takes
# about one micro-batch whatever the number of writers, so more writers and fewer rounds
# make the same 1,000 iterations end sooner (and race more reads against each batch)
WRITERS = 100
ROUNDS = 10  # WRITERS x ROUNDS = 1,000 produce-then-read iterations


async def _post(client: httpx.AsyncClient, url: str, query: str, **variables: Any) -> Any:
    response = await client.post(url, json={"query": query, "variables": variables})
    assert response.status_code == 200, response.text
    return response.json()


async def _writer(client: httpx.AsyncClient, url: str, word: str) -> list[str]:
    """Produce `word` ROUNDS times, reading it back with each token; the mismatches."""
    wrong: list[str] = []
    for expected in range(1, ROUNDS + 1):
        produced = await _post(client, url, PRODUCE, k=word)
        assert "errors" not in produced, produced
        token = produced["data"]["produce"]["token"]
        read = await _post(client, url, READ, w=word, t=token)
        row = (read.get("data") or {}).get("wordCount")
        if "errors" in read or row is None or row["count"] != expected:
            wrong.append(f"{word} write {expected} ({token}): {read}")
    return wrong


async def _iterations(url: str, words: list[str]) -> list[str]:
    # idle connections dropped before the gateway's 5 s keep-alive closes them: reusing one
    # the server closes at that moment fails the request with a ReadError (seen once)
    limits = httpx.Limits(max_connections=len(words), keepalive_expiry=2.0)
    async with httpx.AsyncClient(timeout=60.0, limits=limits) as client:
        results = await asyncio.gather(*(_writer(client, url, w) for w in words))
    return [problem for problems in results for problem in problems]


def test_a_read_with_the_token_of_a_write_sees_it_every_time(cluster: Cluster) -> None:
    words = [f"ryw-{n:02d}" for n in range(WRITERS)]
    wrong = asyncio.run(_iterations(cluster.local.gateway_url, words))
    cluster.truth.update({word: ROUNDS for word in words})
    assert not wrong, f"{len(wrong)} of {WRITERS * ROUNDS} reads missed their write: {wrong[:5]}"
    assert cluster.counts(words) == dict.fromkeys(words, ROUNDS)


def test_the_token_names_where_the_write_landed(cluster: Cluster) -> None:
    body = cluster.query(PRODUCE, {"k": "ryw-token"}).json()
    cluster.truth.update(["ryw-token"])
    produced = body["data"]["produce"]
    assert produced["topic"] == "words"
    assert re.fullmatch(r"[0-9]+", produced["offset"]), produced  # a Long: a string of digits
    assert produced["token"] == f"words:{produced['partition']}:{produced['offset']}"
    read = cluster.data(READ, {"w": "ryw-token", "t": produced["token"]})
    assert read["wordCount"] == {"count": 1}


def test_bad_tokens_and_writes_are_refused(cluster: Cluster) -> None:
    cases = {
        'query { wordCount(word: "x", atLeast: "words:zero") { count } }': "BAD_USER_INPUT",
        'query { wordCount(word: "x", atLeast: "bookings:0:1") { count } }': ("BAD_USER_INPUT"),
        'query { wordCount(word: "x", maxLag: -1) { count } }': "BAD_USER_INPUT",
        'mutation { produce(topic: "nope", key: "x") { token } }': "BAD_USER_INPUT",
        'mutation { produce(topic: "words", key: "") { token } }': "BAD_USER_INPUT",
    }
    for query, code in cases.items():
        body = cluster.query(query).json()
        codes = [e["extensions"]["code"] for e in body.get("errors", [])]
        assert codes == [code], (query, body)


def test_a_token_for_a_partition_that_does_not_exist_is_refused_at_once(
    cluster: Cluster,
) -> None:
    partitions = cluster.local.partitions

    def count_known() -> bool:
        body = cluster.query("{ cluster { partitionCount } }").json()
        return body["data"]["cluster"]["partitionCount"] == partitions

    wait_until(count_known, 30, "the gateway to know the partition count")
    for token in (f"words:{partitions}:1", "words:99:1"):
        query = f'query {{ wordCount(word: "kafka", atLeast: "{token}") {{ count }} }}'
        started = time.monotonic()
        body = cluster.query(query).json()
        took_s = time.monotonic() - started
        [error] = body["errors"]
        assert error["extensions"]["code"] == "BAD_USER_INPUT", body
        assert f"which has {partitions} partitions (0..{partitions - 1})" in error["message"]
        # refused, not waited out: well under the request's deadline
        assert took_s < GATEWAY_TIMEOUT_MS / 1000 / 5, (token, took_s)


def test_a_mutation_is_refused_over_get(cluster: Cluster) -> None:
    query = 'mutation { produce(topic: "words", key: "ryw-get") { token } }'
    response = cluster.http.get(cluster.local.gateway_url, params={"query": query})
    assert response.status_code == 405  # GraphQL over HTTP: a GET may only run a query
    assert response.headers["allow"] == "POST"
    assert response.json()["errors"][0]["extensions"]["code"] == "METHOD_NOT_ALLOWED"
