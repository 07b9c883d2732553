"""Producing keyed events the way every statefed producer must: murmur2 partitioning,
idempotent.

librdkafka's default partitioner is not Kafka's Java default; `murmur2_random` is, so a
key lands on `schema.partition_for(key, P)` whichever client produced it. librdkafka
retries a failed request with up to a million requests in flight, so without idempotence
a retried batch may land after a newer one (an older value of a key wins in a changelog)
or twice (a write lost its acknowledgement, not its record). An idempotent producer keeps
each partition's order through retries and writes every record once. It needs
`acks=all`: librdkafka's default then; another `acks` makes creating the producer fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from runtime.kafka import KafkaSettings

__all__ = [
    "ProduceError",
    "Record",
    "Write",
    "new_producer",
    "produce_keys",
    "produce_records",
    "producer_config",
]


class ProduceError(RuntimeError):
    """A record could not be delivered; names the topic and key."""


@dataclass(frozen=True)
class Write:
    """Where one record landed: its consistency coordinates."""

    topic: str
    key: str
    partition: int
    offset: int

    @property
    def token(self) -> str:
        """The consistency token of the write: pass it as `atLeast` to read it back."""
        return f"{self.topic}:{self.partition}:{self.offset}"


def producer_config(
    kafka: str | KafkaSettings, settings: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A producer's librdkafka configuration: the user's Kafka settings over statefed's
    defaults, `settings` over both, and never another partitioner nor a producer that is
    not idempotent."""
    return KafkaSettings.of(kafka).client(
        fixed={
            **(settings or {}),
            "partitioner": "murmur2_random",  # Kafka's Java default, not librdkafka's
            "enable.idempotence": True,  # order and no duplicates through retries
        },
        defaults={"linger.ms": 5},
    )


def new_producer(kafka: str | KafkaSettings, settings: Mapping[str, Any] | None = None) -> Producer:
    """A producer partitioning as statefed expects; `settings` add librdkafka settings or
    replace the defaults (never the partitioner nor idempotence)."""
    return Producer(producer_config(kafka, settings))


@dataclass(frozen=True)
class Record:
    """One record to produce: key, value (None: a tombstone, which deletes the key in the
    views that delete) and (optionally) the Kafka timestamp in ms."""

    key: str
    value: bytes | None = b""
    timestamp_ms: int | None = None


def produce_keys(
    bootstrap: str | KafkaSettings,
    topic: str,
    keys: Iterable[str],
    value: bytes = b"",
    producer: Producer | None = None,
) -> list[Write]:
    """Produce one record per key (all with `value`) and wait until each is delivered."""
    return produce_records(bootstrap, topic, (Record(k, value) for k in keys), producer)


def produce_records(
    bootstrap: str | KafkaSettings,
    topic: str,
    records: Iterable[Record],
    producer: Producer | None = None,
) -> list[Write]:
    """Produce `records` in order and wait until every one is delivered."""
    client = producer if producer is not None else new_producer(bootstrap)
    writes: list[Write] = []
    failures: list[str] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        key = (msg.key() or b"").decode("utf-8", "replace")
        if err is not None:
            failures.append(f"{key!r}: {err}")
        else:
            writes.append(Write(topic, key, int(msg.partition() or 0), int(msg.offset() or 0)))

    for record in records:
        _produce(client, topic, record, delivered)
    remaining = client.flush(30)
    if remaining or failures:
        kafka = KafkaSettings.of(bootstrap)
        raise ProduceError(
            f"producing to {topic} on {kafka.bootstrap}: {len(writes)} records delivered, "
            f"{remaining} undelivered after 30 s, {len(failures)} failed (first: "
            f"{failures[:3]}): {kafka.hint()}"
        )
    return writes


def _produce(
    client: Producer,
    topic: str,
    record: Record,
    cb: Callable[[KafkaError | None, Message], None],
) -> None:
    while True:
        try:
            client.produce(
                topic,
                key=record.key.encode("utf-8"),
                value=record.value,
                on_delivery=cb,
                timestamp=record.timestamp_ms or 0,  # 0 = the producer's clock
            )
            return
        except BufferError:
            client.poll(0.1)  # local queue full: serve delivery reports, then retry
