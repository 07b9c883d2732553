"""GraphQL over WebSocket: the `graphql-transport-ws` protocol of the graphql-ws library (what
Apollo Client's GraphQLWsLink and GraphiQL speak), on `ws(s)://<gateway>/graphql`.

The handshake is refused (HTTP 403, before any frame) when its `Origin` is neither the
gateway's own nor on the CORS allowlist (STATEFED_GATEWAY_CORS_ORIGINS): a browser opens a
WebSocket to any site with that site's cookies and no CORS check, so without this a page of
another origin could use a visitor's ambient credentials (cross-site WebSocket hijacking).
Clients that send no `Origin` (not browsers) carry no ambient credentials and are let in.
"The gateway's own" is an Origin of http(s):// and the handshake's `Host`, which a page that
rebound its domain to the gateway's address matches too: that `Host` is refused before this,
by the check against DNS rebinding (runtime.hosts, at the app's entrance).
A client that does not offer the `graphql-transport-ws` subprotocol is closed with 4406.

Then, per the protocol: `connection_init` within STATEFED_GATEWAY_LIVE_INIT_TIMEOUT_MS (else
4408; a second one 4429) carries the bearer token as `Authorization` (or `authorization`) in
its payload, or the handshake's `Authorization` header does; with authentication on, none is
4401 (the client does not retry) and a refused one 4403 (the client may retry with a fresh
token). `connection_ack` follows. `subscribe` before the ack is 4401, with an id already
running 4409, any message the protocol does not define 4400. Each `subscribe` is checked
against the token again (an expired one closes with 4403) and runs through
`gateway.edge.operations`: a query or mutation answers one `next` and `complete`; a
subscription a `next` per event until its source ends (`complete`), the client sends
`complete` (its source is stopped), or the connection's token expires (`exp` plus the leeway:
a `next` with one UNAUTHENTICATED error, then `complete`); errors before execution are one
`error` message. The protocol authenticates only in connection_init, so a connection whose
token expired stays open but runs nothing more: its next `subscribe` closes it with 4403, and
the client reconnects with a fresh token.
`ping` is answered with `pong` (echoing its payload).

An HTTP connection runs one request at a time; a WebSocket multiplexes, so it runs at most
STATEFED_GATEWAY_MAX_OPERATIONS_PER_CONNECTION operations at once: a query or mutation until
it is answered, a subscription until its stream starts (from then on the subscription limits,
`gateway.edge.slots`, count it). One more is answered with an `error` message,
TOO_MANY_OPERATIONS naming the limit and the setting, and the connection stays open: the
protocol keeps close codes for broken messages, and `error` for an operation refused before
it runs.

Outgoing messages wait in a buffer of STATEFED_GATEWAY_LIVE_SEND_BUFFER messages and 1 Mi
characters per connection (`gateway.edge.outbox`): a subscription whose client does not read stops
being pulled (and its source conflates, `gateway.subscriptions`), and a client sending
pings it does not read the pongs of stops being read, instead of the gateway buffering
without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from enum import IntEnum
from typing import Any

import orjson

from gateway.auth.bearer import Authenticator, Unauthenticated, authorization
from gateway.cors import CorsPolicy
from gateway.edge.operations import Operations, Refused, Single, request_refusal
from gateway.edge.outbox import Outbox
from gateway.edge.slots import (
    MAX_OPERATIONS,
    TOO_MANY_OPERATIONS,
    Slots,
    TooManySubscriptions,
    over_limit,
)
from gateway.model.principal import Principal
from runtime.graphql_http import GraphQLRequest, Receive, RequestError, Scope, Send
from runtime.graphql_http.asgi import refuse_websocket
from runtime.graphql_http.response import internal_error

__all__ = ["PROTOCOL", "TOO_MANY_OPERATIONS", "CloseCode", "GraphQLWebSocket", "origin_allowed"]

log = logging.getLogger(__name__)

PROTOCOL = "graphql-transport-ws"
_CLOSE_WAIT_S = 5.0  # for the close frame to go out behind what is buffered
_MAX_REASON_BYTES = 123  # a close frame's reason (RFC 6455 5.5)


class CloseCode(IntEnum):
    """The protocol's close codes."""

    BAD_REQUEST = 4400
    UNAUTHORIZED = 4401
    FORBIDDEN = 4403
    SUBPROTOCOL_NOT_ACCEPTABLE = 4406
    INIT_TIMEOUT = 4408
    SUBSCRIBER_EXISTS = 4409
    TOO_MANY_INITS = 4429
    INTERNAL_ERROR = 4500


class _Close(Exception):
    """Ends the connection with `code` and `reason`."""

    def __init__(self, code: CloseCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code


def origin_allowed(policy: CorsPolicy, origin: bytes | None, host: bytes | None) -> bool:
    """True when a WebSocket handshake from `origin` may open: no Origin (not a browser), the
    gateway's own pages (the origin's host and port are the handshake's `Host`, over http or
    https: a TLS-terminating proxy may sit between), or one the CORS allowlist names (or
    `*`)."""
    if origin is None or policy.any or origin in policy.listed:
        return True
    return host is not None and origin in (b"http://" + host, b"https://" + host)


class GraphQLWebSocket:
    """The ASGI handler of WebSocket scopes: `path` speaks graphql-transport-ws, running
    operations with `operations` for principals of `authenticator`, at most `max_operations`
    at once per connection; handshakes are checked against `cors`."""

    def __init__(
        self,
        operations: Operations,
        authenticator: Authenticator,
        cors: CorsPolicy,
        *,
        init_timeout_s: float,
        send_buffer: int,
        max_operations: int,
        path: str = "/graphql",
    ) -> None:
        self.operations = operations
        self.authenticator = authenticator
        self._cors = cors
        self.init_timeout_s = init_timeout_s
        self.send_buffer = send_buffer
        self.max_operations = max_operations
        self._path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refuse_websocket(scope, send, refusal)
            return
        if PROTOCOL not in scope.get("subprotocols", ()):
            await send({"type": "websocket.accept"})
            await send(_close_message(CloseCode.SUBPROTOCOL_NOT_ACCEPTABLE, f"use {PROTOCOL}"))
            return
        await send({"type": "websocket.accept", "subprotocol": PROTOCOL})
        connection = _Connection(self, scope, receive, send)
        await connection.run()

    def _refusal(self, scope: Scope) -> RequestError | None:
        if scope["path"] != self._path:
            message = f"no WebSocket endpoint at {scope['path']}: use {self._path}"
            return RequestError(message, 404, "NOT_FOUND")
        headers = dict(scope["headers"])
        if not origin_allowed(self._cors, headers.get(b"origin"), headers.get(b"host")):
            return RequestError(
                "the page's origin may not open WebSockets to the gateway: add it to "
                "STATEFED_GATEWAY_CORS_ORIGINS",
                403,
                "FORBIDDEN",
            )
        return None


class _Connection:
    """One acknowledged-or-not graphql-transport-ws connection."""

    def __init__(self, server: GraphQLWebSocket, scope: Scope, receive: Receive, send: Send):
        self._server = server
        self._receive = receive
        self._send = send
        self._header_token = authorization(scope["headers"])
        self._token: bytes | None = None
        self._initialised = False
        self._acknowledged = False
        self._outbox: Outbox[str | _Close] = Outbox(server.send_buffer, _size)
        self._closing: _Close | None = None
        self._ops: dict[str, asyncio.Task[None]] = {}
        # the operations of `_ops` that count against max_operations: not yet answered (a
        # query, a mutation) or not yet streaming (a subscription); by task, not id, as a
        # completed id may be sent again before its cancelled task has ended
        self._busy: set[asyncio.Task[None]] = set()
        self._slots = Slots.Connection()
        self._reader: asyncio.Task[None] | None = None

    async def run(self) -> None:
        writer = asyncio.create_task(self._write())
        self._reader = asyncio.create_task(self._read())
        timer = asyncio.create_task(self._init_timer())
        try:
            await asyncio.wait((self._reader, writer), return_when=asyncio.FIRST_COMPLETED)
            await self._stop_ops()
            if self._closing is not None and not writer.done():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(writer), _CLOSE_WAIT_S)
        finally:
            for task in (self._reader, writer, timer):
                task.cancel()
            await asyncio.gather(self._reader, writer, timer, return_exceptions=True)
            await self._stop_ops()

    # -- reading ------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while True:
                message = await self._receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("text") is None:
                    raise _Close(
                        CloseCode.BAD_REQUEST, "binary frames are not part of the protocol"
                    )
                await self._handle(_parse(message["text"]))
        except _Close as close:
            self._close(close)

    async def _handle(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "connection_init":
            await self._init(message)
        elif kind == "ping":
            pong: dict[str, Any] = {"type": "pong"}
            if message.get("payload") is not None:
                pong["payload"] = message["payload"]
            await self._put(pong)
        elif kind == "pong":
            return
        elif kind == "subscribe":
            await self._subscribe(message)
        elif kind == "complete":
            task = self._ops.pop(message["id"], None)
            if task is not None:
                task.cancel()  # its source is stopped as the task ends

    async def _init(self, message: dict[str, Any]) -> None:
        if self._initialised:
            raise _Close(CloseCode.TOO_MANY_INITS, "Too many initialisation requests")
        self._initialised = True
        payload = message.get("payload") or {}
        token = payload.get("Authorization", payload.get("authorization"))
        if token is not None and not isinstance(token, str):
            raise _Close(CloseCode.BAD_REQUEST, "the payload's Authorization must be a string")
        self._token = token.encode("latin-1", "replace") if token else self._header_token
        await self._principal()
        self._acknowledged = True
        await self._put({"type": "connection_ack"})

    async def _principal(self) -> Principal:
        """The connection's principal, its token verified now; closes when it is refused."""
        try:
            return await self._server.authenticator.principal(self._token)
        except Unauthenticated as exc:
            if exc.description is None:
                raise _Close(
                    CloseCode.UNAUTHORIZED,
                    "Unauthorized: send Authorization: Bearer <token> in connection_init's payload",
                ) from None
            raise _Close(CloseCode.FORBIDDEN, f"Forbidden: {exc.description}") from None

    async def _subscribe(self, message: dict[str, Any]) -> None:
        if not self._acknowledged:
            raise _Close(CloseCode.UNAUTHORIZED, "Unauthorized")
        ident = message["id"]
        if ident in self._ops:
            raise _Close(CloseCode.SUBSCRIBER_EXISTS, f"Subscriber for {ident} already exists")
        payload = message["payload"]
        try:
            request = GraphQLRequest.checked(
                payload.get("query"),
                payload.get("variables"),
                payload.get("operationName"),
                payload.get("extensions"),
                "POST",  # CSRF does not apply: the handshake's Origin was checked
            )
        except RequestError as exc:
            raise _Close(CloseCode.BAD_REQUEST, str(exc)) from None
        limit = self._server.max_operations
        if len(self._busy) >= limit:
            await self._put({"id": ident, "type": "error", "payload": _too_many_operations(limit)})
            return
        task = self._ops[ident] = asyncio.create_task(self._operate(ident, request))
        self._busy.add(task)
        # a done callback, not a `finally`: a task cancelled before it first runs runs none
        task.add_done_callback(self._busy.discard)

    # -- operations ---------------------------------------------------------------------

    async def _operate(self, ident: str, request: GraphQLRequest) -> None:
        try:
            await self._run(ident, request)
        except asyncio.CancelledError:
            raise
        except _Close as close:
            self._close(close)
        except Exception:
            log.exception("internal error, operation %s %s", ident, request.request_id)
            await self._put(
                {"id": ident, "type": "error", "payload": [internal_error(request.request_id)]}
            )
        finally:
            if self._ops.get(ident) is asyncio.current_task():
                del self._ops[ident]

    async def _run(self, ident: str, request: GraphQLRequest) -> None:
        principal = await self._principal()
        try:
            started = await self._server.operations.start(request, principal, self._slots)
        except RequestError as exc:
            await self._put({"id": ident, "type": "error", "payload": request_refusal(exc)})
            return
        except TooManySubscriptions as exc:
            await self._put({"id": ident, "type": "error", "payload": exc.errors()})
            return
        if isinstance(started, Refused):
            await self._put({"id": ident, "type": "error", "payload": started.errors})
            return
        if isinstance(started, Single):
            await self._put({"id": ident, "type": "next", "payload": started.body})
        else:
            task = asyncio.current_task()
            assert task is not None
            self._busy.discard(task)  # streaming: its slot counts it from now on
            try:
                await started.pump(
                    lambda body: self._put({"id": ident, "type": "next", "payload": body})
                )
            finally:
                await started.aclose()
        await self._put({"id": ident, "type": "complete"})

    async def _stop_ops(self) -> None:
        tasks = list(self._ops.values())
        self._ops.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- writing ------------------------------------------------------------------------

    async def _put(self, message: Mapping[str, Any]) -> None:
        if self._closing is None:
            await self._outbox.put(orjson.dumps(message).decode())

    def _close(self, close: _Close) -> None:
        """Close with `close` once what is being sent is out; what is still buffered is
        dropped, and nothing more is read."""
        if self._closing is not None:
            return
        self._closing = close
        self._outbox.close(close)
        if self._reader is not None and self._reader is not asyncio.current_task():
            self._reader.cancel()

    async def _write(self) -> None:
        while True:
            item = await self._outbox.get()
            if isinstance(item, _Close):
                await self._send(_close_message(item.code, str(item)))
                return
            await self._send({"type": "websocket.send", "text": item})

    async def _init_timer(self) -> None:
        await asyncio.sleep(self._server.init_timeout_s)
        if not self._initialised:
            self._close(_Close(CloseCode.INIT_TIMEOUT, "Connection initialisation timeout"))


def _size(item: str | _Close) -> int:
    """An outgoing message's size in the send buffer: its characters."""
    return len(item) if isinstance(item, str) else 0


def _too_many_operations(limit: int) -> list[dict[str, Any]]:
    """The GraphQL error refusing an operation over the connection's limit."""
    message = (
        f"this connection already runs {limit} operations, the most it may at once "
        f"({MAX_OPERATIONS}): wait for one to complete, or open another connection"
    )
    return over_limit(message, TOO_MANY_OPERATIONS, limit, MAX_OPERATIONS)


def _parse(text: str) -> dict[str, Any]:
    """A client message, checked as the protocol defines it; 4400 otherwise."""
    try:
        message = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise _Close(CloseCode.BAD_REQUEST, "the message is not JSON") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise _Close(CloseCode.BAD_REQUEST, "a message is a JSON object with a string `type`")
    kind = message["type"]
    if kind in ("connection_init", "ping", "pong"):
        if not isinstance(message.get("payload"), dict | None):
            raise _Close(CloseCode.BAD_REQUEST, f"the payload of {kind} must be an object")
    elif kind in ("subscribe", "complete"):
        ident = message.get("id")
        if not isinstance(ident, str) or not ident:
            raise _Close(CloseCode.BAD_REQUEST, f"{kind} needs a non-empty string `id`")
        if kind == "subscribe" and not isinstance(message.get("payload"), dict):
            raise _Close(CloseCode.BAD_REQUEST, "subscribe needs an object `payload`")
    else:
        raise _Close(CloseCode.BAD_REQUEST, f"unknown message type {kind[:40]!r}")
    return message


def _close_message(code: int, reason: str) -> dict[str, Any]:
    cut = reason.encode()[:_MAX_REASON_BYTES].decode("utf-8", "ignore")
    return {"type": "websocket.close", "code": code, "reason": cut}
