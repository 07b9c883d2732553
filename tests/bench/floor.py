"""The floor: the least a point query can cost on this machine's HTTP stack.

A raw ASGI app under the same uvicorn settings as the node (one worker, uvloop,
httptools, no access log, `gc.freeze()` after start-up) that parses the GraphQL request's
JSON, takes the key from its variables (or, in a query with the key written into its text,
from the text with one regular expression: no GraphQL parse), reads the key's row with one
plyvel get from a LevelDB partition store, and answers the JSON a node would:
`{"data":{"wordCount":{"word":..,"count":..}}}`, without GraphQL.
Run as `python -m tests.bench.floor --db DIR --port PORT`.
"""

from __future__ import annotations

import argparse
import gc
import re
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import orjson
import uvicorn

from node.storage.store import LevelDBStore
from schema import WORD_COUNTS, View

__all__ = ["FloorApp", "main"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_HEADERS = [(b"content-type", b"application/json")]


class FloorApp:
    """POST /graphql -> one store get -> JSON; GET /health -> 200."""

    def __init__(self, db: Path, view: View = WORD_COUNTS, cache_mb: int = 32) -> None:
        self.store = LevelDBStore(db, cache_mb=cache_mb)
        self.view = view
        self._literal = re.compile(rf'{view.key_field}\s*:\s*"([^"\\]*)"')

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] == "GET":
            await _respond(send, b'{"status":"ok"}')
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        key = self._key(orjson.loads(body))
        row = self.store.get(self.view.name, key)
        found = None if row is None else {self.view.key_field: key, "count": row.count}
        await _respond(send, orjson.dumps({"data": {self.view.point_field: found}}))

    def _key(self, request: dict[str, Any]) -> str:
        variables = request.get("variables")
        if variables:
            key: str = variables[self.view.key_field]
            return key
        found = self._literal.search(request["query"])
        if found is None:
            raise ValueError(f"no {self.view.key_field} in the query nor in its variables")
        return found.group(1)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.store.open()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.store.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _respond(send: Send, body: bytes) -> None:
    headers = [*_HEADERS, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Server(uvicorn.Server):
    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        gc.collect()
        gc.freeze()  # as the node does


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cache-mb", type=int, default=32)
    args = parser.parse_args()
    config = uvicorn.Config(
        FloorApp(args.db, cache_mb=args.cache_mb),
        host="127.0.0.1",
        port=args.port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
    )
    _Server(config).run()


if __name__ == "__main__":
    main()
