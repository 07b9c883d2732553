"""Following `statefed.pipeline`: the newest status the pipeline published for each view
(late events dropped, processed offsets), read by a background thread.

The embedded broker never compacts, so reading starts `tail_records` before the end of
the topic instead of at its beginning; a view whose last status is older than that (or
that has none yet) shows no status.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from runtime.kafka import KafkaSettings
from schema import PIPELINE_TOPIC, ViewStatus, decode_status

__all__ = ["PipelineStatusReader", "StatusBoard"]

log = logging.getLogger(__name__)

_FETCH_WAIT_MS = 100
_RETRY_S = 1.0


class StatusBoard:
    """The newest status of each view, applied in topic order; safe to read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, ViewStatus] = {}

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
        """Make `status` the view's newest; changelog offsets only grow (a restarted
        pipeline reports only the partitions it wrote to since)."""
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


class PipelineStatusReader:
    """Reads the status topic in a thread into a `StatusBoard`.

    Nothing is opened before `start`; `stop` closes the consumer and joins the thread.
    """

    def __init__(
        self,
        kafka: str | KafkaSettings,
        board: StatusBoard,
        *,
        tail_records: int,
        topic: str = PIPELINE_TOPIC,
        poll_s: float = 0.1,
    ) -> None:
        self._kafka = KafkaSettings.of(kafka)
        self._board = board
        self._tail = tail_records
        self._topic = topic
        self._poll_s = poll_s
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
                log.warning(
                    "reading %s failed (%s: %s); retrying in %s s",
                    self._topic,
                    exc,
                    self._kafka.hint(exc),
                    _RETRY_S,
                )
                self._stopping.wait(_RETRY_S)
            finally:
                consumer.close()

    def _follow(self, consumer: Consumer) -> None:
        partition = TopicPartition(self._topic, 0)
        low, high = consumer.get_watermark_offsets(partition, timeout=10)
        # the broker's end offset may be too low (tansu bug): then a few more are read
        partition.offset = max(low, high - self._tail)
        consumer.assign([partition])
        while not self._stopping.is_set():
            self._apply(consumer.consume(500, self._poll_s))

    def _apply(self, messages: list[Message]) -> None:
        for message in messages:
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise KafkaException(error)
                log.warning("status topic %s: %s", self._topic, error)
                continue
            self._board.apply(message.value())
