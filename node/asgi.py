"""The little of ASGI the node needs: types, reading a request body, sending JSON."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from node.errors import MalformedRequestError

__all__ = ["Receive", "Scope", "Send", "read_body", "send_json"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def read_body(receive: Receive, max_bytes: int) -> bytes:
    """The whole request body; `MalformedRequestError` beyond `max_bytes`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise MalformedRequestError("client disconnected before sending the body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise MalformedRequestError(f"request body larger than {max_bytes} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def send_json(
    send: Send, status: int, document: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = orjson.dumps(document)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
