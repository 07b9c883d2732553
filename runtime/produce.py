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

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from runtime.kafka import KafkaSettings

__all__ = [
    "ProduceError",
    "Record",
    "Write",
    "max_bytes",
    "new_producer",
    "produce_keys",
    "produce_records",
    "producer_config",
]


class ProduceError(RuntimeError):
    """Records were not delivered; names the topic, the keys and how many were."""


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


_MESSAGE_MAX_BYTES = 1_000_000  # librdkafka's default message.max.bytes


def max_bytes(kafka: str | KafkaSettings, settings: Mapping[str, Any] | None = None) -> int:
    """The largest record (key and value) a producer of this configuration sends."""
    configured = producer_config(kafka, settings).get("message.max.bytes", _MESSAGE_MAX_BYTES)
    return int(configured)


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
    """Produce `records` in order and wait until every one is delivered. ProduceError when
    any is not: it names the keys not delivered, in the order given, and how many were, so
    that only those are produced again."""
    client = producer if producer is not None else new_producer(bootstrap)
    writes: list[Write] = []
    pending: dict[int, str] = {}  # index in `records` -> key, until its delivery report
    failed: dict[int, tuple[str, str]] = {}  # index -> key, why

    def delivered(index: int, err: KafkaError | None, msg: Message) -> None:
        key = pending.pop(index, "")
        if err is not None:
            failed[index] = (key, err.str())
        else:
            writes.append(Write(topic, key, int(msg.partition() or 0), int(msg.offset() or 0)))

    refused: tuple[str, str] | None = None  # the key the client would not take, and why
    for index, record in enumerate(records):
        pending[index] = record.key
        try:
            _produce(client, topic, record, functools.partial(delivered, index))
        except (KafkaException, UnicodeError) as exc:  # too large, no such partition, ...
            pending.pop(index)
            error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
            refused = (record.key, error.str() if isinstance(error, KafkaError) else str(error))
            break
    client.flush(30)  # those queued before a refusal are delivered (or reported) too
    if pending or failed or refused is not None:
        kafka = KafkaSettings.of(bootstrap)
        raise ProduceError(_undelivered(topic, kafka, len(writes), pending, failed, refused))
    return writes


_SHOWN_KEYS = 20  # keys a failure lists by name


def _undelivered(
    topic: str,
    kafka: KafkaSettings,
    delivered: int,
    pending: Mapping[int, str],
    failed: Mapping[int, tuple[str, str]],
    refused: tuple[str, str] | None,
) -> str:
    """What a failed produce says: what was delivered, what was not and why, what to do."""
    missing = sorted(
        [
            *((i, f"{key!r} ({why})") for i, (key, why) in failed.items()),
            *((i, f"{key!r} (no answer in 30 s)") for i, key in pending.items()),
        ]
    )
    shown = [text for _, text in missing[:_SHOWN_KEYS]]
    if len(missing) > _SHOWN_KEYS:
        shown.append(f"and {len(missing) - _SHOWN_KEYS} more")
    parts = [f"producing to {topic} on {kafka.bootstrap}: {delivered} records delivered"]
    if missing:
        parts.append(f"{len(missing)} not delivered: {', '.join(shown)}")
    if refused is not None:
        key, why = refused
        parts.append(f"key {key!r} refused before sending ({why}): it and what follows unsent")
    advice = (
        "Produce again only those: the others are in the topic, and count views would count "
        "them twice"
    )
    if missing:  # the broker refused them, or did not answer: where it is, how to reach it
        first_failure = next(iter(failed.values()), ("", None))[1]
        advice += f"; {kafka.hint(first_failure)}"
    return f"{'; '.join(parts)}. {advice}"


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
