"""Following `statefed.pipeline`: the newest status the pipeline published for each view
(late events dropped, processed offsets), and `statefed.deadletter`: how many input
records were rejected and the newest of them, read by a background thread.

Reading starts `tail_records` before the end of the topic, not at its beginning: even
compacted (as `statefed topics` creates it), the topic's active segment is never
compacted (up to a week of statuses by default), and a start at the beginning would
read through it. A view whose last status is older than the tail (or that has none yet)
shows no status. A dead-letter topic that cannot be read (missing, or a broker hiccup)
does not hold statuses up: it is tried again every `_RETRY_S` while statuses are read.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from runtime.kafka import KafkaSettings
from runtime.retrylog import RetryLog
from runtime.watermarks import watermarks
from schema import DEADLETTER_TOPIC, PIPELINE_TOPIC, ViewStatus, decode_status

__all__ = ["DeadLetterSummary", "PipelineStatusReader", "StatusBoard"]

log = logging.getLogger(__name__)

_FETCH_WAIT_MS = 100
_RETRY_S = 1.0
_RECENT_DEAD_LETTERS = 10


@dataclass(frozen=True)
class DeadLetterSummary:
    """What the dead-letter topic holds: `total` records ever written to it (the newest
    offset read + 1), and the newest few (reason, source topic, partition, offset)."""

    total: int = 0
    recent: tuple[dict[str, Any], ...] = ()


class StatusBoard:
    """The newest status of each view, applied in topic order; safe to read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, ViewStatus] = {}
        self._dead_total = 0
        self._dead_recent: deque[dict[str, Any]] = deque(maxlen=_RECENT_DEAD_LETTERS)

    def apply(self, value: bytes | None) -> bool:
        """Apply one record of the status topic; False when it is no status."""
        if value is None:
            return False
        try:
            status = decode_status(value)
        except ValueError as exc:
            log.warning("pipeline status ignored: %s", exc)
            return False
        self.put(status)
        return True

    def put(self, status: ViewStatus) -> None:
        """Make `status` the view's newest; changelog offsets only grow (a pipeline of
        before 7 December 2026, once restarted, reported only the partitions it wrote to
        since; later ones report every partition written before too)."""
        with self._lock:
            before = self._latest.get(status.view)
            if before is not None:
                merged = dict(before.changelog_offsets)
                for partition, offset in status.changelog_offsets.items():
                    merged[partition] = max(offset, merged.get(partition, 0))
                status = dataclasses.replace(status, changelog_offsets=merged)
            self._latest[status.view] = status

    def get(self, view: str) -> ViewStatus | None:
        with self._lock:
            return self._latest.get(view)

    def dead_letter(self, offset: int, value: bytes | None) -> None:
        """Count the dead-letter record at `offset` and keep where it came from and why (its
        key and value stay in the topic: they may hold anything)."""
        try:
            doc = orjson.loads(value or b"")
            letter = {k: doc[k] for k in ("reason", "topic", "partition", "offset")}
            letter["timestamp_ms"] = doc.get("timestamp_ms")
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            log.warning("dead letter at offset %d not shown: %s", offset, exc)
            letter = {"reason": "undecodable dead-letter record", "offset": None}
        with self._lock:
            self._dead_total = max(self._dead_total, offset + 1)
            self._dead_recent.append(letter)

    def dead_letters(self) -> DeadLetterSummary:
        with self._lock:
            return DeadLetterSummary(self._dead_total, tuple(reversed(self._dead_recent)))


class PipelineStatusReader:
    """Reads the status topic and the dead-letter topic (None: not that one) in a thread
    into a `StatusBoard`.

    Nothing is opened before `start`; `stop` closes the consumer and joins the thread.
    """

    def __init__(
        self,
        kafka: str | KafkaSettings,
        board: StatusBoard,
        *,
        tail_records: int,
        topic: str = PIPELINE_TOPIC,
        deadletter_topic: str | None = DEADLETTER_TOPIC,
        poll_s: float = 0.1,
    ) -> None:
        self._kafka = KafkaSettings.of(kafka)
        self._board = board
        self._tail = tail_records
        self._topic = topic
        self._deadletter_topic = deadletter_topic
        self._poll_s = poll_s
        self._retries = RetryLog(log, topic)
        self._dead_retries = RetryLog(log, deadletter_topic or DEADLETTER_TOPIC)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def consumer_config(self) -> dict[str, object]:
        """The librdkafka configuration of the consumer reading the status topic."""
        return self._kafka.client(
            fixed={
                # assign() only: the group id is never joined, but librdkafka wants one
                "group.id": f"statefed-gateway-status-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
            },
            defaults={"log.connection.close": False, "fetch.wait.max.ms": _FETCH_WAIT_MS},
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="statefed-status", daemon=True)
        self._thread.start()

    def is_alive(self) -> bool:
        """Whether the reading thread runs (started and not yet stopped)."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.error("pipeline status reader did not stop within %s s", timeout_s)

    def _run(self) -> None:
        while not self._stopping.is_set():
            consumer = Consumer(self.consumer_config())
            try:
                self._follow(consumer)
            except Exception as exc:  # broker down or topic missing: log, wait, start over
                if self._stopping.is_set():
                    break  # told to stop while the broker did not answer: nothing to say
                self._retries.failed(exc, self._kafka.hint(exc), _RETRY_S)
                self._stopping.wait(_RETRY_S)
            finally:
                consumer.close()

    def _follow(self, consumer: Consumer) -> None:
        consumer.assign([self._tail_of(consumer, self._topic)])
        self._retries.read()
        # when to add the dead-letter topic to what is read; None: added, or none to add
        dead_letters_due = None if self._deadletter_topic is None else 0.0
        while not self._stopping.is_set():
            if dead_letters_due is not None and time.monotonic() >= dead_letters_due:
                dead_letters_due = self._read_dead_letters(consumer)
            self._apply(consumer.consume(500, self._poll_s))

    def _read_dead_letters(self, consumer: Consumer) -> float | None:
        """Add the dead-letter topic's tail to what `consumer` reads: None when done, else
        when to try again (statuses are read meanwhile)."""
        assert self._deadletter_topic is not None
        try:
            partition = self._tail_of(consumer, self._deadletter_topic)
        except KafkaException as exc:
            self._dead_retries.failed(exc, self._kafka.hint(exc), _RETRY_S)
            return time.monotonic() + _RETRY_S
        consumer.incremental_assign([partition])
        self._dead_retries.read()
        return None

    def _tail_of(self, consumer: Consumer, topic: str) -> TopicPartition:
        partition = TopicPartition(topic, 0)
        low, high = watermarks(consumer, partition, self._stopping)
        partition.offset = max(low, high - self._tail)
        return partition

    def _apply(self, messages: list[Message]) -> None:
        for message in messages:
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise KafkaException(error)
                log.warning("status topic %s: %s", self._topic, error)
                continue
            if message.topic() == self._deadletter_topic:
                self._board.dead_letter(message.offset() or 0, message.value())
            else:
                self._board.apply(message.value())
