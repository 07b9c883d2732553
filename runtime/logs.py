"""Log set-up shared by every part: text or JSON lines, a level, and the request being
served in every line written while serving it.

Each part's configuration reads STATEFED_LOG_FORMAT and STATEFED_LOG_LEVEL (with the
choices below) and its launcher calls `configure_logging`. `json` writes one JSON object a
line (time, level, part, node id where there is one, request id and trace id where there
are, logger, message, and the traceback when there is one); `text` (the default) the
classic `time level logger: message` line. The level is the same variable for every part
(the gateway's older STATEFED_GATEWAY_LOG_LEVEL wins for the gateway when set). The
request id and trace id come from context variables (`runtime.tracing`), set by the
GraphQL-over-HTTP layer for the request it serves, so a line logged anywhere below it
carries them. httpx and httpcore log every request they send at INFO: their lines show at
`debug` only. uvicorn logs its own lines (started, shutting down) as `uvicorn.error`
whatever their level; they show as `uvicorn`.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

from runtime.tracing import current_request_id, current_trace

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "JsonFormatter", "configure_logging"]

LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ms), level, part, node id, request id, trace
    id, logger, message, and `exception` with the traceback when there is one."""

    def __init__(self, part: str, node_id: str | None = None) -> None:
        super().__init__()
        self._fixed: dict[str, Any] = {"part": part}
        if node_id is not None:
            self._fixed["node"] = node_id

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            **self._fixed,
        }
        request_id = current_request_id()
        if request_id is not None:
            line["request_id"] = request_id
        trace = current_trace()
        if trace is not None:
            line["trace_id"] = trace.trace_id
            line["span_id"] = trace.span_id
        line["logger"] = record.name
        line["message"] = record.getMessage()
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        try:
            return orjson.dumps(line, default=str).decode()
        except orjson.JSONEncodeError:
            # a lone surrogate (a file name or header decoded with surrogateescape) is no
            # UTF-8: written as its escape, the record is still one JSON line
            return orjson.dumps(_escaped(line)).decode()


def _escaped(line: dict[str, Any]) -> dict[str, str]:
    """`line`'s values as text, each lone surrogate written as its escape (`\\udcff`)."""
    return {k: str(v).encode("utf-8", "backslashreplace").decode("utf-8") for k, v in line.items()}


class _UvicornName(logging.Filter):
    """Names uvicorn's own lines `uvicorn`: it logs them as `uvicorn.error`, INFO lines
    too, which reads as errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.error":
            record.name = "uvicorn"
        return True


class _TextFormatter(logging.Formatter):
    """The text line, with ` [request <id>]` while a request is served."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        request_id = current_request_id()
        return text if request_id is None else f"{text} [request {request_id}]"


def configure_logging(
    part: str,
    log_format: str,
    level: str,
    node_id: str | None = None,
    stream: TextIO | None = None,
) -> logging.Handler | None:
    """Make the root logger write `log_format` lines (text or json) at `level` to `stream`
    (stderr); returns the handler. Does nothing (None) when the root logger has handlers
    already: the program embedding the part configured logging itself."""
    root = logging.getLogger()
    if root.handlers:
        return None
    handler = logging.StreamHandler(stream or sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter(part, node_id))
    else:
        handler.setFormatter(_TextFormatter(_TEXT))
    handler.addFilter(_UvicornName())
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("py4j").setLevel(logging.WARNING)  # it logs every callback at INFO
    if level.upper() != "DEBUG":
        # a line per HTTP request sent (the node's restore bars poll twice a second)
        for chatty in ("httpx", "httpcore"):
            logging.getLogger(chatty).setLevel(logging.WARNING)
    return handler
