"""What `configure_logging` keeps out of a part's log, and the names it shows: httpx's line
per request only at debug, uvicorn's lines as `uvicorn` (it logs them as `uvicorn.error`)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from runtime.logs import configure_logging

_LOGGERS = ("", "httpx", "httpcore", "py4j", "uvicorn", "uvicorn.error")


@contextmanager
def _bare_root() -> Iterator[None]:
    """The loggers as in a part's process: no handlers (pytest adds its own to each test's
    call; an in-process uvicorn of another test adds uvicorn's, may stop their propagation
    and may disable them), and every logger's state restored afterwards."""
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    saved = [(lg, lg.level, lg.handlers[:], lg.propagate, lg.disabled) for lg in loggers]
    for logger in loggers:
        logger.handlers.clear()
        logger.propagate, logger.disabled = True, False
        if logger.name != "root":
            logger.setLevel(logging.NOTSET)
    try:
        yield
    finally:
        for logger, level, handlers, propagate, disabled in saved:
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate, logger.disabled = propagate, disabled


def _log_lines(log_format: str, level: str) -> list[str]:
    """What a part configured with `log_format` and `level` writes of a few lines."""
    stream = io.StringIO()
    with _bare_root():
        assert configure_logging("node", log_format, level, node_id="n1", stream=stream)
        logging.getLogger("httpx").info('HTTP Request: GET http://n1/health "HTTP/1.1 200 OK"')
        logging.getLogger("httpx").warning("an httpx warning")
        logging.getLogger("uvicorn.error").info("Started server process [7]")
        logging.getLogger("node.serve.app").info("node n1: stopped")
    return stream.getvalue().splitlines()


def test_httpx_request_lines_are_left_out_at_info() -> None:
    lines = _log_lines("text", "info")
    assert not any("HTTP Request" in line for line in lines)
    assert any("WARNING httpx: an httpx warning" in line for line in lines)
    assert any("INFO node.serve.app: node n1: stopped" in line for line in lines)


def test_httpx_request_lines_show_at_debug() -> None:
    lines = _log_lines("text", "debug")
    assert any("INFO httpx: HTTP Request: GET http://n1/health" in line for line in lines)


def test_uvicorns_lines_are_named_uvicorn_in_text() -> None:
    lines = _log_lines("text", "info")
    assert any(line.endswith("INFO uvicorn: Started server process [7]") for line in lines)
    assert not any("uvicorn.error" in line for line in lines)


def test_uvicorns_lines_are_named_uvicorn_in_json() -> None:
    lines = [json.loads(line) for line in _log_lines("json", "info")]
    started = [line for line in lines if line["message"] == "Started server process [7]"]
    assert [(line["logger"], line["level"]) for line in started] == [("uvicorn", "info")]
