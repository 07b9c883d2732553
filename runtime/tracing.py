"""The request being served, in context variables: its id and its W3C trace context.

The GraphQL-over-HTTP layer (`runtime.graphql_http.endpoint`) sets both for each request
it serves: the id from `x-request-id` (or a new one), the trace from a valid `traceparent`
header (the same trace id, a new span id for this server's span) or a new trace. The
gateway sends both on every node call (`outgoing_headers`: a new span id per call, the
trace id kept), so the gateway's and the nodes' log lines of one client request carry the
same request id and trace id (`runtime.logs`). With OpenTelemetry configured
(`runtime.otel`), the span ids are those of the exported spans.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from typing import Any, NamedTuple, Protocol

from runtime.ids import random_bits

__all__ = [
    "TRACEPARENT_HEADER",
    "Serving",
    "Span",
    "Trace",
    "current_request_id",
    "current_trace",
    "install_spans",
    "outgoing_headers",
    "parse_traceparent",
]

TRACEPARENT_HEADER = b"traceparent"
REQUEST_ID_HEADER = b"x-request-id"
# version 00: 2 hex version, 32 hex trace id, 16 hex parent id, 2 hex flags (W3C Trace Context)
_TRACEPARENT = re.compile(rb"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_INVALID_TRACE = "0" * 32
_INVALID_SPAN = "0" * 16

_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "statefed_request_id", default=None
)
_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar(
    "statefed_trace", default=None
)


class Trace(NamedTuple):
    """A W3C trace context: the trace, the current span in it, whether it is sampled."""

    trace_id: str  # 32 lower-case hex digits
    span_id: str  # 16 lower-case hex digits
    sampled: bool = False

    @classmethod
    def new(cls) -> Trace:
        return cls(f"{random_bits(128) or 1:032x}", _span_id())

    def child(self) -> Trace:
        """A new span of the same trace."""
        return Trace(self.trace_id, _span_id(), self.sampled)

    def header(self) -> bytes:
        flags = "01" if self.sampled else "00"
        return f"00-{self.trace_id}-{self.span_id}-{flags}".encode()


def _span_id() -> str:
    return f"{random_bits(64) or 1:016x}"


def parse_traceparent(raw: bytes | None) -> Trace | None:
    """The trace context of a `traceparent` header, None when absent or invalid (version
    ff, all-zero ids, wrong lengths or upper-case hex are invalid)."""
    if raw is None:
        return None
    value = raw.strip()
    found = _TRACEPARENT.fullmatch(value[:55])
    if found is None:
        return None
    version, trace_id, span_id, flags = (g.decode() for g in found.groups())
    # version 00 is exactly 55 characters; a later version may append `-...`
    if version == "ff" or (len(value) > 55 and (version == "00" or value[55:56] != b"-")):
        return None
    if trace_id == _INVALID_TRACE or span_id == _INVALID_SPAN:
        return None
    return Trace(trace_id, span_id, bool(int(flags, 16) & 1))


def current_request_id() -> str | None:
    return _REQUEST_ID.get()


def current_trace() -> Trace | None:
    return _TRACE.get()


class Spans(Protocol):
    """Where spans are recorded (`runtime.otel.OtelSpans`): `open(name, parent, attributes)`
    is a context manager giving the new span's trace context; a None parent starts a trace."""

    def open(
        self, name: str, parent: Trace | None, attributes: dict[str, Any]
    ) -> contextlib.AbstractContextManager[Trace]: ...


_spans: Spans | None = None


def install_spans(spans: Spans | None) -> None:
    """Record spans with `spans` from now on in this process (None: only pass trace ids on)."""
    global _spans
    _spans = spans


def _open(
    name: str, parent: Trace | None, attributes: dict[str, Any]
) -> tuple[Trace, contextlib.AbstractContextManager[Trace]]:
    """A new recorded span: its trace context, and the recorder's span to close."""
    assert _spans is not None
    recorded = _spans.open(name, parent, attributes)
    return recorded.__enter__(), recorded


class Serving:
    """`with Serving(request_id, incoming, name) as trace`: within the block, the request
    served is `request_id`, in a new span `name` of the trace `incoming` (a caller's
    `traceparent`), or of a new trace. A class, not a generator: it runs on every request."""

    __slots__ = ("_incoming", "_name", "_recorded", "_request_id", "_tokens")

    def __init__(self, request_id: str, incoming: Trace | None, name: str) -> None:
        self._request_id = request_id
        self._incoming = incoming
        self._name = name

    def __enter__(self) -> Trace:
        incoming = self._incoming
        if _spans is None:  # ids only: the fast path of every request
            self._recorded = None
            trace = incoming.child() if incoming is not None else Trace.new()
        else:
            attributes = {"statefed.request_id": self._request_id}
            trace, self._recorded = _open(self._name, incoming, attributes)
        self._tokens = (_REQUEST_ID.set(self._request_id), _TRACE.set(trace))
        return trace

    def __exit__(self, *exc: Any) -> None:
        request_token, trace_token = self._tokens
        _TRACE.reset(trace_token)
        _REQUEST_ID.reset(request_token)
        if self._recorded is not None:
            self._recorded.__exit__(*exc)


class Span:
    """`with Span(name, **attributes) as trace`: within the block, the current span is a
    new child `name` of the current one (the plan, a node call); outside a request (no
    current span) nothing happens and `trace` is None."""

    __slots__ = ("_attributes", "_name", "_recorded", "_token")

    def __init__(self, name: str, **attributes: Any) -> None:
        self._name = name
        self._attributes = attributes

    def __enter__(self) -> Trace | None:
        parent = _TRACE.get()
        if parent is None:
            self._token = self._recorded = None
            return None
        if _spans is None:  # ids only: a new span id, the trace kept
            self._recorded = None
            child = Trace(parent.trace_id, _span_id(), parent.sampled)
        else:
            child, self._recorded = _open(self._name, parent, self._attributes)
        self._token = _TRACE.set(child)
        return child

    def __exit__(self, *exc: Any) -> None:
        if self._token is not None:
            _TRACE.reset(self._token)
        if self._recorded is not None:
            self._recorded.__exit__(*exc)


def outgoing_headers() -> list[tuple[bytes, bytes]]:
    """The headers carrying the current request id and trace to a node: the trace with the
    current span (the caller opens a span per call); none outside a request."""
    headers = []
    request_id = _REQUEST_ID.get()
    if request_id is not None:
        headers.append((REQUEST_ID_HEADER, request_id.encode()))
    trace = _TRACE.get()
    if trace is not None:
        headers.append((TRACEPARENT_HEADER, trace.header()))
    return headers
