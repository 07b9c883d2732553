"""Helpers of the persisted-query tests: the gateway's persisted-query counts from its
`/metrics`, and Apollo Client's real persisted-queries link run with Node (`apq.mjs`, the
pinned @apollo/client of `tests.live.clients`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.live import clients

__all__ = ["persisted_counts", "run_link"]

SCRIPT = Path(__file__).with_name("apq.mjs")


def persisted_counts(url: str) -> dict[str, float]:
    """`statefed_gateway_persisted_queries_total` by outcome, of the gateway at `url`."""
    metrics = httpx.get(url.replace("/graphql", "/metrics"), trust_env=False).text
    counts: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("statefed_gateway_persisted_queries_total{"):
            labels, value = line.rsplit(" ", 1)
            counts[labels.split('"')[1]] = float(value)
    return counts


def run_link(url: str, queries: list[str], use_get: bool) -> dict[str, Any]:
    """What the link's queries returned (`steps`: data, error) and every HTTP request it
    made (`requests`: method, query, hash, status, body), each query run once, uncached."""
    plan = {"url": url, "useGET": use_get, "queries": queries}
    return clients.run_script(SCRIPT, plan, "Apollo Client")
