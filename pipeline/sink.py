"""Delivering one micro-batch's records to Kafka: every record acknowledged, or the batch fails.

A failed micro-batch is replayed by Spark from its checkpoint; the records it writes are
absolute values, so the records that did get through the first time are harmless.

A record larger than the producer's `message.max.bytes` (or the topic's
`max.message.bytes`) fails its batch on every replay: its error names the topic, the
key, the size and both settings, never dropping the record.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import TracebackType

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from pipeline.errors import DeliveryError, RecordTooLargeError
from runtime.kafka import KafkaSettings
from runtime.produce import producer_config

__all__ = ["BatchProducer", "batch_producer_config", "too_large"]

_DEFAULT_MAX_BYTES = 1_000_000  # librdkafka's message.max.bytes
_SHOWN_KEY_BYTES = 100


def batch_producer_config(
    kafka: str | KafkaSettings, client_id: str, timeout_s: float
) -> dict[str, object]:
    """The librdkafka configuration of a query's changelog producer: murmur2 partitioning
    like every statefed producer, every record acknowledged by all replicas."""
    return producer_config(
        kafka,
        {"acks": "all", "message.timeout.ms": int(timeout_s * 1000), "log_level": 3},
    ) | {"client.id": client_id}


def too_large(topic: str, key: bytes | None, size: int, limit: int) -> str:
    """What to do about a record of `size` bytes that the producer (whose
    `message.max.bytes` is `limit`) or the topic refused."""
    shown = None if key is None else key[:_SHOWN_KEY_BYTES]
    return (
        f"a record of {size} bytes to topic {topic} (key {shown!r}) is over what Kafka "
        f"takes (the producer's message.max.bytes is {limit}): raise the topic's "
        f"max.message.bytes and the pipeline's STATEFED_KAFKA_MESSAGE_MAX_BYTES above "
        f"{size}, or make the record smaller"
    )


class BatchProducer:
    """A producer used batch by batch: `send` records, then `flush_or_raise` per batch."""

    def __init__(self, kafka: str | KafkaSettings, client_id: str, timeout_s: float = 30.0) -> None:
        self.kafka = KafkaSettings.of(kafka)
        self.timeout_s = timeout_s
        config = batch_producer_config(self.kafka, client_id, timeout_s)
        self.max_message_bytes = int(str(config.get("message.max.bytes", _DEFAULT_MAX_BYTES)))
        self._producer = Producer(config)
        self._failures: list[str] = []  # the first few, for the message
        # next offset per (topic, partition) after the newest acknowledged record; written
        # by delivery reports, read by the status poller's thread
        self._delivered: dict[tuple[str, int], int] = {}
        self._delivered_lock = threading.Lock()
        self._failed = 0
        self._too_large = 0  # of them refused by the broker as over the topic's limit
        self._sent = 0

    def send(self, topic: str, key: bytes | None, value: bytes | None, partition: int = -1) -> None:
        """Queue one record; `partition` -1 lets the producer's partitioner choose.
        `RecordTooLargeError` when it is larger than the producer may send."""
        while True:
            try:
                self._producer.produce(
                    topic, value, key, partition=partition, on_delivery=self._on_delivery
                )
                break
            except BufferError:
                # the local queue is full: serve delivery reports until there is room
                self._producer.poll(0.1)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.MSG_SIZE_TOO_LARGE:
                    raise
                self._discard()  # the batch fails here: none of it may land after its replay
                size = len(key or b"") + len(value or b"")
                raise RecordTooLargeError(
                    too_large(topic, key, size, self.max_message_bytes)
                ) from exc
        self._sent += 1

    def delivered(self, topic: str) -> dict[int, int]:
        """`{partition: next offset}` of `topic` after the newest record this producer got
        acknowledged, or its `delivered_from` if later (partitions with neither are absent)."""
        with self._delivered_lock:
            return {p: o for (t, p), o in self._delivered.items() if t == topic}

    def delivered_from(self, topic: str, ends: Mapping[int, int]) -> None:
        """Count `topic`'s records before `ends` (`{partition: end offset}`, read before
        this producer wrote there) as delivered: an earlier run's, which its own statuses
        may never have named (a driver killed before publishing its last one)."""
        for partition, offset in ends.items():
            self._advance((topic, partition), offset)

    def _advance(self, placed: tuple[str, int], offset: int) -> None:
        with self._delivered_lock:
            if offset > self._delivered.get(placed, 0):
                self._delivered[placed] = offset

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            placed = (message.topic() or "", message.partition() or 0)
            self._advance(placed, (message.offset() or 0) + 1)
            return
        self._failed += 1
        refused_as_large = error.code() == KafkaError.MSG_SIZE_TOO_LARGE  # the topic's limit
        self._too_large += int(refused_as_large)
        if len(self._failures) < 5:
            key, topic = message.key(), message.topic() or ""
            if refused_as_large:
                size = len(key or b"") + len(message.value() or b"")
                self._failures.append(
                    f"{error}: {too_large(topic, key, size, self.max_message_bytes)}"
                )
                return
            where = f"topic {topic} partition {message.partition()}"
            shown = None if key is None else key[:_SHOWN_KEY_BYTES]
            self._failures.append(f"{where} key {shown!r}: {error}")

    def flush_or_raise(self, what: str) -> int:
        """Wait until every queued record is acknowledged; raise `DeliveryError` naming
        `what` (e.g. the view and batch) if any was not, `RecordTooLargeError` when the
        broker refused one as over the topic's limit (no replay delivers it). Returns the
        records sent."""
        left = self._producer.flush(self.timeout_s)
        failed, failures, sent = self._failed, self._failures, self._sent
        too_large = self._too_large
        self._discard(queued=left > 0)  # what is queued must not land after the replay
        if too_large:  # the broker refused it: no replay makes it smaller
            raise RecordTooLargeError(f"{what}: {'; '.join(failures)}")
        if left or failed:
            raise DeliveryError(
                f"{what}: {failed} of {sent} records failed and {left} were unacknowledged "
                f"after {self.timeout_s} s on {self.kafka.bootstrap}: {'; '.join(failures)}"
            )
        return sent

    def _discard(self, queued: bool = True) -> None:
        """Drop the records still queued (when some may be) and forget the batch's counts."""
        if queued:
            self._producer.purge()
            self._producer.poll(0)  # their delivery reports, before the counts are reset
        self._failures, self._failed, self._too_large, self._sent = [], 0, 0, 0

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
