"""Test support: the pipeline config of a test, producing input events, reading the
changelog, dead-letter and pipeline status topics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from pipeline import PipelineConfig
from pipeline.deadletter import DeadLetter, decode_dead_letter
from runtime.topics import partition_count
from schema import (
    DEADLETTER_TOPIC,
    PIPELINE_TOPIC,
    CountRow,
    ViewStatus,
    decode_count,
    decode_status,
    partition_for,
)
from tooling.broker import KafkaBroker
from tooling.processes import wait_until

PARTITIONS = 6


def pipeline_config(broker: KafkaBroker, checkpoint_dir: Path) -> PipelineConfig:
    """Fast triggers and short timeouts, so a failing test fails in seconds."""
    return PipelineConfig(
        bootstrap=broker.bootstrap,
        checkpoint_dir=checkpoint_dir,
        trigger_ms=200,
        deadletter_trigger_ms=200,
        read_timeout_ms=20_000,
        delivery_timeout_ms=20_000,
    )


def produce(bootstrap: str, topic: str, keys: Iterable[bytes | None], value: bytes = b"1") -> None:
    """Produce one record per key as statefed producers do (murmur2) and wait for acks."""
    failures: list[str] = []

    def report(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for key in keys:
        producer.produce(topic, value, key, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0, "records left unacknowledged"
    assert not failures, failures


@dataclass(frozen=True)
class Record:
    """One input record to produce: `timestamp_ms` None lets the producer stamp it."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None


def produce_records(bootstrap: str, topic: str, records: Iterable[Record]) -> list[tuple[int, int]]:
    """Produce `records` (murmur2 partitioning) and return each one's (partition, offset)."""
    placed: dict[int, tuple[int, int]] = {}
    failures: list[str] = []

    def report(index: int) -> Callable[[KafkaError | None, Message], None]:
        def on_delivery(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                failures.append(str(error))
            else:
                placed[index] = (message.partition() or 0, message.offset() or 0)

        return on_delivery

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    count = 0
    for count, record in enumerate(records, start=1):
        producer.produce(
            topic,
            record.value,
            record.key,
            on_delivery=report(count - 1),
            timestamp=record.timestamp_ms or 0,  # 0: stamped by the producer
        )
        producer.poll(0)
    assert producer.flush(30) == 0, "records left unacknowledged"
    assert not failures, failures
    return [placed[i] for i in range(count)]


def end_offsets(placements: Iterable[tuple[int, int]]) -> dict[int, int]:
    """The next offset per partition after the records placed at `placements`."""
    ends: dict[int, int] = {}
    for partition, offset in placements:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


def end_offsets_of(bootstrap: str, topic: str) -> dict[int, int]:
    """The next offset of every partition of `topic`, from the broker (ListOffsets)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test-ends-{topic}"})
    try:
        parts = range(partition_count(bootstrap, topic))
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in parts
        }
    finally:
        consumer.close()


@dataclass
class TopicReader:
    """Reads every partition of a topic from the beginning, with assign() (no group)."""

    bootstrap: str
    topic: str
    consumer: Consumer = field(init=False)

    def __post_init__(self) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": f"test-{self.topic}"}
        )
        parts = partition_count(self.bootstrap, self.topic)
        self.consumer.assign([TopicPartition(self.topic, p, 0) for p in range(parts)])

    def read(self, wait_s: float = 0.3) -> list[tuple[int, bytes | None, bytes]]:
        """The (partition, key, value) records that arrived within `wait_s`."""
        records = []
        for message in self.consumer.consume(1000, wait_s):
            assert message.error() is None, message.error()
            records.append((message.partition() or 0, message.key(), message.value() or b""))
        return records

    def close(self) -> None:
        self.consumer.close()


class ChangelogReader:
    """The changelog of a COUNT view: the latest row per key, and every row ever read."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.reader = TopicReader(bootstrap, topic)
        self.partitions = partition_count(bootstrap, topic)
        self.latest: dict[str, CountRow] = {}
        self.highest: Counter[str] = Counter()
        self.misplaced: list[tuple[str, int]] = []

    def poll(self) -> None:
        for partition, key, value in self.reader.read():
            row = decode_count(value)
            assert key == row.key.encode("utf-8")
            if partition != partition_for(row.key, self.partitions):
                self.misplaced.append((row.key, partition))
            self.latest[row.key] = row
            self.highest[row.key] = max(self.highest[row.key], row.count)

    def counts(self) -> dict[str, int]:
        return {k: r.count for k, r in self.latest.items()}

    def wait_for(self, expected: Counter[str], timeout_s: float = 90.0) -> None:
        """Poll until the latest count of every key equals `expected`."""

        def equal() -> bool:
            self.poll()
            return self.counts() == dict(expected)

        def differences() -> str:
            got = self.counts()
            diff = {k: (got.get(k), expected.get(k)) for k in set(got) | set(expected)}
            wrong = {k: v for k, v in diff.items() if v[0] != v[1]}
            return f"changelog counts to equal the ground truth; (got, expected): {wrong}"

        # interval 0: each poll() consumes with a timeout of its own
        wait_until(equal, timeout_s, differences, interval_s=0)

    def close(self) -> None:
        self.reader.close()


class DeadLetterReader:
    """The dead letters of one input topic."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.reader = TopicReader(bootstrap, DEADLETTER_TOPIC)
        self.letters: list[DeadLetter] = []

    def poll(self) -> None:
        for _partition, _key, value in self.reader.read():
            letter = decode_dead_letter(value)
            if letter.topic == self.topic:
                self.letters.append(letter)

    def close(self) -> None:
        self.reader.close()


class StatusReader:
    """The pipeline status topic: every status of the views named, in order."""

    def __init__(self, bootstrap: str, views: Iterable[str]) -> None:
        self.reader = TopicReader(bootstrap, PIPELINE_TOPIC)
        self.views = set(views)
        self.statuses: list[ViewStatus] = []

    def poll(self) -> None:
        for _partition, key, value in self.reader.read():
            status = decode_status(value)
            if status.view in self.views:
                assert key == status.view.encode("utf-8")
                self.statuses.append(status)

    def latest(self, view: str) -> ViewStatus | None:
        return next((s for s in reversed(self.statuses) if s.view == view), None)

    def wait_for_offsets(
        self, view: str, ends: dict[int, int], timeout_s: float = 60
    ) -> ViewStatus:
        """Poll until a status of `view` shows `ends` processed (every partition at or past
        its end); return that status."""

        def reached() -> bool:
            self.poll()
            status = self.latest(view)
            return status is not None and all(
                status.source_offsets.get(p, 0) >= e for p, e in ends.items()
            )

        wait_until(reached, timeout_s, f"status of view {view} to reach offsets {ends}", 0)
        status = self.latest(view)
        assert status is not None
        return status

    def close(self) -> None:
        self.reader.close()


class RecordLog:
    """Every record of a changelog topic, in the order read."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.reader = TopicReader(bootstrap, topic)
        self.partitions = partition_count(bootstrap, topic)
        self.records: list[tuple[int, bytes, bytes]] = []

    def poll(self) -> None:
        for partition, key, value in self.reader.read():
            assert key is not None
            self.records.append((partition, key, value))

    def latest(self) -> dict[bytes, tuple[int, bytes]]:
        """The newest (partition, value) per record key."""
        return {key: (partition, value) for partition, key, value in self.records}

    def wait_until(self, condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
        def polled() -> bool:
            self.poll()
            return condition()

        wait_until(polled, timeout_s, what, interval_s=0)

    def close(self) -> None:
        self.reader.close()
