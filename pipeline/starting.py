"""Starting a streaming query, one at a time, until its sources are initialized.

Each query over the Python data source starts a Python process on the driver that must
connect back to the JVM within Spark's fixed 10 s; several queries starting at once on a
busy 2-core machine miss that window ("Python worker failed to connect back"). So queries
start one after another, each awaited past its "Initializing ..." states, and a query that dies
while initializing is started again (its checkpoint holds no batch of that attempt).
"""

from __future__ import annotations

import logging
import time

from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from pipeline.errors import QueryFailedError

__all__ = ["INITIALIZING", "start_initialized"]

log = logging.getLogger(__name__)

INITIALIZING = "Initializing"  # "Initializing StreamExecution", then "... sources"
_NOT_RUNNING = (INITIALIZING, "Terminated", "Stopped")
_POLL_S = 0.05


def start_initialized(
    writer: DataStreamWriter, name: str, attempts: int = 3, timeout_s: float = 60.0
) -> StreamingQuery:
    """`writer.start()`, returned once the query is past source initialization; raise
    `QueryFailedError` naming `name` if every attempt died while initializing."""
    failure = ""
    for attempt in range(1, attempts + 1):
        query = writer.start()
        failure = _await_initialized(query, timeout_s)
        if not failure:
            return query
        log.warning("query %s died while starting (attempt %d of %d)", name, attempt, attempts)
    raise QueryFailedError(f"streaming query {name} failed to start {attempts} times: {failure}")


def _await_initialized(query: StreamingQuery, timeout_s: float) -> str:
    """Wait until `query` runs its trigger loop; the error if it died first, else ""."""
    deadline = time.monotonic() + timeout_s
    message = ""
    while time.monotonic() < deadline:
        message = str(query.status["message"])
        if not query.isActive:
            return str(query.exception() or message)
        # a dying query reports "Terminated with exception: ..." while still active
        if not message.startswith(_NOT_RUNNING):
            return ""
        time.sleep(_POLL_S)  # Spark has no "initialized" callback; the deadline bounds this
    log.warning("query %s still %r after %.0f s", query.name, message, timeout_s)
    return ""
