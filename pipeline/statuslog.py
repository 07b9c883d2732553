"""The pipeline status topic: publishing a view's status, and reading the last one back.

Topic `statefed.pipeline` (one partition, key = view name, never compacted by the
embedded broker). The last record of a view is found by reading backwards from the end
in growing chunks; the end is a fetched high watermark, because ListOffsets LATEST
cannot be trusted on the embedded broker.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from types import TracebackType

from confluent_kafka import KafkaError, Message, Producer

from pipeline.offsets import OffsetRange
from pipeline.reading import read_ranges
from pipeline.watermarks import WatermarkProbe
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
    probe = WatermarkProbe(bootstrap, PIPELINE_TOPIC, timeout_s)
    try:
        low, end = probe.earliest()[0], probe.latest({})[0]
    finally:
        probe.close()
    chunk = _FIRST_CHUNK
    while missing and end > low:
        start = max(low, end - chunk)
        for status in _read_backwards(bootstrap, start, end, timeout_s):
            if status.view in missing:
                missing.discard(status.view)
                found[status.view] = status
        end, chunk = start, chunk * 4
    return found


def _read_backwards(
    bootstrap: str | KafkaSettings, start: int, end: int, timeout_s: float
) -> list[ViewStatus]:
    """The decodable statuses at offsets [start, end), newest first."""
    statuses = []
    for batch in read_ranges(bootstrap, PIPELINE_TOPIC, [OffsetRange(0, start, end)], timeout_s):
        for value in batch.column("value").to_pylist():
            try:
                statuses.append(decode_status(value))
            except ValueError:
                log.warning("skipping an undecodable record in %s", PIPELINE_TOPIC)
    statuses.reverse()
    return statuses
