"""The gateway's connections to nodes: HTTP/1.1 keep-alive connections on asyncio
protocols, answers parsed by httptools (which uvicorn already uses).

A node call through httpx.AsyncClient cost the gateway ~850 us of CPU on these machines
(httpcore over anyio streams ~500 us, the client ~100-200 us); through these connections it
costs ~50 us, so a node call no longer dominates a point query. A call ends at the
caller's deadline (event-loop time) with NodeTransportTimeoutError, or when the caller
abandons it; either closes its connection. The deadline is a timer on the answer, not a
cancellation of the caller's task (`asyncio.timeout` cost a point read ~6 us of ~170).
`https` node URLs are posted with an httpx client instead (`HttpxCaller`, also how tests
reach fake nodes).

`https` node certificates are verified against STATEFED_GATEWAY_NODE_CA (a PEM file) or
the system's trust store, host names included. Both callers raise the transport's own
errors (their messages never name the URL: errors reach clients); httpx's are mapped to
them at one seam, `HttpxCaller.post`, so nothing above this module knows which client made
the call:

```
NodeTransportError             no complete HTTP answer came back from the node
├── NodeConnectError           no connection: refused, unreachable, an invalid URL
│   └── NodeTLSError           the node's certificate failed verification (https)
├── NodeReadError              the connection ended before a whole, valid HTTP answer
└── NodeTransportTimeoutError  the call's deadline passed (also a TimeoutError)
```

A connection that sat idle in the pool may have been closed by the node (uvicorn closes
keep-alive connections after 5 s) just as a request was written to it: when a reused
connection ends before any byte of the answer, the request is sent once more on a new
connection. That is safe because the gateway only sends nodes queries.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar, cast

import httptools
import httpx

from runtime.tls import client_context

__all__ = [
    "Headers",
    "HttpxCaller",
    "NodeConnectError",
    "NodeConnections",
    "NodeReadError",
    "NodeTLSError",
    "NodeTransportError",
    "NodeTransportTimeoutError",
]

T = TypeVar("T")
_Answer = tuple[int, bytes]  # status, body
Headers = Sequence[tuple[bytes, bytes]]  # extra request headers, lower-case names
_JSON_HEADERS = {"content-type": "application/json", "accept": "application/json"}


class NodeTransportError(Exception):
    """A node call got no complete HTTP answer; the message names the node's address."""


class NodeConnectError(NodeTransportError):
    """No connection to the node could be opened (refused, unreachable, invalid URL)."""


class NodeTLSError(NodeConnectError):
    """The node's TLS certificate failed verification against the gateway's CA."""


class NodeReadError(NodeTransportError):
    """The connection ended before a whole, valid HTTP answer arrived."""


class NodeTransportTimeoutError(NodeTransportError, TimeoutError):
    """The call's deadline passed (or an httpx client's own timeout ran out) first."""


# httpx's exceptions, most specific first, and the transport error each becomes
_HTTPX_ERRORS: tuple[tuple[type[Exception], type[NodeTransportError]], ...] = (
    (httpx.TimeoutException, NodeTransportTimeoutError),
    (httpx.ConnectError, NodeConnectError),
    (httpx.UnsupportedProtocol, NodeConnectError),
    (httpx.InvalidURL, NodeConnectError),
    (httpx.NetworkError, NodeReadError),  # ReadError, WriteError, CloseError
    (httpx.RemoteProtocolError, NodeReadError),
    (httpx.HTTPError, NodeTransportError),
)


def _mapped(exc: Exception) -> NodeTransportError:
    verification = _certificate_problem(exc)
    if verification is not None:
        return NodeTLSError(
            f"TLS certificate verification failed: {verification} (the gateway trusts the CA "
            "of STATEFED_GATEWAY_NODE_CA, else the system's trust store)"
        )
    for httpx_type, transport_type in _HTTPX_ERRORS:
        if isinstance(exc, httpx_type):
            return transport_type(f"{type(exc).__name__}: {exc}")
    return NodeTransportError(f"{type(exc).__name__}: {exc}")


def _certificate_problem(exc: BaseException | None) -> str | None:
    """What `ssl` said of a certificate it refused, found among the causes of `exc`."""
    seen = 0
    while exc is not None and seen < 8:  # httpx chains httpcore's error, which chains ssl's
        if isinstance(exc, ssl.SSLCertVerificationError):
            return exc.verify_message or exc.reason or "certificate verify failed"
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


class _StaleConnection(Exception):
    """A reused connection ended before any byte of the answer: send again elsewhere."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: one request at a time, answers parsed by httptools."""

    def __init__(self, on_lost: Callable[[_Connection], None]) -> None:
        self._on_lost = on_lost  # the pool forgets the connection when it is idle there
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._answer: asyncio.Future[_Answer] | None = None
        self._body: list[bytes] = []
        self._received = False  # a byte of the current answer arrived
        self.closed = False
        self.reusable = True  # the last answer allowed keep-alive

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they implement it
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._answer is None or self._answer.done():
            self.close()  # bytes nobody asked for: the connection is out of step
            return
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(NodeReadError(f"the node's answer is not valid HTTP: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._on_lost(self)
        if self._received:
            self._fail(NodeReadError("the node closed the connection mid-answer"))
        else:
            self._fail(_StaleConnection())

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._body = []

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self.reusable = self._parser.should_keep_alive()
        if self._answer is not None and not self._answer.done():
            status = self._parser.get_status_code()
            self._answer.set_result((status, b"".join(self._body)))

    async def exchange(self, request: bytes, deadline: float | None) -> _Answer:
        """Write `request` and wait for the whole answer until `deadline` (event-loop time;
        None: as long as the caller waits); raises NodeReadError or _StaleConnection when the
        node closes the connection first, NodeTransportTimeoutError at the deadline."""
        if self.closed or self._transport is None:
            raise _StaleConnection()
        loop = asyncio.get_running_loop()
        answer = self._answer = loop.create_future()
        self._received = False
        self._transport.write(request)
        if deadline is None:
            return await answer
        timer = loop.call_at(deadline, self._expire)
        try:
            return await answer
        finally:
            timer.cancel()

    def _expire(self) -> None:
        self._fail(NodeTransportTimeoutError("no answer from the node before the deadline"))

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    def _fail(self, exc: Exception) -> None:
        self.close()
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(exc)


class _Pool:
    """The connections to one host and port: at most `limit` open or opening at a time;
    idle ones are reused newest first."""

    def __init__(self, host: str, port: int, limit: int) -> None:
        self._host = host
        self._port = port
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[_Connection] = []

    async def acquire(self, deadline: float | None) -> tuple[_Connection, bool]:
        """A connection, and whether it was reused; holds a slot until released. Waiting for
        a slot or a new connection ends at `deadline` with NodeTransportTimeoutError."""
        if self._slots.locked():
            busy = "no free connection to the node before the deadline (all are busy)"
            await _until(deadline, self._slots.acquire(), busy)
        else:
            await self._slots.acquire()  # a slot is free: no wait
        try:
            while self._idle:
                connection = self._idle.pop()
                if not connection.closed:
                    return connection, True
            opening = "no connection to the node before the deadline"
            return await _until(deadline, self._connect(), opening), False
        except BaseException:
            self._slots.release()
            raise

    def release(self, connection: _Connection) -> None:
        """Give back the slot; keep the connection when it can carry another request."""
        if connection.closed or not connection.reusable:
            connection.close()
        else:
            self._idle.append(connection)
        self._slots.release()

    def discard(self, connection: _Connection) -> None:
        """Give back the slot of a connection that failed."""
        connection.close()
        self._slots.release()

    def close(self) -> None:
        for connection in list(self._idle):
            connection.close()
        self._idle.clear()

    def _forget(self, connection: _Connection) -> None:
        # an idle connection the node closed (keep-alive timeout, the node went away)
        if connection in self._idle:
            self._idle.remove(connection)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                lambda: _Connection(self._forget), self._host, self._port
            )
        except OSError as exc:
            where = f"{self._host}:{self._port}"
            raise NodeConnectError(f"cannot connect to {where}: {exc}") from exc
        return connection


async def _until(deadline: float | None, waited: Awaitable[T], failure: str) -> T:
    """`waited`, or NodeTransportTimeoutError(`failure`) at `deadline` (None: no bound)."""
    if deadline is None:
        return await waited
    try:
        async with asyncio.timeout_at(deadline):
            return await waited
    except TimeoutError as exc:
        raise NodeTransportTimeoutError(failure) from exc


class HttpxCaller:
    """Posts JSON bodies through an httpx client (https node URLs; tests reach fake nodes
    through ASGI transports); httpx's exceptions become the transport's own here."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def post(
        self, url: str, body: bytes, headers: Headers = (), *, deadline: float | None = None
    ) -> tuple[int, bytes]:
        sent = _JSON_HEADERS
        if headers:
            sent = {**_JSON_HEADERS, **{n.decode(): v.decode("latin-1") for n, v in headers}}
        try:
            response = await _until(
                deadline,
                self.client.post(url, content=body, headers=sent),
                "no answer from the node before the deadline",
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise _mapped(exc) from exc
        return response.status_code, response.content


class NodeConnections:
    """At most `max_connections` connections per host and port, opened as needed; https
    nodes are verified against `ca` (a PEM file), or the system's trust store when None."""

    def __init__(self, max_connections: int, ca: Path | None = None) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self._limit = max_connections
        self._ca = ca
        self._pools: dict[tuple[str, int], _Pool] = {}
        self._heads: dict[str, tuple[_Pool, bytes]] = {}  # URL -> pool, request head
        self._tls: HttpxCaller | None = None  # for https URLs, made on first use

    async def post(
        self, url: str, body: bytes, headers: Headers = (), *, deadline: float | None = None
    ) -> tuple[int, bytes]:
        """POST a JSON `body` with `headers` to `url` (the answer by `deadline`, event-loop
        time); the status and body of the answer."""
        target = self._heads.get(url)
        if target is None:
            try:
                parsed = httpx.URL(url)
            except httpx.InvalidURL as exc:
                raise _mapped(exc) from exc
            if parsed.scheme != "http":
                return await self._tls_caller().post(url, body, headers, deadline=deadline)
            target = self._heads[url] = self._post_head(parsed)
        pool, head = target
        extra = b"".join(b"%s: %s\r\n" % header for header in headers)
        request = b"%s%d\r\n%s\r\n%s" % (head, len(body), extra, body)
        for _attempt in range(2):
            connection, reused = await pool.acquire(deadline)
            try:
                answer = await connection.exchange(request, deadline)
            except _StaleConnection:
                pool.discard(connection)
                if reused:
                    continue
                break
            except BaseException:  # a failure, or the caller gave up: never reuse it
                pool.discard(connection)
                raise
            pool.release(connection)
            return answer
        raise NodeReadError("the node closed the connection without answering")

    async def aclose(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        self._heads.clear()
        if self._tls is not None:
            await self._tls.client.aclose()

    def _tls_caller(self) -> HttpxCaller:
        if self._tls is None:
            limits = httpx.Limits(max_connections=self._limit)
            # no timeout of its own: the caller bounds the time, as for plain http
            client = httpx.AsyncClient(
                limits=limits, timeout=None, trust_env=False, verify=client_context(self._ca)
            )
            self._tls = HttpxCaller(client)
        return self._tls

    def _post_head(self, url: httpx.URL) -> tuple[_Pool, bytes]:
        port = url.port or 80
        pool = self._pools.get((url.host, port))
        if pool is None:
            pool = self._pools[(url.host, port)] = _Pool(url.host, port, self._limit)
        head = (
            b"POST " + url.raw_path + b" HTTP/1.1\r\nhost: " + url.netloc + b"\r\n"
            b"content-type: application/json\r\naccept: application/json\r\n"
            b"content-length: "
        )
        return pool, head
