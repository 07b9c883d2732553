"""Pipeline status per view, published after every micro-batch of the view's query.

A `StatusListener` (a Spark `StreamingQueryListener`, so every batch is seen exactly once,
unlike polling `lastProgress`) turns each progress event of a view query into a
`ViewStatus`: the batch id, the source offsets the batch ended at (`endOffset`: the next
offset per partition of the input topic), and `late_dropped`, the total of Spark's
`numRowsDroppedByWatermark` since the view's checkpoint began (the total before this
run is read back from the status topic at start). Spark delivers progress events after
the batch's sink (the changelog writer) has returned, so a status never runs ahead of
the changelog.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryProgress,
)

from node.pipeline.statuslog import StatusPublisher
from schema import ViewStatus

__all__ = [
    "Clock",
    "StatusListener",
    "ViewTracker",
    "dropped_by_watermark",
    "source_offsets",
    "wall_clock_ms",
]

log = logging.getLogger(__name__)

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    """Now, in ms since the epoch."""
    return time.time_ns() // 1_000_000


def source_offsets(end_offset: str | None, topic: str) -> dict[int, int]:
    """`{partition: next offset}` from a source's `endOffset` JSON: the statefed_kafka form
    `{"0": 12}` or the Kafka connector's `{"<topic>": {"0": 12}}`."""
    if not end_offset:
        return {}
    doc: Any = orjson.loads(end_offset)
    if isinstance(doc, dict) and isinstance(doc.get(topic), dict):
        doc = doc[topic]
    if not isinstance(doc, dict):
        raise ValueError(f"source offsets {end_offset[:200]!r} are no JSON object")
    return {int(p): int(o) for p, o in doc.items()}


def dropped_by_watermark(progress: StreamingQueryProgress) -> int:
    """Rows the batch's stateful operators dropped as later than the watermark."""
    return sum(int(op.numRowsDroppedByWatermark or 0) for op in progress.stateOperators)


@dataclass
class ViewTracker:
    """The running status of one view's query; `late_dropped` starts at the total so far."""

    view: str
    topic: str
    late_dropped: int = 0
    clock: Clock = wall_clock_ms
    terminated: threading.Event = field(default_factory=threading.Event)

    def on_progress(self, progress: StreamingQueryProgress) -> ViewStatus:
        self.late_dropped += dropped_by_watermark(progress)
        offsets: dict[int, int] = {}
        for source in progress.sources:
            offsets.update(source_offsets(source.endOffset, self.topic))
        return ViewStatus(
            view=self.view,
            batch_id=int(progress.batchId),
            updated_ms=self.clock(),
            late_dropped=self.late_dropped,
            source_offsets=offsets,
        )


class StatusListener(StreamingQueryListener):
    """Publishes the status of the view queries it was told to `expect`, ignoring others.

    A query is bound by its run id in `onQueryStarted`, which Spark calls synchronously in
    `start()`; so a late event of an earlier run of the same query name is never counted.
    """

    def __init__(self, publisher: StatusPublisher) -> None:
        self.publisher = publisher
        self._lock = threading.Lock()
        self._expected: dict[str, ViewTracker] = {}  # by query name, until started
        self._runs: dict[str, ViewTracker] = {}  # by run id

    def expect(self, query_name: str, tracker: ViewTracker) -> None:
        with self._lock:
            self._expected[query_name] = tracker

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        with self._lock:
            tracker = self._expected.pop(event.name or "", None)
            if tracker is not None:
                self._runs[str(event.runId)] = tracker

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        progress = event.progress
        with self._lock:
            tracker = self._runs.get(str(progress.runId))
            if tracker is None:
                return
            try:
                status = tracker.on_progress(progress)
            except (ValueError, TypeError, AttributeError):
                # a listener must not raise into Spark's listener bus; the next batch retries
                log.exception("view %s: no status for batch %s", tracker.view, progress.batchId)
                return
            self.publisher.publish(status)

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        """Nothing to publish: no batch ran."""

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        with self._lock:
            tracker = self._runs.pop(str(event.runId), None)
        if tracker is not None:
            tracker.terminated.set()

    def wait_terminated(self, trackers: Mapping[str, ViewTracker], timeout_s: float) -> None:
        """Wait until Spark delivered the last events of the stopped `trackers` (by view)."""
        deadline = time.monotonic() + timeout_s
        for tracker in trackers.values():
            if not tracker.terminated.wait(max(0.0, deadline - time.monotonic())):
                log.warning("view %s: no termination event within %.0f s", tracker.view, timeout_s)
