"""Log lines of every part: JSON objects with the request being served, or text."""

from __future__ import annotations

import io
import json
import logging
import sys

from runtime.logs import JsonFormatter, configure_logging
from runtime.tracing import Serving, Trace

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(
        "node.changelog.materializer", logging.WARNING, __file__, 1, message, args, None
    )


def test_a_json_line_names_the_part_node_request_and_trace() -> None:
    formatter = JsonFormatter("node", "n1")
    outside = json.loads(formatter.format(_record("applied %d records", 5)))
    assert outside["message"] == "applied 5 records" and outside["level"] == "warning"
    assert outside["part"] == "node" and outside["node"] == "n1"
    assert outside["logger"] == "node.changelog.materializer" and outside["time"].endswith("+00:00")
    assert "request_id" not in outside and "trace_id" not in outside
    with Serving("req-9", Trace(TRACE, "00f067aa0ba902b7"), "request") as trace:
        inside = json.loads(formatter.format(_record("read")))
    assert inside["request_id"] == "req-9"
    assert inside["trace_id"] == TRACE and inside["span_id"] == trace.span_id


def test_a_json_line_carries_the_traceback() -> None:
    try:
        raise ValueError("broken store")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = json.loads(JsonFormatter("gateway").format(record))
    assert "ValueError: broken store" in line["exception"] and "node" not in line


def test_a_lone_surrogate_is_written_as_its_escape_in_one_json_line() -> None:
    """A file name or header decoded with surrogateescape is no UTF-8, which orjson refuses:
    the line would be lost and a traceback printed instead."""
    name = b"words-\xff.json".decode("utf-8", "surrogateescape")
    try:
        raise OSError(f"cannot read {name}")
    except OSError:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "bad %s", (name,), sys.exc_info()
        )
    text = JsonFormatter("node", "n1").format(record)
    assert "\n" not in text
    line = json.loads(text)
    assert line["message"] == "bad words-\\udcff.json"
    assert "OSError: cannot read words-\\udcff.json" in line["exception"]
    assert line["part"] == "node" and line["level"] == "error"


def test_configure_logging_leaves_an_embedding_programs_logging_alone() -> None:
    root = logging.getLogger()
    assert root.handlers  # pytest's own capture handlers
    assert configure_logging("node", "json", "debug", stream=io.StringIO()) is None
