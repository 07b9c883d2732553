"""runtime.watermarks against a bootstrap nobody listens at: a stop is seen between asks,
and without one the asks go on until the timeout, then the broker's error is raised. A
broker's answer that is an error (a topic that does not exist) is raised at once.
(tests/gateway/test_membership.py and test_status.py read real brokers through it.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from runtime.watermarks import ASK_S, watermarks
from tooling.broker import KafkaBroker, free_port

_TIMEOUT_S = 60.0  # far longer than a stop may take


@pytest.fixture
def refused() -> Iterator[Consumer]:
    consumer = Consumer(
        {"bootstrap.servers": f"127.0.0.1:{free_port()}", "group.id": "t", "log_level": 0}
    )
    yield consumer
    consumer.close()


def test_a_stop_ends_the_asking_before_the_timeout(refused: Consumer) -> None:
    stopping = threading.Event()
    timer = threading.Timer(ASK_S / 2, stopping.set)
    timer.start()
    started = time.monotonic()
    with pytest.raises(KafkaException, match="broker"):
        watermarks(refused, TopicPartition("t", 0), stopping, timeout_s=_TIMEOUT_S)
    timer.join()
    assert time.monotonic() - started < _TIMEOUT_S / 2, "the stop was not seen"


def test_without_a_stop_it_asks_until_the_timeout(refused: Consumer) -> None:
    started = time.monotonic()
    with pytest.raises(KafkaException):
        watermarks(refused, TopicPartition("t", 0), threading.Event(), timeout_s=3 * ASK_S)
    assert time.monotonic() - started >= 3 * ASK_S - 0.05, "gave up before its timeout"


def test_an_answer_that_is_an_error_is_raised_at_once(broker: KafkaBroker) -> None:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t"})
    try:
        started = time.monotonic()
        with pytest.raises(KafkaException) as raised:
            missing = TopicPartition("no-such-topic", 0)
            watermarks(consumer, missing, threading.Event(), timeout_s=_TIMEOUT_S)
        assert time.monotonic() - started < _TIMEOUT_S / 2, f"asked again: {raised.value}"
        code = raised.value.args[0].code()
        assert code == KafkaError._UNKNOWN_PARTITION, raised.value
    finally:
        consumer.close()
