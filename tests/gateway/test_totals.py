"""View totals in the gateway over fake nodes: the partitions' keys and sums of counts
added up (per window for windowed views), and what is missing when a partition fails."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from gateway.config import GatewayConfig
from tests.gateway.fakes import (
    FULL,
    PER_MINUTE,
    WORDS,
    Model,
    codes,
    fake_nodes,
    feed_for,
    post_query,
    running_gateway,
    to_iso,
    to_ms,
)

P = 4
MINUTE = 60_000
BASE = 28_333_333 * MINUTE
COUNTS = {f"w{i}": i * 1_000_000_000 for i in range(1, 6)}  # the sum passes 32 bits
WINDOWS = {("a", BASE): 3, ("b", BASE): 1, ("a", BASE + MINUTE): 4, ("c", BASE + 2 * MINUTE): 2}
QUERY = (
    "query($f: DateTime) { wordCountTotals { keys count } "
    "hostAccessWindowTotals(from: $f) { start end keys count } }"
)


def totals(variables: dict[str, Any], down: bool = False) -> dict[str, Any]:
    model = Model(counts={WORDS.name: dict(COUNTS)}, windows={PER_MINUTE.name: dict(WINDOWS)})
    nodes = fake_nodes(model, P, 2, FULL)
    feed = feed_for(nodes, P, FULL)
    extra: dict[str, httpx.AsyncBaseTransport] = {}
    if down:
        refused = httpx.MockTransport(lambda r: httpx.Response(503))
        extra = {nodes[0].url(): refused}
    config = GatewayConfig(retries=0, timeout_ms=2000)

    async def scenario() -> dict[str, Any]:
        async with running_gateway(nodes, P, config, feed, extra=extra, catalogue=FULL) as http:
            return (await post_query(http, QUERY, variables))[1]

    return asyncio.run(scenario())


def _windows(body: dict[str, Any]) -> list[tuple[int, int, int, int]]:
    return [
        (to_ms(w["start"]), to_ms(w["end"]), w["keys"], w["count"])
        for w in body["data"]["hostAccessWindowTotals"]
    ]


def test_totals_add_up_every_partition_past_32_bits() -> None:
    body = totals({"f": None})
    assert "errors" not in body, body
    assert body["data"]["wordCountTotals"] == {"keys": 5, "count": 15_000_000_000}
    assert _windows(body) == [
        (BASE, BASE + MINUTE, 2, 4),
        (BASE + MINUTE, BASE + 2 * MINUTE, 1, 4),
        (BASE + 2 * MINUTE, BASE + 3 * MINUTE, 1, 2),
    ]
    assert len({e["partition"] for e in body["extensions"]["freshness"]}) == P


def test_window_totals_from_a_time() -> None:
    body = totals({"f": to_iso(BASE + MINUTE)})
    assert [w[0] for w in _windows(body)] == [BASE + MINUTE, BASE + 2 * MINUTE]


def test_a_partition_that_fails_is_an_error_and_missing_from_the_totals() -> None:
    body = totals({"f": None}, down=True)
    assert set(codes(body)) == {"PARTITION_UNAVAILABLE"}
    failed = {e["extensions"]["partition"] for e in body["errors"]}
    assert failed and len(failed) < P
    assert body["data"]["wordCountTotals"]["keys"] < len(COUNTS)
