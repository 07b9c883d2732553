"""The little of ASGI the GraphQL endpoints need: types, a bounded body read, responses.

No answer may be sniffed into another type (`nosniff`: a JSON body taken for a script or a
page), and no page may be framed by another site (clickjacking: GraphiQL in a hidden frame
runs mutations for whoever clicks in it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

import orjson

from runtime.graphql_http.media import MediaType
from runtime.graphql_http.request import RequestError

__all__ = [
    "Headers",
    "Receive",
    "Scope",
    "Send",
    "read_body",
    "refuse_websocket",
    "send_body",
    "send_json",
    "send_page",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Headers = Sequence[tuple[bytes, bytes]]

_NOSNIFF = (b"x-content-type-options", b"nosniff")
_HTML = b"text/html; charset=utf-8"
_NO_FRAMING = b"frame-ancestors 'none'"


async def read_body(receive: Receive, declared: bytes | None, limit: int, hint: str) -> bytes:
    """The request body; RequestError 413 as soon as `content-length` or the bytes read go
    past `limit` (`hint` names the setting that raises it)."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError.payload_too_large(limit, hint)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise RequestError("the client went away before sending the whole body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestError.payload_too_large(limit, hint)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def send_body(
    send: Send, status: int, body: bytes, content_type: bytes, headers: Headers = ()
) -> None:
    """One whole response."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                _NOSNIFF,
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_json(
    send: Send,
    status: int,
    document: Any,
    media: MediaType = MediaType.JSON,
    headers: Headers = (),
) -> None:
    """`document` as JSON (orjson), declared UTF-8."""
    body = orjson.dumps(document)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", media.content_type),
                (b"content-length", str(len(body)).encode()),
                _NOSNIFF,
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_page(
    send: Send, page: bytes, policy: bytes = _NO_FRAMING, headers: Headers = ()
) -> None:
    """An HTML page that no other site may frame: `policy`, its Content-Security-Policy,
    keeps `frame-ancestors 'none'`, and `X-Frame-Options` says the same to older browsers."""
    framing = ((b"content-security-policy", policy), (b"x-frame-options", b"DENY"))
    await send_body(send, 200, page, _HTML, (*framing, *headers))


async def refuse_websocket(scope: Scope, send: Send, error: RequestError) -> None:
    """Refuse a WebSocket handshake, before accepting it, with `error`'s status and JSON body
    where the server can send one (the `websocket.http.response` extension, uvicorn's), else
    with a close, which the server answers with HTTP 403."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    body = orjson.dumps(error.body())
    headers = [
        (b"content-type", MediaType.JSON.content_type),
        (b"content-length", str(len(body)).encode()),
        _NOSNIFF,
        *error.headers,
    ]
    await send(
        {"type": "websocket.http.response.start", "status": error.status, "headers": headers}
    )
    await send({"type": "websocket.http.response.body", "body": body})
