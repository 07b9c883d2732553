"""librdkafka's log lines (runtime.kafka.ClientLog): they become records of the
`runtime.kafka` logger, and a line like one shown less than a minute ago is held back and
counted, so a broker that is down does not flood a part's log."""

from __future__ import annotations

import logging

import pytest

from runtime.kafka import ClientLog
from tests.clocks import HandClock

# how confluent-kafka hands a client's line over: facility, client name, text
FORMAT = "%s [%s] %s"
REFUSED = "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect failed: refused"


@pytest.fixture
def clock() -> HandClock:
    return HandClock()


@pytest.fixture
def client_log(clock: HandClock) -> ClientLog:
    logger = logging.getLogger("tests.kafka_client_log")
    logger.setLevel(logging.DEBUG)
    return ClientLog(logger, every_s=60.0, clock=clock)


def messages(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records]


def test_a_line_repeated_within_the_minute_is_held_and_counted_on_the_next_shown(
    client_log: ClientLog, clock: HandClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, "tests.kafka_client_log"):
        for _ in range(50):
            client_log.log(logging.ERROR, FORMAT, "FAIL", "rdkafka#consumer-1", REFUSED)
            clock.now += 0.1
        clock.now += 55.0  # 60 s after the first
        client_log.log(logging.ERROR, FORMAT, "FAIL", "rdkafka#consumer-1", REFUSED)
    shown = f"FAIL [rdkafka#consumer-1] {REFUSED}"
    assert messages(caplog) == [
        (logging.ERROR, shown),
        (logging.ERROR, f"{shown} (49 more like it in the last 60 s not shown)"),
    ]


def test_other_kinds_of_line_are_shown_and_a_new_instance_of_a_client_is_the_same_kind(
    client_log: ClientLog, caplog: pytest.LogCaptureFixture
) -> None:
    other_broker = REFUSED.replace("127.0.0.1:1/bootstrap", "127.0.0.1:2/2")
    with caplog.at_level(logging.DEBUG, "tests.kafka_client_log"):
        client_log.log(logging.ERROR, FORMAT, "FAIL", "rdkafka#consumer-1", REFUSED)
        # a reader that retries opens a new consumer: the same failure, not news
        client_log.log(logging.ERROR, FORMAT, "FAIL", "rdkafka#consumer-2", REFUSED)
        client_log.log(logging.ERROR, FORMAT, "FAIL", "rdkafka#consumer-1", other_broker)
        client_log.log(logging.ERROR, FORMAT, "FAIL", "n1-standby#consumer-3", REFUSED)
        client_log.log(logging.WARNING, FORMAT, "FAIL", "rdkafka#consumer-1", REFUSED)
        client_log.log(logging.ERROR, FORMAT, "ERROR", "rdkafka#consumer-1", "1/1 brokers down")
        client_log.log(logging.ERROR, FORMAT, "ERROR", "rdkafka#consumer-1", "1/1 brokers down")
    assert [text.split(" ", 2)[:2] for _, text in messages(caplog)] == [
        ["FAIL", "[rdkafka#consumer-1]"],
        ["FAIL", "[rdkafka#consumer-1]"],
        ["FAIL", "[n1-standby#consumer-3]"],
        ["FAIL", "[rdkafka#consumer-1]"],
        ["ERROR", "[rdkafka#consumer-1]"],
    ]
    assert other_broker in messages(caplog)[1][1]
    assert messages(caplog)[3][0] == logging.WARNING


def test_lines_below_the_loggers_level_are_neither_shown_nor_counted(
    clock: HandClock, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("tests.kafka_client_log.quiet")
    logger.setLevel(logging.WARNING)
    client_log = ClientLog(logger, every_s=60.0, clock=clock)
    with caplog.at_level(logging.WARNING, "tests.kafka_client_log.quiet"):
        client_log.log(logging.DEBUG, FORMAT, "CONNECT", "rdkafka#consumer-1", REFUSED)
        client_log.log(logging.ERROR, FORMAT, "CONNECT", "rdkafka#consumer-1", REFUSED)
    assert messages(caplog) == [(logging.ERROR, f"CONNECT [rdkafka#consumer-1] {REFUSED}")]


def test_kinds_not_seen_for_a_minute_are_forgotten_once_many_are_kept(
    client_log: ClientLog, clock: HandClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, "tests.kafka_client_log"):
        for number in range(1000):  # clients with a name of their own each
            client_log.log(logging.ERROR, FORMAT, "FAIL", f"client{number}#consumer-1", REFUSED)
            clock.now += 1.0
    assert len(caplog.records) == 1000
    assert client_log.kinds <= 256 + 60
