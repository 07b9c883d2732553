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
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "TRACEPARENT_HEADER",
    "Trace",
    "current_request_id",
    "current_trace",
    "install_spans",
    "outgoing_headers",
    "parse_traceparent",
    "serving",
    "span",
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


@dataclass(frozen=True, slots=True)
class Trace:
    """A W3C trace context: the trace, the current span in it, whether it is sampled."""

    trace_id: str  # 32 lower-case hex digits
    span_id: str  # 16 lower-case hex digits
    sampled: bool = False

    @classmethod
    def new(cls) -> Trace:
        return cls(os.urandom(16).hex(), _span_id())

    def child(self) -> Trace:
        """A new span of the same trace."""
        return Trace(self.trace_id, _span_id(), self.sampled)

    def header(self) -> bytes:
        flags = b"01" if self.sampled else b"00"
        return b"00-%s-%s-%s" % (self.trace_id.encode(), self.span_id.encode(), flags)


def _span_id() -> str:
    return os.urandom(8).hex()


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


def _opened(
    name: str, parent: Trace | None, attributes: dict[str, Any]
) -> contextlib.AbstractContextManager[Trace]:
    if _spans is None:  # ids only: a new span id, the trace kept
        return contextlib.nullcontext(parent.child() if parent is not None else Trace.new())
    return _spans.open(name, parent, attributes)


@contextmanager
def serving(request_id: str, incoming: Trace | None, name: str) -> Iterator[Trace]:
    """Within the block, the request served is `request_id`, in a new span `name` of the
    trace `incoming` (a caller's `traceparent`), or of a new trace."""
    rid_token = _REQUEST_ID.set(request_id)
    try:
        with _opened(name, incoming, {"statefed.request_id": request_id}) as trace:
            trace_token = _TRACE.set(trace)
            try:
                yield trace
            finally:
                _TRACE.reset(trace_token)
    finally:
        _REQUEST_ID.reset(rid_token)


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Trace | None]:
    """Within the block, the current span is a new child `name` of the current one (a node
    call, the plan); outside a request nothing happens."""
    parent = _TRACE.get()
    if parent is None:
        yield None
        return
    with _opened(name, parent, attributes) as child:
        token = _TRACE.set(child)
        try:
            yield child
        finally:
            _TRACE.reset(token)


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
