"""Starting a streaming query, one at a time, until its sources are initialized.

`writer.start()` returns before Spark has created the query's source, so an error there
(a Kafka setting the connector refuses, a checkpoint it cannot read) would surface only
later as a stopped query. Queries start one after another, each awaited past its
"Initializing ..." states (which also keeps several JVM-side starts from competing for
2 busy cores), and a query that dies while initializing is started again (its checkpoint
holds no batch of that attempt) before the error is raised, naming the query.
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
