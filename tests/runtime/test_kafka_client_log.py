"""librdkafka's log lines (runtime.kafka.ClientLog): they become records of the
`runtime.kafka` logger, and a line like one shown less than a minute ago is held back and
counted, so a broker that is down does not flood a part's log; a burst that ends is summed
up once the minute since the line shown is over."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest

from runtime.kafka import ClientLog
from tests.clocks import HandClock
from tooling.processes import wait_until

# how confluent-kafka hands a client's line over: facility, client name, text
FORMAT = "%s [%s] %s"
REFUSED = "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect failed: refused"


@pytest.fixture
def clock() -> HandClock:
    return HandClock()


class HandTimers:
    """`ClientLog`'s `schedule`: keeps each call with its time due, for the test to run."""

    def __init__(self, clock: HandClock) -> None:
        self.clock = clock
        self.due: list[tuple[float, Callable[[], None]]] = []

    def __call__(self, delay_s: float, call: Callable[[], None]) -> None:
        self.due.append((self.clock.now + delay_s, call))

    def run_due(self) -> None:
        """Run the calls due by the clock's time, as their timers would."""
        ready = [call for at, call in self.due if at <= self.clock.now]
        self.due = [(at, call) for at, call in self.due if at > self.clock.now]
        for call in ready:
            call()


@pytest.fixture
def timers(clock: HandClock) -> HandTimers:
    return HandTimers(clock)


@pytest.fixture
def client_log(clock: HandClock, timers: HandTimers) -> ClientLog:
    logger = logging.getLogger("tests.kafka_client_log")
    logger.setLevel(logging.DEBUG)
    return ClientLog(logger, every_s=60.0, clock=clock, schedule=timers)


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


def test_a_burst_that_ends_is_summed_up_by_its_last_line_once_the_minute_is_over(
    client_log: ClientLog, clock: HandClock, timers: HandTimers, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, "tests.kafka_client_log"):
        for attempt in range(50):
            client_log.log(logging.ERROR, FORMAT, "FAIL", f"rdkafka#consumer-{attempt}", REFUSED)
            clock.now += 0.1
        assert [at for at, _ in timers.due] == [pytest.approx(1060.0)]  # one timer a burst
        clock.now = 1059.9
        timers.run_due()
        assert len(caplog.records) == 1
        clock.now = 1060.0
        timers.run_due()
        clock.now += 1.0  # the summary is a line shown: its like is held for a minute again
        client_log.log(logging.ERROR, FORMAT, "FAIL", "rdkafka#consumer-50", REFUSED)
    assert messages(caplog) == [
        (logging.ERROR, f"FAIL [rdkafka#consumer-0] {REFUSED}"),
        (
            logging.ERROR,
            f"FAIL [rdkafka#consumer-49] {REFUSED} (the last of 49 like it held back in the "
            "last 60 s)",
        ),
    ]
    assert [at for at, _ in timers.due] == [pytest.approx(1120.0)]


def test_a_line_shown_after_the_minute_leaves_the_summary_nothing_to_say(
    client_log: ClientLog, clock: HandClock, timers: HandTimers, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, "tests.kafka_client_log"):
        for _ in range(3):
            client_log.log(logging.WARNING, FORMAT, "FAIL", "rdkafka#consumer-1", REFUSED)
        clock.now += 61.0
        client_log.log(logging.WARNING, FORMAT, "FAIL", "rdkafka#consumer-1", REFUSED)
        client_log.log(logging.WARNING, FORMAT, "FAIL", "rdkafka#consumer-1", REFUSED)
        timers.run_due()  # the first burst's timer: its count went with the line shown
    shown = f"FAIL [rdkafka#consumer-1] {REFUSED}"
    assert messages(caplog) == [
        (logging.WARNING, shown),
        (logging.WARNING, f"{shown} (2 more like it in the last 60 s not shown)"),
    ]
    assert len(timers.due) == 1  # the second burst's, one line held so far


def test_the_summary_comes_from_a_timer_thread(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("tests.kafka_client_log.timer")
    logger.setLevel(logging.DEBUG)
    client_log = ClientLog(logger, every_s=1.0)
    with caplog.at_level(logging.DEBUG, "tests.kafka_client_log.timer"):
        for _ in range(3):
            client_log.log(logging.ERROR, FORMAT, "FAIL", "rdkafka#consumer-1", REFUSED)
        wait_until(lambda: len(caplog.records) == 2, 10.0, "the held lines' summary", 0.01)
    assert (
        caplog.records[1].getMessage().endswith("(the last of 2 like it held back in the last 1 s)")
    )
    assert caplog.records[1].thread != threading.get_ident()


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
