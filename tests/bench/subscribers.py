"""Many subscriptions from one cheap process: the subscriber side of the live benchmark.

`python -m tests.bench.subscribers --url ws://.../graphql --keys FILE --connections N
--status FILE --out FILE [--first M]` opens N WebSockets to the gateway
(`graphql-transport-ws`, no compression), spreads one `wordCount(word:)` subscription per
key of FILE over them (only the first M keys' until SIGUSR1, then the rest), and
records every `next` it gets: which subscription, the row's `count` and `offset`, and its
arrival on CLOCK_MONOTONIC (`time.monotonic_ns`, the same clock in every process of the
machine, so the producer's timestamps compare). Twice a second it rewrites FILE `--status`
(subscriptions that got their first update, updates received, the last arrival, its own
CPU seconds, each subscription's newest count); on SIGTERM it closes the connections,
writes every sample to `--out` and exits. One asyncio loop, orjson and no per-message
work beyond appending four integers: the subscriber must not be what limits the push
rate. Against a stand-in server pushing 10,000 updates/s over 10 connections it used
about 30 us of CPU per update (0.3 cores); the live step reports its cores at each rate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

__all__ = ["DOCUMENT", "Samples", "main"]

PROTOCOL = Subprotocol("graphql-transport-ws")
DOCUMENT = "subscription($w: String!) { wordCount(word: $w) { word count offset } }"
_STATUS_S = 0.5
_MAX_ERRORS = 5  # error texts kept for the report


@dataclass
class Samples:
    """Every update received, as parallel lists (cheap to append, cheap to dump)."""

    ident: list[int] = field(default_factory=list)  # index of the key in the keys file
    count: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    arrival_us: list[int] = field(default_factory=list)  # CLOCK_MONOTONIC
    first_us: dict[int, int] = field(default_factory=dict)  # first update per subscription
    errors: int = 0
    error_texts: list[str] = field(default_factory=list)
    ended: int = 0  # subscriptions the gateway completed
    newest: dict[int, int] = field(default_factory=dict)  # per subscription, its last count
    closed: list[str] = field(default_factory=list)  # connections closed by the gateway

    def error(self, text: str) -> None:
        self.errors += 1
        if len(self.error_texts) < _MAX_ERRORS:
            self.error_texts.append(text[:500])

    def to_json(self) -> dict[str, Any]:
        return {
            "ident": self.ident,
            "count": self.count,
            "offset": self.offset,
            "arrival_us": self.arrival_us,
            "first_us": self.first_us,
            "errors": self.errors,
            "error_texts": self.error_texts,
            "ended": self.ended,
            "closed": self.closed,
        }


async def _open(url: str) -> ClientConnection:
    socket = await connect(
        url, subprotocols=[PROTOCOL], compression=None, max_queue=None, open_timeout=30
    )
    await socket.send(orjson.dumps({"type": "connection_init", "payload": {}}).decode())
    ack = orjson.loads(await socket.recv())
    if ack.get("type") != "connection_ack":
        raise RuntimeError(f"expected connection_ack from {url}, got {ack}")
    return socket


async def _subscribe(sockets: list[ClientConnection], keys: list[tuple[int, str]]) -> None:
    """One subscription per key, key i on connection i mod N."""
    for ident, key in keys:
        message = {
            "id": str(ident),
            "type": "subscribe",
            "payload": {"query": DOCUMENT, "variables": {"w": key}},
        }
        await sockets[ident % len(sockets)].send(orjson.dumps(message).decode())


async def _read(socket: ClientConnection, samples: Samples) -> None:
    """Record every message until the connection closes."""
    try:
        async for raw in socket:
            arrival = time.monotonic_ns() // 1000
            message = orjson.loads(raw)
            kind = message.get("type")
            if kind == "next":
                ident = int(message["id"])
                payload = message["payload"]
                if payload.get("errors"):
                    samples.error(orjson.dumps(payload["errors"]).decode())
                    continue
                row = payload["data"]["wordCount"]
                samples.first_us.setdefault(ident, arrival)
                if row["count"] is not None:  # None: the key's first update, no row yet
                    samples.ident.append(ident)
                    samples.count.append(row["count"])
                    samples.offset.append(int(row["offset"]))  # a Long: a string of digits
                    samples.arrival_us.append(arrival)
                    samples.newest[ident] = row["count"]
            elif kind == "ping":
                await socket.send('{"type":"pong"}')
            elif kind == "error":
                samples.error(orjson.dumps(message).decode())
            elif kind == "complete":
                samples.ended += 1
    except Exception as exc:  # the connection broke: say so in the dump, do not crash
        samples.closed.append(f"{type(exc).__name__}: {exc}"[:300])
    if socket.close_code not in (None, 1000):
        samples.closed.append(f"closed {socket.close_code} {socket.close_reason}"[:300])


def _write_status(path: Path, samples: Samples, total: int) -> None:
    times = os.times()
    status = {
        "subscribed": total,
        "ready": len(samples.first_us),
        "received": len(samples.arrival_us),
        "last_arrival_us": samples.arrival_us[-1] if samples.arrival_us else None,
        "errors": samples.errors,
        "error_texts": samples.error_texts,
        "closed": samples.closed,
        "cpu_s": times.user + times.system,
        "newest": samples.newest,
    }
    temporary = path.with_suffix(".tmp")
    temporary.write_bytes(orjson.dumps(status, option=orjson.OPT_NON_STR_KEYS))
    os.replace(temporary, path)


async def _run(args: argparse.Namespace) -> None:
    keys = list(enumerate(line for line in args.keys.read_text().splitlines() if line))
    first = len(keys) if args.first is None else args.first
    samples = Samples()
    stop, more = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, more.set)
    sockets = [await _open(args.url) for _ in range(min(args.connections, len(keys)))]
    readers = [loop.create_task(_read(socket, samples)) for socket in sockets]
    await _subscribe(sockets, keys[:first])
    while not stop.is_set():
        if more.is_set() and first < len(keys):
            await _subscribe(sockets, keys[first:])
            first = len(keys)
        _write_status(args.status, samples, first)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), _STATUS_S)
    for socket in sockets:
        await socket.close()
    await asyncio.gather(*readers, return_exceptions=True)
    args.out.write_bytes(orjson.dumps(samples.to_json(), option=orjson.OPT_NON_STR_KEYS))
    _write_status(args.status, samples, first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="the gateway's ws://.../graphql")
    parser.add_argument("--keys", type=Path, required=True, help="one key per line")
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument(
        "--first", type=int, help="subscribe only this many keys until SIGUSR1 (default: all)"
    )
    parser.add_argument("--status", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not args.url.startswith(("ws://127.0.0.1", "ws://localhost")):
        parser.error(f"benchmark traffic goes to loopback only, not to {args.url}")
    asyncio.run(_run(args))


if __name__ == "__main__":
    main()
