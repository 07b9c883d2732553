"""uvicorn's httptools protocol, with a JSON 414 for request targets it cannot parse, one
write per response, and no idle close of a connection whose request waits to be read.

uvicorn writes a response's head and its body with one `transport.write` each, and uvloop
sends each at once: two system calls and two TCP segments for every small answer, the
largest single cost of a cache hit (a quarter of the gateway's samples). The writes of one
event-loop turn are joined here (`_Corked`) and sent at the end of the turn, the same bytes
in the same order; closing or half-closing sends what is held first, and a connection
upgraded to a WebSocket is handed the transport itself. A response sent whole is written as
soon as its last byte is, not at the end of the turn: what the app does after answering
(metrics, logs, closing its spans) then runs while the answer is on its way, not before.

httptools refuses a request target (path and query string) over 65,535 bytes, and uvicorn
then writes a plain-text `400 Invalid HTTP request received` before any app runs: a client
sending a long GET query would get neither the documented 414 nor a GraphQL error. This
protocol stops reading such a target as soon as it passes the limit (so it is never
buffered whole) and answers `414` with the same JSON error the endpoint gives a query
string over its own limit. The client may still be sending the rest of the target: closing
with unread bytes would reset the connection and lose the answer, so the connection is
half-closed and what follows is read and dropped for up to `_LINGER_S` (a lingering close,
as Apache and nginx do).

uvicorn closes a connection idle for `timeout_keep_alive` seconds from a timer. After the
event loop has stood still for longer than that (the process paused by SIGSTOP or a
debugger, a host that froze, a collection of a large heap) the timer fires before the loop
has read what the client sent meanwhile, and closing with a request unread resets the
connection: the client gets no answer. Here a connection with bytes waiting in its socket
is not idle; the timer is set again and the read that follows answers the request.

Pass it as uvicorn's `http=`.
"""

from __future__ import annotations

import asyncio
import fcntl
import struct
import termios
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from runtime.graphql_http.media import MediaType
from runtime.graphql_http.request import MAX_REQUEST_TARGET_BYTES, RequestError

__all__ = ["GraphQLHttpToolsProtocol"]

_LINGER_S = 2.0

_TOO_LONG = RequestError(
    f"the request target (path and query string) is longer than {MAX_REQUEST_TARGET_BYTES} "
    "bytes; send longer documents by POST",
    414,
    "URI_TOO_LONG",
)


def _unread_bytes(transport: asyncio.BaseTransport) -> int:
    """How many bytes the client has sent that the event loop has not read yet (0 once the
    socket is closed)."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.fileno() < 0:
        return 0
    try:
        waiting = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    return int(struct.unpack("i", waiting)[0])


class _TargetTooLong(Exception):
    """Raised in a parser callback: httptools stops and uvicorn calls send_400_response."""


class _Corked:
    """A transport whose writes within one event-loop turn reach the socket as one write."""

    __slots__ = ("_held", "_loop", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(data)

    def flush(self) -> None:
        """Send what this turn wrote (nothing once the connection is closing)."""
        if self._held:
            data = b"".join(self._held)
            self._held.clear()
            if not self.transport.is_closing():
                self.transport.write(data)

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + sum(map(len, self._held))

    def __getattr__(self, name: str) -> Any:  # everything else is the transport's own
        return getattr(self.transport, name)


class GraphQLHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol answering a request target too long to parse with a JSON 414,
    sending each response in one write, and never closing as idle a connection whose next
    request is waiting to be read."""

    _lingering = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Corked(transport, self.loop))  # type: ignore[arg-type]

    def handle_websocket_upgrade(self) -> None:
        corked = self.transport
        if isinstance(corked, _Corked):  # the WebSocket protocol writes for itself
            corked.flush()
            self.transport = corked.transport
        super().handle_websocket_upgrade()

    def on_response_complete(self) -> None:
        corked = self.transport
        if isinstance(corked, _Corked):  # the whole response is held: send it now
            corked.flush()
        super().on_response_complete()

    def timeout_keep_alive_handler(self) -> None:
        if _unread_bytes(self.transport) > 0:  # a request came while the loop stood still
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )
            return
        super().timeout_keep_alive_handler()

    def data_received(self, data: bytes) -> None:
        if not self._lingering:
            super().data_received(data)

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_REQUEST_TARGET_BYTES:
            raise _TargetTooLong

    def send_400_response(self, msg: str) -> None:
        if len(getattr(self, "url", b"")) <= MAX_REQUEST_TARGET_BYTES:
            super().send_400_response(msg)
            return
        body = orjson.dumps(_TOO_LONG.body())
        head = [b"HTTP/1.1 414 URI Too Long\r\n"]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: " + MediaType.JSON.content_type + b"\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
            body,
        ]
        self.transport.write(b"".join(head))
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(_LINGER_S, self.transport.close)
