"""The pipeline status topic: publishing a view's status, and reading the last one back.

Topic `statefed.pipeline` (one partition, key = view name). The last record of a view
is found by reading backwards from the end in growing chunks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from types import TracebackType

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from pipeline.errors import SourceError
from runtime.kafka import KafkaSettings
from schema import PIPELINE_TOPIC, ViewStatus, decode_status, encode_status

__all__ = ["StatusPublisher", "read_last_statuses", "status_producer_config"]

log = logging.getLogger(__name__)

_FIRST_CHUNK = 1_000


def status_producer_config(kafka: str | KafkaSettings, timeout_s: float) -> dict[str, object]:
    """The librdkafka configuration of the status producer."""
    return KafkaSettings.of(kafka).client(
        fixed={
            "acks": "all",
            # one request at a time: a retried record cannot overtake a newer status
            "max.in.flight.requests.per.connection": 1,
        },
        defaults={
            "client.id": "statefed-pipeline-status",
            "linger.ms": 5,
            "message.timeout.ms": int(timeout_s * 1000),
            "log_level": 3,
        },
    )


class StatusPublisher:
    """Produces status records without blocking the caller (a Spark listener thread)."""

    def __init__(self, kafka: str | KafkaSettings, timeout_s: float = 30.0) -> None:
        self.kafka = KafkaSettings.of(kafka)
        self.timeout_s = timeout_s
        self._producer = Producer(status_producer_config(self.kafka, timeout_s))

    def publish(self, status: ViewStatus) -> None:
        try:
            self._producer.produce(
                PIPELINE_TOPIC,
                encode_status(status),
                status.view.encode("utf-8"),
                on_delivery=self._on_delivery,
            )
        except BufferError:
            log.warning("view %s: status of batch %d dropped, queue full", *_ids(status))
        self._producer.poll(0)

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            log.warning("status record of view %r not delivered: %s", message.key(), error)

    def close(self) -> None:
        left = self._producer.flush(self.timeout_s)
        if left:
            log.warning("%d status records undelivered to %s", left, self.kafka.bootstrap)
        self._producer.close()

    def __enter__(self) -> StatusPublisher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _ids(status: ViewStatus) -> tuple[str, int]:
    return status.view, status.batch_id


def read_last_statuses(
    bootstrap: str | KafkaSettings, views: Iterable[str], timeout_s: float = 30.0
) -> dict[str, ViewStatus]:
    """The newest status record of each of `views` that has one (others are left out)."""
    missing = set(views)
    found: dict[str, ViewStatus] = {}
    if not missing:
        return found
    consumer = Consumer(_reader_config(bootstrap))
    try:
        partition = TopicPartition(PIPELINE_TOPIC, 0)
        low, end = consumer.get_watermark_offsets(partition, timeout=timeout_s)
        chunk = _FIRST_CHUNK
        while missing and end > low:
            start = max(low, end - chunk)
            for status in _read_backwards(consumer, start, end, timeout_s):
                if status.view in missing:
                    missing.discard(status.view)
                    found[status.view] = status
            end, chunk = start, chunk * 4
    finally:
        consumer.close()
    return found


def _reader_config(kafka: str | KafkaSettings) -> dict[str, object]:
    """A consumer that only ever uses assign(): it never joins a group nor commits."""
    return KafkaSettings.of(kafka).client(
        fixed={
            "group.id": "statefed-pipeline-status-reader",  # librdkafka needs one; unused
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
        },
        defaults={"log_level": 3},
    )


def _read_backwards(consumer: Consumer, start: int, end: int, timeout_s: float) -> list[ViewStatus]:
    """The decodable statuses at offsets [start, end), newest first."""
    consumer.assign([TopicPartition(PIPELINE_TOPIC, 0, start)])
    statuses: list[ViewStatus] = []
    at, deadline = start, time.monotonic() + timeout_s
    while at < end:
        if time.monotonic() > deadline:
            raise SourceError(f"{PIPELINE_TOPIC}: timed out reading offsets {at} to {end}")
        for message in consumer.consume(min(end - at, 1000), timeout=0.5):
            if message.error() is not None:
                raise SourceError(f"{PIPELINE_TOPIC}: read failed at {at}: {message.error()}")
            at = (message.offset() or 0) + 1
            if at <= end:
                statuses.extend(_decoded(message.value()))
    statuses.reverse()
    return statuses


def _decoded(value: bytes | None) -> list[ViewStatus]:
    try:
        return [decode_status(value or b"")]
    except ValueError:
        log.warning("skipping an undecodable record in %s", PIPELINE_TOPIC)
        return []
