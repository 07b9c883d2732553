"""GraphQL over Server-Sent Events: the protocol of the graphql-sse library, at
`/graphql/stream`, behind the gateway's authentication (each request's `Authorization`
header, 401 without a usable token), CORS allowlist and body limit
(STATEFED_GATEWAY_MAX_BODY_BYTES).

Distinct connections mode: a GET (query string) or a JSON POST with `Accept:
text/event-stream` runs one operation and streams its results as `next` events, then
`complete`; closing the connection stops it. Errors found before execution (parse,
validation, limits, a subscription over the limits) are a `next` event with `errors` on the
accepted stream, as the protocol asks; only a malformed request is an HTTP error. A mutation
is refused over GET (405), as at `/graphql`.

Single connection mode: a PUT reserves a stream (201, the token as text); a GET with `Accept:
text/event-stream` and the token (header `X-GraphQL-Event-Stream-Token`, or query parameter
`token`) opens it (404 unknown, 409 already open); operations are POSTed (or sent by GET)
with the token and an `extensions.operationId` (202; 400 without one, 409 when it runs
already) and their results arrive on the stream as `next`/`complete` events carrying that
id; DELETE with the token and `?operationId=` stops one (200). A reservation belongs to the
principal that made it (any other is told 404) and is forgotten when its stream closes (its
operations stop). Errors before execution are the operation's `next` and `complete` on the
stream, so the client hands them to the subscriber instead of retrying.

A subscription ends when the token of the request that started it expires (`exp` plus the
leeway): its last `next` carries one UNAUTHENTICATED error, then `complete`. A single
connection's stream stays open; operations sent on it with a fresh token run.

Operations run only on an open stream (409 before it opens, as the graphql-sse client never
sends one earlier): a subscription takes its slots (`gateway.edge.slots`) only while a
connection is there to carry it, as on a WebSocket, so reservations nobody opens cannot hold
the slots other clients need. A reservation not opened within `_UNCLAIMED_S` is dropped, and
at most STATEFED_GATEWAY_MAX_SUBSCRIPTIONS wait to be opened (the oldest is dropped for a new
one: a flood of PUTs then ages out the flood, not a client between its PUT and its GET).
They wait in creation order, so a PUT looks only at those it drops and one more.

Events wait in a buffer of STATEFED_GATEWAY_LIVE_SEND_BUFFER events and 1 MiB per stream
(`gateway.edge.outbox`); a comment line every
`_HEARTBEAT_S` keeps proxies from closing an idle stream. A stream the server cannot write
to for `_STALLED_S` (its client stopped reading, and the connection's buffers are full) is
dropped: its operations stop, its slots are freed. A single connection runs at most
STATEFED_GATEWAY_MAX_OPERATIONS_PER_CONNECTION operations that are not streaming
subscriptions at once (a query running, or its result waiting for the stream to take it):
one more is refused with HTTP 429, TOO_MANY_OPERATIONS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import orjson

from gateway.auth.bearer import Authenticator, Unauthenticated, authorization, refusal
from gateway.edge.operations import Operations, Refused, Single, Started, Stream
from gateway.edge.outbox import Outbox
from gateway.edge.slots import MAX_OPERATIONS, TOO_MANY_OPERATIONS, Slots, TooManySubscriptions
from gateway.model.principal import Principal
from runtime.graphql_http import GraphQLRequest, Receive, RequestError, Scope, Send, send_json
from runtime.graphql_http.asgi import read_body, send_body
from runtime.graphql_http.csrf import check_request
from runtime.graphql_http.request import decode_body, decode_query_string, request_id
from runtime.graphql_http.response import internal_error

__all__ = ["STREAM_PATH", "TOKEN_HEADER", "GraphQLEventStream"]

log = logging.getLogger(__name__)

STREAM_PATH = "/graphql/stream"
TOKEN_HEADER = b"x-graphql-event-stream-token"
_HEARTBEAT_S = 12.0
# a stream whose client takes nothing for this long (its connection's window shut: it
# reads nothing, or the network is gone without a reset) is ended: two heartbeats' time
_STALLED_S = 2 * _HEARTBEAT_S
# a reservation not opened within this is dropped: a client opens it one round trip after
# its PUT
_UNCLAIMED_S = 10.0
_HEAD = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx: pass events on at once
]
_END = object()  # ends a distinct connection's stream
_BODY_HINT = "STATEFED_GATEWAY_MAX_BODY_BYTES"


def _event(kind: str, data: Any) -> bytes:
    body = b"" if data is None else b" " + orjson.dumps(data)
    return b"event: " + kind.encode() + b"\ndata:" + body + b"\n\n"


Emit = Callable[[bytes], Awaitable[None]]


class _Running:
    """One operation emitting its events with `emit` (wrapped with `ident` in single
    connection mode), then `after`, once `start`ed; `stop` ends it and stops its source, also
    when its task was cancelled before it began."""

    def __init__(
        self,
        started: Started,
        emit: Emit,
        ident: str | None,
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._started = started
        self._stream = started if isinstance(started, Stream) else None
        self._emit = emit
        self._ident = ident
        self._after = after
        self._task: asyncio.Task[None] | None = None

    @property
    def streaming(self) -> bool:
        """A subscription's stream (its slots count it), not a result waiting to be sent."""
        return self._stream is not None

    def start(self) -> _Running:
        self._task = asyncio.create_task(self._deliver(self._started))
        return self

    def _wrap(self, payload: Any) -> Any:
        return payload if self._ident is None else {"id": self._ident, "payload": payload}

    async def _deliver(self, started: Started) -> None:
        try:
            if isinstance(started, Refused):
                await self._emit(_event("next", self._wrap({"errors": started.errors})))
            elif isinstance(started, Single):
                await self._emit(_event("next", self._wrap(started.body)))
            else:
                await started.pump(lambda body: self._emit(_event("next", self._wrap(body))))
        except Exception:  # a fault of ours: the client hears of it, and the stream ends
            ident = started.request_id if isinstance(started, Stream) else request_id(None)
            log.exception("internal error, SSE operation %s %s", self._ident, ident)
            await self._emit(_event("next", self._wrap({"errors": [internal_error(ident)]})))
        finally:
            if self._stream is not None:
                await self._stream.aclose()
        await self._emit(_event("complete", None if self._ident is None else {"id": self._ident}))
        if self._after is not None:
            await self._after()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._stream is not None:
            await self._stream.aclose()


@dataclass
class _Reservation:
    """A single connection mode stream: who reserved it, its events, its operations."""

    subject: str
    events: Outbox[bytes | object]
    expires: float  # dropped then, unless opened
    open: bool = False
    closed: bool = False  # forgotten: its stream closed, or it expired unopened
    ops: dict[str, _Running] = field(default_factory=dict)
    slots: Slots.Connection = field(default_factory=Slots.Connection)
    starting: int = 0  # operations being started (a query runs then): not in `ops` yet


class _Reservations:
    """The reservations by token. Those not opened yet wait in creation order, so that
    expiry drops them from the front: at most `limit` wait, each at most `unclaimed_s` by
    `clock`. `examined` counts the reservations expiry looked at."""

    def __init__(self, limit: int, unclaimed_s: float, clock: Callable[[], float]) -> None:
        self._limit = limit
        self.unclaimed_s = unclaimed_s
        self._clock = clock
        self._by_token: dict[str, _Reservation] = {}
        self._waiting: OrderedDict[str, _Reservation] = OrderedDict()
        self.examined = 0

    @property
    def waiting(self) -> int:
        """How many reservations wait to be opened."""
        return len(self._waiting)

    def make(self, subject: str, send_buffer: int) -> str:
        """A new reservation's token, after the expired (and the oldest over the limit) are
        dropped."""
        now = self._clock()
        while self._waiting:
            token, oldest = next(iter(self._waiting.items()))
            self.examined += 1
            if oldest.expires > now and len(self._waiting) < self._limit:
                break
            self.forget(token)
        token = secrets.token_urlsafe(24)
        events: Outbox[bytes | object] = Outbox(send_buffer, _size)
        reservation = _Reservation(subject, events, now + self.unclaimed_s)
        self._by_token[token] = self._waiting[token] = reservation
        return token

    def get(self, token: str) -> _Reservation | None:
        """The reservation of `token`, None when there is none or it expired unopened."""
        reservation = self._by_token.get(token)
        if reservation is None or reservation.open or reservation.expires > self._clock():
            return reservation
        self.forget(token)
        return None

    def opened(self, token: str) -> None:
        self._by_token[token].open = True
        self._waiting.pop(token, None)

    def forget(self, token: str) -> _Reservation | None:
        """The reservation of `token`, no longer known (None when it was not)."""
        self._waiting.pop(token, None)
        reservation = self._by_token.pop(token, None)
        if reservation is not None:
            reservation.closed = True
        return reservation


@dataclass(frozen=True)
class _Request:
    """What the handler reads of every request before acting on it."""

    method: str
    headers: dict[bytes, bytes]
    params: dict[str, list[str]]
    token: str | None

    @property
    def wants_stream(self) -> bool:
        return b"text/event-stream" in self.headers.get(b"accept", b"")


class GraphQLEventStream:
    """The ASGI handler of `/graphql/stream`: runs operations with `operations` for
    principals of `authenticator`, POST bodies up to `max_body_bytes`; reservations not
    opened within `unclaimed_s` of `clock` are dropped."""

    def __init__(
        self,
        operations: Operations,
        authenticator: Authenticator,
        *,
        max_body_bytes: int,
        send_buffer: int,
        max_operations: int = 100,
        unclaimed_s: float = _UNCLAIMED_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._operations = operations
        self._authenticator = authenticator
        self._max_body_bytes = max_body_bytes
        self._send_buffer = send_buffer
        self._max_operations = max_operations
        # as many may wait to be opened as subscriptions may run: each is for one at least
        self.reservations = _Reservations(operations.slots.total, unclaimed_s, clock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = _read(scope)
        try:
            principal = await self._admit(request)
            await self._dispatch(request, principal, scope, receive, send)
        except RequestError as exc:
            await send_json(send, exc.status, exc.body(), headers=exc.headers)

    async def _admit(self, request: _Request) -> Principal:
        try:
            return await self._authenticator.principal(authorization(request.headers.items()))
        except Unauthenticated as exc:
            raise refusal(exc) from None

    async def _dispatch(
        self, request: _Request, principal: Principal, scope: Scope, receive: Receive, send: Send
    ) -> None:
        method = request.method
        if request.wants_stream and method in ("GET", "POST"):
            if request.token is None:
                await self._distinct(request, principal, scope, receive, send)
            else:
                reservation = self._reservation(request, principal)
                await self._open(request.token, reservation, receive, send)
        elif method == "PUT":
            await self._reserve(principal, send)
        elif method == "DELETE":
            await self._stop(self._reservation(request, principal), request)
            await send_body(send, 200, b"", b"text/plain; charset=utf-8")
        elif method in ("GET", "POST") and request.token is not None:
            reservation = self._reservation(request, principal)
            operation = await self._operation(request, scope, receive)
            await self._execute(reservation, operation, principal)
            await send_body(send, 202, b"", b"text/plain; charset=utf-8")
        else:
            raise RequestError(
                "GraphQL over SSE: GET or POST with Accept: text/event-stream, or PUT to "
                "reserve a stream",
                405,
                "METHOD_NOT_ALLOWED",
                ((b"allow", b"GET, POST, PUT, DELETE"),),
            )

    # -- distinct connections ----------------------------------------------------------

    async def _distinct(
        self, request: _Request, principal: Principal, scope: Scope, receive: Receive, send: Send
    ) -> None:
        operation = await self._operation(request, scope, receive)
        # started before the answer begins: a malformed request still gets its HTTP error
        started = await self._begin(operation, principal, Slots.Connection())
        events: Outbox[bytes | object] = Outbox(self._send_buffer, _size)
        running = _Running(started, events.put, None, lambda: events.put(_END)).start()
        try:
            await _stream(events, receive, send)
        finally:
            await running.stop()

    # -- single connection ---------------------------------------------------------------

    async def _reserve(self, principal: Principal, send: Send) -> None:
        token = self.reservations.make(principal.subject, self._send_buffer)
        await send_body(send, 201, token.encode(), b"text/plain; charset=utf-8")

    def _reservation(self, request: _Request, principal: Principal) -> _Reservation:
        reservation = self.reservations.get(request.token or "")
        if reservation is None or reservation.subject != principal.subject:
            raise RequestError(
                f"no such stream (or it was not opened within {self.reservations.unclaimed_s:g} "
                "s): reserve one with PUT, then open it at once",
                404,
                "NOT_FOUND",
            )
        return reservation

    async def _open(
        self, token: str, reservation: _Reservation, receive: Receive, send: Send
    ) -> None:
        if reservation.open:
            raise RequestError("the stream is open already", 409, "CONFLICT")
        self.reservations.opened(token)
        try:
            await _stream(reservation.events, receive, send)
        finally:
            await self._forget(token)

    async def _execute(
        self, reservation: _Reservation, operation: GraphQLRequest, principal: Principal
    ) -> None:
        ident = (operation.extensions or {}).get("operationId")
        if not isinstance(ident, str) or not ident:
            raise RequestError("the operation needs a string extensions.operationId")
        if not reservation.open:
            raise RequestError(
                "the stream of this reservation is not open: open it (GET with Accept: "
                "text/event-stream and the token) first, then send its operations",
                409,
                "CONFLICT",
            )
        if ident in reservation.ops:
            raise RequestError(f"operation {ident} runs already", 409, "CONFLICT")
        busy = reservation.starting
        busy += sum(1 for running in reservation.ops.values() if not running.streaming)
        if busy >= self._max_operations:  # running, or results the stream has not taken
            raise RequestError(
                f"this stream already has {busy} operations whose results it has not taken, "
                f"the most it may ({MAX_OPERATIONS}): read the stream, wait for one to "
                "complete, or open another",
                429,
                TOO_MANY_OPERATIONS,
            )
        reservation.starting += 1
        try:
            started = await self._begin(operation, principal, reservation.slots)
        finally:
            reservation.starting -= 1
        refusal = _late_refusal(reservation, ident)
        if refusal is not None:
            if isinstance(started, Stream):
                await started.aclose()
            raise refusal

        async def done() -> None:
            if reservation.ops.get(ident) is running:
                del reservation.ops[ident]

        running = _Running(started, reservation.events.put, ident, done)
        reservation.ops[ident] = running.start()

    async def _stop(self, reservation: _Reservation, request: _Request) -> None:
        ident = request.params.get("operationId", [""])[0]
        if not ident:
            raise RequestError("DELETE needs ?operationId=<the operation's id>")
        running = reservation.ops.pop(ident, None)
        if running is not None:
            await running.stop()

    async def _forget(self, token: str) -> None:
        reservation = self.reservations.forget(token)
        if reservation is None:
            return
        running = list(reservation.ops.values())
        reservation.ops.clear()
        await asyncio.gather(*(r.stop() for r in running), return_exceptions=True)

    # -- operations ------------------------------------------------------------------------

    async def _operation(self, request: _Request, scope: Scope, receive: Receive) -> GraphQLRequest:
        """The GraphQL request of a GET's query string or a JSON POST's body."""
        check_request(request.method, request.headers.get(b"content-type"))
        if request.method == "POST":
            length = request.headers.get(b"content-length")
            body = await read_body(receive, length, self._max_body_bytes, _BODY_HINT)
            return decode_body(body)
        found = decode_query_string(scope.get("query_string", b""), "GET")
        if found is None:
            raise RequestError("the request has no GraphQL document (a `query` parameter)")
        return found

    async def _begin(
        self, operation: GraphQLRequest, principal: Principal, connection: Slots.Connection
    ) -> Started:
        """`operation` started; one over the subscription limits is refused like one that
        failed validation. A malformed request raises RequestError."""
        try:
            return await self._operations.start(operation, principal, connection)
        except TooManySubscriptions as exc:
            return Refused(exc.errors())


def _late_refusal(reservation: _Reservation, ident: str) -> RequestError | None:
    """Why an operation that has just started on `reservation` must not run after all: its
    stream closed meanwhile (it would hold its slot with nobody reading), or its id was sent
    twice at once."""
    if reservation.closed:
        return RequestError(
            "the stream closed while the operation started: reserve another with PUT, open it "
            "and send the operation again",
            404,
            "NOT_FOUND",
        )
    if ident in reservation.ops:
        return RequestError(f"operation {ident} runs already", 409, "CONFLICT")
    return None


async def _stream(events: Outbox[bytes | object], receive: Receive, send: Send) -> None:
    """Answer with the event stream: `events` as they come (a comment when none came for
    `_HEARTBEAT_S`), until `_END` or the client goes away."""
    await send({"type": "http.response.start", "status": 200, "headers": _HEAD})
    await send({"type": "http.response.body", "body": b":\n\n", "more_body": True})
    writer = asyncio.create_task(_write(events, send))
    gone = asyncio.create_task(_disconnected(receive))
    try:
        await asyncio.wait((writer, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (writer, gone):
            task.cancel()
        await asyncio.gather(writer, gone, return_exceptions=True)
    if writer.done() and not writer.cancelled() and writer.exception() is None:
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": b"", "more_body": False})


class _Stalled(Exception):
    """The client took nothing of its stream for `_STALLED_S`."""


def _size(event: bytes | object) -> int:
    """An event's size in the send buffer: its bytes (`_END`: none)."""
    return len(event) if isinstance(event, bytes) else 0


async def _write(events: Outbox[bytes | object], send: Send) -> None:
    while True:
        # not asyncio.wait_for: on Python 3.11 it returns the event instead of raising when
        # cancelled as the event arrives, and this loop then outlived its stream's end
        try:
            async with asyncio.timeout(_HEARTBEAT_S):
                event = await events.get()
        except TimeoutError:
            event = b":\n\n"
        if event is _END:
            return
        assert isinstance(event, bytes)
        try:  # the server waits while the client's window is shut: not for ever
            async with asyncio.timeout(_STALLED_S):
                await send({"type": "http.response.body", "body": event, "more_body": True})
        except TimeoutError:
            log.info("an SSE client took nothing of its stream for %g s: ended", _STALLED_S)
            raise _Stalled from None


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _read(scope: Scope) -> _Request:
    headers: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        headers.setdefault(name, value)
    params = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    token = headers.get(TOKEN_HEADER)
    text = token.decode("latin-1") if token else params.get("token", [None])[0]
    return _Request(scope["method"], headers, params, text or None)
