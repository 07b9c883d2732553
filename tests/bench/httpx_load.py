"""Fallback load generator when wrk is absent: `python -m tests.bench.httpx_load`.

N concurrent connections POST the JSON bodies of a file in turn until a deadline, then
print the same `BENCHJSON {...}` line as wrk_post.lua. httpx's client side costs about
1 ms of CPU per request, so this generator saturates near 1,000-1,500 requests/s:
figures above that are its limit, not the server's.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx
import orjson

from tests.bench.stats import percentile


async def _worker(
    client: httpx.AsyncClient,
    url: str,
    bodies: list[bytes],
    start: int,
    deadline: float,
    latencies: list[float],
    counters: dict[str, int],
) -> None:
    index = start
    headers = {"content-type": "application/json"}
    while time.monotonic() < deadline:
        body = bodies[index % len(bodies)]
        index += 1
        began = time.perf_counter()
        try:
            response = await client.post(url, content=body, headers=headers)
        except httpx.HTTPError:
            counters["socket_errors"] += 1
            continue
        latencies.append((time.perf_counter() - began) * 1e6)
        if response.status_code != 200 or b'"errors"' in response.content:
            counters["bad_responses"] += 1


async def run(
    url: str, bodies: list[bytes], connections: int, duration_s: float
) -> dict[str, float]:
    latencies: list[float] = []
    counters = {"socket_errors": 0, "bad_responses": 0}
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(limits=limits, timeout=10.0) as client:
        began = time.monotonic()
        deadline = began + duration_s
        await asyncio.gather(
            *(
                _worker(client, url, bodies, i * 7, deadline, latencies, counters)
                for i in range(connections)
            )
        )
        elapsed = time.monotonic() - began
    return {
        "requests": len(latencies),
        "duration_us": elapsed * 1e6,
        **counters,
        "p50_us": percentile(latencies, 50),
        "p90_us": percentile(latencies, 90),
        "p99_us": percentile(latencies, 99),
        "mean_us": sum(latencies) / len(latencies) if latencies else 0.0,
        "max_us": max(latencies, default=0.0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("bodies", help="file with one JSON body per line")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args()
    with open(args.bodies, "rb") as f:
        bodies = [line.strip() for line in f if line.strip()]
    figures = asyncio.run(run(args.url, bodies, args.connections, args.duration))
    print("BENCHJSON " + orjson.dumps(figures).decode(), flush=True)


if __name__ == "__main__":
    main()
