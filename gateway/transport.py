"""The httpx transport of the gateway's calls to nodes: HTTP/1.1 keep-alive connections on
asyncio protocols, answers parsed by httptools (which uvicorn already uses).

httpx's default transport (httpcore over anyio streams) costs ~500 us of CPU per request
on these machines and httpx's own client ~100 us on top; this transport costs ~50 us, so
a node call no longer dominates a point query. The gateway keeps httpx's client API:
timeouts come from the request as httpx sets them and failures are raised as the httpx
exceptions the default transport raises (ConnectError, ConnectTimeout, ReadTimeout,
PoolTimeout, RemoteProtocolError). Only plain `http` is spoken here; `https` node URLs go
to httpx's default transport.

A connection that sat idle in the pool may have been closed by the node (uvicorn closes
keep-alive connections after 5 s) just as a request was written to it: when a reused
connection ends before any byte of the answer, the request is sent once more on a new
connection. That is safe because the gateway only sends nodes queries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, cast

import httptools
import httpx

__all__ = ["NodeTransport"]

_Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


class _StaleConnection(Exception):
    """A reused connection ended before any byte of the answer: send again elsewhere."""


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: one request at a time, answers parsed by httptools."""

    def __init__(self, on_lost: Callable[[_Connection], None]) -> None:
        self._on_lost = on_lost  # the pool forgets the connection when it is idle there
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._answer: asyncio.Future[_Answer] | None = None
        self._headers: list[tuple[bytes, bytes]] = []
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
            self._fail(httpx.RemoteProtocolError(f"the node's answer is not valid HTTP: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._on_lost(self)
        if self._received:
            self._fail(httpx.RemoteProtocolError("the node closed the connection mid-answer"))
        else:
            self._fail(_StaleConnection())

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._headers, self._body = [], []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self.reusable = self._parser.should_keep_alive()
        if self._answer is not None and not self._answer.done():
            status = self._parser.get_status_code()
            self._answer.set_result((status, self._headers, b"".join(self._body)))

    async def exchange(self, request: bytes, timeout: float | None) -> _Answer:
        """Write `request` and wait for the whole answer; raises httpx.ReadTimeout after
        `timeout` seconds, RemoteProtocolError or _StaleConnection when the node
        closes the connection first."""
        if self.closed or self._transport is None:
            raise _StaleConnection()
        self._answer = asyncio.get_running_loop().create_future()
        self._received = False
        self._transport.write(request)
        try:
            async with asyncio.timeout(timeout):
                return await self._answer
        except TimeoutError as exc:
            self.close()  # a late answer would be taken for the next request's
            raise httpx.ReadTimeout(f"no answer within {timeout} s") from exc

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

    async def acquire(self, timeouts: Mapping[str, Any]) -> tuple[_Connection, bool]:
        """A connection, and whether it was reused; holds a slot until released."""
        try:
            async with asyncio.timeout(timeouts.get("pool")):
                await self._slots.acquire()
        except TimeoutError as exc:
            raise httpx.PoolTimeout(f"no free connection to {self._host}:{self._port}") from exc
        try:
            while self._idle:
                connection = self._idle.pop()
                if not connection.closed:
                    return connection, True
            return await self._connect(timeouts.get("connect")), False
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

    async def _connect(self, timeout: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        where = f"{self._host}:{self._port}"
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self._forget), self._host, self._port
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"no connection to {where} within {timeout} s") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {where}: {exc}") from exc
        return connection


class NodeTransport(httpx.AsyncBaseTransport):
    """At most `max_connections` connections per host and port, used by httpx clients
    (as their transport) or directly through `post`, which skips httpx's request and
    response objects (~150 us of CPU per call)."""

    def __init__(self, max_connections: int) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self._limit = max_connections
        self._pools: dict[tuple[str, int], _Pool] = {}
        self._heads: dict[str, tuple[_Pool, bytes]] = {}  # URL -> pool, request head
        self._other = httpx.AsyncHTTPTransport()  # https: httpx's own transport

    async def post(self, url: str, body: bytes) -> tuple[int, bytes]:
        """POST a JSON `body` to an `http` URL; the status and body of the answer. Raises
        httpx's ConnectError or RemoteProtocolError; the caller bounds the time (an
        abandoned request closes its connection)."""
        target = self._heads.get(url)
        if target is None:
            target = self._heads[url] = self._post_head(httpx.URL(url))
        pool, head = target
        request = b"%s%d\r\n\r\n%s" % (head, len(body), body)
        status, _headers, answer = await self._exchange(pool, request, {})
        return status, answer

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            return await self._other.handle_async_request(request)
        timeouts = request.extensions.get("timeout", {})
        encoded = _encode(request, await request.aread())
        status, headers, body = await self._exchange(self._pool(request.url), encoded, timeouts)
        return httpx.Response(
            status,
            headers=headers,
            stream=httpx.ByteStream(body),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        self._heads.clear()
        await self._other.aclose()

    async def _exchange(self, pool: _Pool, request: bytes, timeouts: Mapping[str, Any]) -> _Answer:
        for _attempt in range(2):
            connection, reused = await pool.acquire(timeouts)
            try:
                answer = await connection.exchange(request, timeouts.get("read"))
            except _StaleConnection:
                pool.discard(connection)
                if reused:
                    continue
                break
            except BaseException:
                pool.discard(connection)
                raise
            pool.release(connection)
            return answer
        raise httpx.RemoteProtocolError("the node closed the connection without answering")

    def _pool(self, url: httpx.URL) -> _Pool:
        port = url.port or 80
        pool = self._pools.get((url.host, port))
        if pool is None:
            pool = self._pools[(url.host, port)] = _Pool(url.host, port, self._limit)
        return pool

    def _post_head(self, url: httpx.URL) -> tuple[_Pool, bytes]:
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"{url}: NodeTransport.post speaks plain http only")
        host = url.netloc  # host[:port] as the URL has it
        head = (
            b"POST " + url.raw_path + b" HTTP/1.1\r\nhost: " + host + b"\r\n"
            b"content-type: application/json\r\naccept: application/json\r\n"
            b"content-length: "
        )
        return self._pool(url), head


def _encode(request: httpx.Request, body: bytes) -> bytes:
    """The request as HTTP/1.1 bytes; httpx has set Host and Content-Length."""
    lines = [request.method.encode(), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
    for name, value in request.headers.raw:
        lines += (name, b": ", value, b"\r\n")
    lines.append(b"\r\n")
    return b"".join(lines) + body
