"""Pipeline status per view, published after every micro-batch of the view's query.

A `StatusPoller` thread polls each view query's `lastProgress` (and, when it missed
batches, `recentProgress`) and turns every new progress into a `ViewStatus`: the batch
id, the source offsets the batch ended at (`endOffset`: the next offset per partition of
the input topic), and `late_dropped`, the total of Spark's `numRowsDroppedByWatermark`
since the view's checkpoint began (the total before this run is read back from the status
topic at start; see kinds/windowed_count.py for what Spark counts). Spark records a
batch's progress after its sink (the changelog writer) returned, so a status never runs
ahead of the changelog. Its changelog offsets are those the view's producer got
acknowledged, starting from the changelog's ends when the query started: each status
names what earlier runs wrote too, whose own last status may be lost (a driver killed
after its batch committed) or beyond the tail a gateway reads. A Real-Time Mode query
reports a progress per checkpoint, after its Kafka sink flushed the checkpoint's records;
that sink reports no offsets, so the status names the changelog's ends read then
(`ChangelogEnds`). Polling, not a `StreamingQueryListener`: PySpark converts each
listener event with dozens of py4j calls from the callback thread (measured 0.7 s per
event on 2 busy cores, which stalled the listener bus), while `lastProgress` is one JSON
document.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from pyspark.sql.streaming.listener import StreamingQueryProgress

from runtime.clock import Clock, wall_clock_ms
from runtime.kafka import KafkaSettings
from schema import ViewStatus

__all__ = [
    "ChangelogEnds",
    "Clock",
    "Progressing",
    "Publisher",
    "StatusPoller",
    "ViewTracker",
    "changelog_ends",
    "dropped_by_watermark",
    "executed",
    "new_progress",
    "source_offsets",
]

log = logging.getLogger(__name__)


class Progressing(Protocol):
    """What the poller reads of a query (a `StreamingQuery`)."""

    @property
    def lastProgress(self) -> StreamingQueryProgress | None: ...

    @property
    def recentProgress(self) -> list[StreamingQueryProgress]: ...


class Publisher(Protocol):
    """Where statuses go (`statuslog.StatusPublisher`)."""

    def publish(self, status: ViewStatus) -> None: ...

    def close(self) -> None: ...


def source_offsets(end_offset: str | None, topic: str) -> dict[int, int]:
    """`{partition: next offset}` of `topic` from the Kafka source's `endOffset` JSON,
    `{"<topic>": {"0": 12}}`."""
    if not end_offset:
        return {}
    doc: Any = orjson.loads(end_offset)
    offsets = doc.get(topic, {}) if isinstance(doc, dict) else None
    if not isinstance(offsets, dict):
        raise ValueError(
            f"source offsets {end_offset[:200]!r} are no {{topic: {{partition: offset}}}}"
        )
    return {int(p): int(o) for p, o in offsets.items()}


def dropped_by_watermark(progress: StreamingQueryProgress) -> int:
    """Rows the batch's stateful operators dropped as later than the watermark."""
    return sum(int(op.numRowsDroppedByWatermark or 0) for op in progress.stateOperators)


@dataclass
class ViewTracker:
    """The running status of one view's query; `late_dropped` starts at the total so far,
    `last_batch` is the newest batch published in this run."""

    view: str
    topic: str
    late_dropped: int = 0
    clock: Clock = wall_clock_ms
    last_batch: int | None = None
    # the changelog offsets acknowledged so far (the view's producer, from the changelog's
    # ends at start); read after Spark reported the batch, so they cover its every row
    changelog_offsets: Callable[[], dict[int, int]] = dict

    def status_of(self, progress: StreamingQueryProgress) -> ViewStatus:
        """The status of the batch `progress` reports, the tracker left as it was (`took`
        moves it on once the status is published: one that failed is made again)."""
        changelog_offsets = self.changelog_offsets()  # may fail: the broker does not answer
        offsets: dict[int, int] = {}
        for source in progress.sources:
            offsets.update(source_offsets(source.endOffset, self.topic))
        return ViewStatus(
            view=self.view,
            batch_id=int(progress.batchId),
            updated_ms=self.clock(),
            late_dropped=self.late_dropped + dropped_by_watermark(progress),
            source_offsets=offsets,
            changelog_offsets=changelog_offsets,
        )

    def took(self, status: ViewStatus) -> None:
        """`status` was published: the next batch's follows it."""
        self.late_dropped, self.last_batch = status.late_dropped, status.batch_id

    def on_progress(self, progress: StreamingQueryProgress) -> ViewStatus:
        """The status of the batch `progress` reports, taken."""
        status = self.status_of(progress)
        self.took(status)
        return status


class ChangelogEnds:
    """`{partition: end offset}` of a changelog topic, read when called: the offsets a
    Real-Time Mode query's status names. Read after Spark reported a checkpoint, they cover
    every record written before it (and perhaps some after, which is never wrong: a read
    waiting for them waits for records that exist)."""

    def __init__(self, kafka: str | KafkaSettings, topic: str, timeout_s: float = 10.0) -> None:
        self.kafka = KafkaSettings.of(kafka)
        self.topic = topic
        self.timeout_s = timeout_s
        self._consumer: Consumer | None = None

    def __call__(self) -> dict[int, int]:
        if self._consumer is None:
            self._consumer = Consumer(_ends_config(self.kafka))
        topics = self._consumer.list_topics(self.topic, timeout=self.timeout_s).topics
        partitions = sorted(topics[self.topic].partitions) if self.topic in topics else []
        ends = {}
        for partition in partitions:
            placed = TopicPartition(self.topic, partition)
            _low, ends[partition] = self._consumer.get_watermark_offsets(
                placed, timeout=self.timeout_s
            )
        self._consumer.poll(0)  # hand its log lines over (`runtime.kafka.ClientLog`)
        return ends

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


# what a broker answers while a partition's leader is being elected (a topic just created,
# a broker restarting): asked again until the deadline
_TRANSIENT = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
    }
)
_RETRY_S = 0.1


def changelog_ends(
    kafka: str | KafkaSettings, topic: str, timeout_s: float = 30.0
) -> dict[int, int]:
    """`{partition: end offset}` of `topic` read once (`ChangelogEnds`), asked again while
    the broker answers with a transient error, for up to `timeout_s`."""
    ends = ChangelogEnds(kafka, topic)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                return ends()
            except KafkaException as exc:
                error = exc.args[0]
                transient = error.code() in _TRANSIENT or error.retriable()
                if not transient or time.monotonic() + _RETRY_S > deadline:
                    raise
                log.debug("changelog %s: reading its end offsets again: %s", topic, error)
                time.sleep(_RETRY_S)
    finally:
        ends.close()


def _ends_config(kafka: KafkaSettings) -> dict[str, object]:
    """A consumer that only reads offsets: it never joins a group nor commits."""
    return kafka.client(
        fixed={"group.id": "statefed-pipeline-changelog-ends", "enable.auto.commit": False},
        defaults={"log_level": 3},
    )


def executed(progress: StreamingQueryProgress) -> bool:
    """Whether the progress is of a batch that ran: at a restart Spark also reports the
    batch it is about to run, with no operators and without an `addBatch` phase."""
    return "addBatch" in (progress.durationMs or {})


def new_progress(query: Progressing, after: int | None) -> list[StreamingQueryProgress]:
    """The progress of every batch of `query` that ran after batch `after` (None: all of
    this run), oldest first; `recentProgress` is read only when `lastProgress` is not
    simply the next batch."""
    last = query.lastProgress
    if last is None:
        return []
    if after is not None:
        if last.batchId <= after or (last.batchId == after + 1 and not executed(last)):
            return []  # nothing ran since `after`
        if last.batchId == after + 1:
            return [last]
    ran = [p for p in [*query.recentProgress, last] if executed(p)]
    newest = {p.batchId: p for p in ran if after is None or p.batchId > after}
    return [newest[b] for b in sorted(newest)]


class StatusPoller:
    """Publishes a status for every new batch of the view queries it `watch`es."""

    def __init__(
        self,
        publisher: Publisher,
        interval_s: float = 0.2,
        on_batch: Callable[[StreamingQueryProgress, ViewStatus], None] | None = None,
    ) -> None:
        self.publisher = publisher
        self.interval_s = interval_s
        self.on_batch = on_batch  # told of each batch and its status (pipeline.metrics)
        self._watched: list[tuple[Progressing, ViewTracker]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="statefed-status", daemon=True)

    def watch(self, query: Progressing, tracker: ViewTracker) -> None:
        self._watched.append((query, tracker))

    def start(self) -> None:
        self._thread.start()

    def poll(self) -> None:
        """Publish what every watched query did since the last poll."""
        for query, tracker in list(self._watched):
            for progress in new_progress(query, tracker.last_batch):
                status = tracker.status_of(progress)
                self.publisher.publish(status)  # if either fails, the next poll makes it again
                tracker.took(status)
                if self.on_batch is not None:
                    self.on_batch(progress, status)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.poll()
            except Exception:
                # keep publishing for the other views; the next poll retries this one
                log.exception("pipeline status poll failed")

    def stop(self) -> None:
        """Stop polling; call `poll()` once more after the queries stopped."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
