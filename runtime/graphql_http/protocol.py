"""uvicorn's httptools protocol, with a JSON 414 for request targets it cannot parse.

httptools refuses a request target (path and query string) over 65,535 bytes, and uvicorn
then writes a plain-text `400 Invalid HTTP request received` before any app runs: a client
sending a long GET query would get neither the documented 414 nor a GraphQL error. This
protocol stops reading such a target as soon as it passes the limit (so it is never
buffered whole) and answers `414` with the same JSON error the endpoint gives a query
string over its own limit. The client may still be sending the rest of the target: closing
with unread bytes would reset the connection and lose the answer, so the connection is
half-closed and what follows is read and dropped for up to `_LINGER_S` (a lingering close,
as Apache and nginx do). Pass it as uvicorn's `http=`.
"""

from __future__ import annotations

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


class _TargetTooLong(Exception):
    """Raised in a parser callback: httptools stops and uvicorn calls send_400_response."""


class GraphQLHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol answering a request target too long to parse with a JSON 414."""

    _lingering = False

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
