"""The gateway's membership and pipeline status readers through failed attempts: the
first said at warning, the retries at debug, the read that works again at info
(runtime.retrylog), and each attempt made again (the dead-letter topic's too, while
statuses are read)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from gateway.cluster import membership, pipeline
from gateway.cluster.membership import MembershipReader
from gateway.cluster.pipeline import PipelineStatusReader, StatusBoard
from gateway.cluster.routing import RoutingFeed
from schema import DEADLETTER_TOPIC, PIPELINE_TOPIC

REFUSED = "127.0.0.1:1"  # nothing listens: no attempt of these tests reaches a broker


def down() -> KafkaException:
    return KafkaException(
        KafkaError(KafkaError._ALL_BROKERS_DOWN, "All broker connections are down")
    )


def levels(caplog: pytest.LogCaptureFixture, logger: str) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage().split(" (")[0]) for r in caplog.records if r.name == logger]


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(membership, "_RETRY_S", 0.01)
    monkeypatch.setattr(pipeline, "_RETRY_S", 0.01)
    yield


def test_the_membership_reader_warns_once_then_says_when_it_reads_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    reader = MembershipReader(REFUSED, RoutingFeed(), lookback_ms=1000)
    failures = iter([down(), down(), down()])

    def start_offset() -> int:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return 42

    followed: list[int] = []

    def follow(start: int) -> None:
        followed.append(start)
        reader._stopping.set()

    monkeypatch.setattr(reader, "_start_offset", start_offset)
    monkeypatch.setattr(reader, "_follow", follow)
    with caplog.at_level(logging.DEBUG, "gateway.cluster.membership"):
        reader._run()
    assert followed == [42]
    assert levels(caplog, "gateway.cluster.membership") == [
        (logging.WARNING, "reading statefed.members failed"),
        (logging.DEBUG, "reading statefed.members failed again"),
        (logging.DEBUG, "reading statefed.members failed again"),
        (logging.INFO, "reading statefed.members again, after 3 failed attempts"),
    ]


def test_the_status_reader_warns_once_then_says_when_it_reads_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    reader = PipelineStatusReader(REFUSED, StatusBoard(), tail_records=10, deadletter_topic=None)
    failures = iter([down(), down()])

    def tail_of(_consumer: object, topic: str) -> TopicPartition:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return TopicPartition(topic, 0, 0)

    monkeypatch.setattr(reader, "_tail_of", tail_of)
    monkeypatch.setattr(reader, "_apply", lambda _messages: reader._stopping.set())
    with caplog.at_level(logging.DEBUG, "gateway.cluster.pipeline"):
        reader._run()
    assert levels(caplog, "gateway.cluster.pipeline") == [
        (logging.WARNING, "reading statefed.pipeline failed"),
        (logging.DEBUG, "reading statefed.pipeline failed again"),
        (logging.INFO, "reading statefed.pipeline again, after 2 failed attempts"),
    ]


class AssignedConsumer:
    """The status reader's consumer, without a broker: what it was told to read; it stops
    `reader` once the dead-letter topic is read too, or after `timeout_s`."""

    def __init__(self, reader: PipelineStatusReader, timeout_s: float = 5.0) -> None:
        self.topics: list[str] = []
        self._reader = reader
        self._deadline = time.monotonic() + timeout_s

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.topics = [p.topic for p in partitions]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.topics += [p.topic for p in partitions]

    def consume(self, _count: int, timeout: float) -> list[object]:
        if DEADLETTER_TOPIC in self.topics or time.monotonic() > self._deadline:
            self._reader.stop()
        threading.Event().wait(timeout)
        return []


def test_the_status_reader_reads_dead_letters_once_their_topic_answers_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    reader = PipelineStatusReader(REFUSED, StatusBoard(), tail_records=10, poll_s=0.01)
    failures = iter([down(), down()])  # a hiccup as the reader starts: statuses answer

    def tail_of(_consumer: object, topic: str) -> TopicPartition:
        failure = next(failures, None) if topic == DEADLETTER_TOPIC else None
        if failure is not None:
            raise failure
        return TopicPartition(topic, 0, 0)

    monkeypatch.setattr(reader, "_tail_of", tail_of)
    consumer = AssignedConsumer(reader)
    with caplog.at_level(logging.DEBUG, "gateway.cluster.pipeline"):
        reader._follow(consumer)  # type: ignore[arg-type]
    assert consumer.topics == [PIPELINE_TOPIC, DEADLETTER_TOPIC]
    assert levels(caplog, "gateway.cluster.pipeline") == [
        (logging.WARNING, "reading statefed.deadletter failed"),
        (logging.DEBUG, "reading statefed.deadletter failed again"),
        (logging.INFO, "reading statefed.deadletter again, after 2 failed attempts"),
    ]
