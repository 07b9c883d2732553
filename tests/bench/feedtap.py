"""Where the live step's latency goes: a tap on the nodes' change feeds.

`python -m tests.bench.feedtap --follow NODE_ID NODE_URL PARTITION KEYS_FILE [...] --out FILE`
follows, on each given node, one partition's changes of `word_counts` for the keys of
KEYS_FILE (the node's `/feed` through the gateway's own link, gateway.nodes.links,
signed with STATEFED_CLUSTER_SECRET_FILE when set), and records each change's `count` (the live step
writes the produce time there) and its arrival on CLOCK_MONOTONIC. On SIGTERM it writes
them to FILE and exits. The live step gives it a sample of the subscribed keys of each
partition on the partition's owner: arrival minus produce time is then the push path up
to the node's feed (producer, broker, the node's apply and feed), the rest of a push's
latency is the gateway's and the subscriber's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time
from pathlib import Path

import httpx
import orjson

from gateway.nodes.links import FeedLink
from runtime.trust import ClusterSecret, NodeCallSigner
from schema import WORD_COUNTS

__all__ = ["main"]

_SECRET = "STATEFED_CLUSTER_SECRET_FILE"


def _signer() -> NodeCallSigner:
    secret_file = os.environ.get(_SECRET)
    return NodeCallSigner(ClusterSecret.read(Path(secret_file)) if secret_file else None)


def _incarnation(node_url: str) -> str:
    """The node process serving at `node_url` (its /health says), which a handshake names."""
    return str(httpx.get(f"{node_url}/health", timeout=10).json()["incarnation"])


async def _tap(link: FeedLink, partition: int, keys: list[str], out: list[list[int]]) -> None:
    """Follow `partition` on `link`'s node for `keys`; append [count, arrival_us] per change."""
    _, frames = await link.follow(
        {"partition": partition, "views": [WORD_COUNTS.name], "keys": keys}
    )
    while True:
        frame = await frames.get()
        arrival = time.monotonic_ns() // 1000
        if frame.get("type") == "changes":
            for change in frame["changes"]:
                count = (change.get("row") or {}).get("count")
                if isinstance(count, int):
                    out.append([count, arrival])
        elif frame.get("type") in ("gone", "error", "lost"):
            raise RuntimeError(f"node {link.url} partition {partition}: {frame}")


async def _run(follows: list[tuple[str, str, int, list[str]]], out_path: Path) -> None:
    out: list[list[int]] = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    signer = _signer()
    links = {
        url: FeedLink(node_id, url, signer, incarnation=_incarnation(url))
        for node_id, url, _, _ in follows
    }
    tasks = [loop.create_task(_tap(links[url], p, keys, out)) for _, url, p, keys in follows]
    stopping = loop.create_task(stop.wait())
    await asyncio.wait([stopping, *tasks], return_when=asyncio.FIRST_COMPLETED)
    failed = [task.exception() for task in tasks if task.done() and task.exception()]
    for task in tasks:
        task.cancel()
    for link in links.values():
        await link.close()
    out_path.write_bytes(orjson.dumps({"changes": out, "errors": [str(e) for e in failed]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--follow",
        nargs=4,
        action="append",
        metavar=("NODE_ID", "NODE_URL", "PARTITION", "KEYS_FILE"),
        required=True,
        help="a node (its id and URL), one of its partitions and a file of keys (one per line)",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    follows = []
    for node_id, url, partition, keys_file in args.follow:
        if not url.startswith(("http://127.0.0.1", "http://localhost")):
            parser.error(f"benchmark traffic goes to loopback only, not to {url}")
        keys = [line for line in Path(keys_file).read_text().splitlines() if line]
        follows.append((node_id, url, int(partition), keys))
    asyncio.run(_run(follows, args.out))


if __name__ == "__main__":
    main()
