"""Delivering one micro-batch's records to Kafka: every record acknowledged, or the batch fails.

A failed micro-batch is replayed by Spark from its checkpoint; the records it writes are
absolute values, so the records that did get through the first time are harmless.
"""

from __future__ import annotations

import threading
from types import TracebackType

from confluent_kafka import KafkaError, Message, Producer

from pipeline.errors import DeliveryError
from runtime.kafka import KafkaSettings
from runtime.produce import producer_config

__all__ = ["BatchProducer", "batch_producer_config"]


def batch_producer_config(
    kafka: str | KafkaSettings, client_id: str, timeout_s: float
) -> dict[str, object]:
    """The librdkafka configuration of a query's changelog producer: murmur2 partitioning
    like every statefed producer, every record acknowledged by all replicas."""
    return producer_config(
        kafka,
        {"acks": "all", "message.timeout.ms": int(timeout_s * 1000), "log_level": 3},
    ) | {"client.id": client_id}


class BatchProducer:
    """A producer used batch by batch: `send` records, then `flush_or_raise` per batch."""

    def __init__(self, kafka: str | KafkaSettings, client_id: str, timeout_s: float = 30.0) -> None:
        self.kafka = KafkaSettings.of(kafka)
        self.timeout_s = timeout_s
        self._producer = Producer(batch_producer_config(self.kafka, client_id, timeout_s))
        self._failures: list[str] = []  # the first few, for the message
        # next offset per (topic, partition) after the newest acknowledged record; written
        # by delivery reports, read by the status poller's thread
        self._delivered: dict[tuple[str, int], int] = {}
        self._delivered_lock = threading.Lock()
        self._failed = 0
        self._sent = 0

    def send(self, topic: str, key: bytes | None, value: bytes | None, partition: int = -1) -> None:
        """Queue one record; `partition` -1 lets the producer's partitioner choose."""
        while True:
            try:
                self._producer.produce(
                    topic, value, key, partition=partition, on_delivery=self._on_delivery
                )
                break
            except BufferError:
                # the local queue is full: serve delivery reports until there is room
                self._producer.poll(0.1)
        self._sent += 1

    def delivered(self, topic: str) -> dict[int, int]:
        """`{partition: next offset}` of `topic` after the newest record this producer got
        acknowledged (partitions it never wrote to are absent)."""
        with self._delivered_lock:
            return {p: o for (t, p), o in self._delivered.items() if t == topic}

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            placed = (message.topic() or "", message.partition() or 0)
            offset = (message.offset() or 0) + 1
            with self._delivered_lock:
                if offset > self._delivered.get(placed, 0):
                    self._delivered[placed] = offset
            return
        self._failed += 1
        if len(self._failures) < 5:
            where = f"topic {message.topic()} partition {message.partition()}"
            self._failures.append(f"{where} key {message.key()!r}: {error}")

    def flush_or_raise(self, what: str) -> int:
        """Wait until every queued record is acknowledged; raise `DeliveryError` naming
        `what` (e.g. the view and batch) if any was not. Returns the records sent."""
        left = self._producer.flush(self.timeout_s)
        failed, failures, sent = self._failed, self._failures, self._sent
        if left:
            # drop what is still queued so it cannot land after the replayed batch
            self._producer.purge()
            self._producer.poll(0)
        self._failures, self._failed, self._sent = [], 0, 0
        if left or failed:
            raise DeliveryError(
                f"{what}: {failed} of {sent} records failed and {left} were unacknowledged "
                f"after {self.timeout_s} s on {self.kafka.bootstrap}: {'; '.join(failures)}"
            )
        return sent

    def close(self) -> None:
        self._producer.flush(self.timeout_s)
        self._producer.close()

    def __enter__(self) -> BatchProducer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
