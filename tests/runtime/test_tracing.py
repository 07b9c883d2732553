"""W3C traceparent parsing and the request context carried to node calls."""

from __future__ import annotations

import pytest

from runtime.tracing import (
    Serving,
    Span,
    Trace,
    current_request_id,
    current_trace,
    outgoing_headers,
    parse_traceparent,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def test_a_valid_traceparent_is_read() -> None:
    parsed = parse_traceparent(f"00-{TRACE}-{PARENT}-01".encode())
    assert parsed == Trace(TRACE, PARENT, sampled=True)
    assert parse_traceparent(f"00-{TRACE}-{PARENT}-00".encode()) == Trace(TRACE, PARENT, False)
    # a later version may append fields after a dash
    assert parse_traceparent(f"01-{TRACE}-{PARENT}-01-extra".encode()) is not None


@pytest.mark.parametrize(
    "raw",
    [
        None,
        b"",
        b"garbage",
        f"ff-{TRACE}-{PARENT}-01".encode(),  # version ff is invalid
        f"00-{'0' * 32}-{PARENT}-01".encode(),  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01".encode(),  # all-zero parent id
        f"00-{TRACE.upper()}-{PARENT}-01".encode(),  # upper-case hex
        f"00-{TRACE}-{PARENT}-01-extra".encode(),  # version 00 has exactly 4 fields
        f"00-{TRACE[:-1]}-{PARENT}-01".encode(),
    ],
)
def test_an_invalid_traceparent_is_ignored(raw: bytes | None) -> None:
    assert parse_traceparent(raw) is None


def test_serving_keeps_the_trace_and_node_calls_get_a_new_span_each() -> None:
    incoming = Trace(TRACE, PARENT, sampled=True)
    assert outgoing_headers() == [] and current_request_id() is None
    with Serving("req-1", incoming, "request") as server:
        assert server.trace_id == TRACE and server.span_id != PARENT
        assert current_request_id() == "req-1" and current_trace() == server
        with Span("node call") as first:
            headers = dict(outgoing_headers())
        with Span("node call") as second:
            assert first is not None and second is not None
            assert first.span_id != second.span_id
        assert headers[b"x-request-id"] == b"req-1"
        assert headers[b"traceparent"] == f"00-{TRACE}-{first.span_id}-01".encode()
        assert current_trace() == server
    assert current_trace() is None and current_request_id() is None


def test_without_a_traceparent_a_request_starts_a_trace() -> None:
    with Serving("req-2", None, "request") as trace:
        assert len(trace.trace_id) == 32 and len(trace.span_id) == 16
        assert parse_traceparent(trace.header()) == trace
