"""What a background reader says while its topic cannot be read (runtime.retrylog): the
first failure at warning, the retries failing alike at debug, a recovery at info."""

from __future__ import annotations

import logging

import pytest

from runtime.retrylog import RetryLog

LOGGER = "tests.retrylog"
BROKER = "check STATEFED_BOOTSTRAP (127.0.0.1:1)"
SASL = "check STATEFED_KAFKA_SASL_USERNAME and the password"


def said(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records]


@pytest.fixture
def retries() -> RetryLog:
    logging.getLogger(LOGGER).setLevel(logging.DEBUG)
    return RetryLog(logging.getLogger(LOGGER), "statefed.members")


def test_an_outage_is_a_warning_its_retries_debug_lines_and_its_end_an_info(
    retries: RetryLog, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, LOGGER):
        for _ in range(3):
            retries.failed("all brokers down", BROKER, 1.0)
        assert retries.failures == 3
        retries.read()
        retries.read()  # reading on: nothing more to say
    assert said(caplog) == [
        (
            logging.WARNING,
            f"reading statefed.members failed (all brokers down: {BROKER}); retrying 1.0 s "
            "after each failure (the retries that fail alike are logged at debug level)",
        ),
        (
            logging.DEBUG,
            "reading statefed.members failed again (all brokers down); retrying in 1.0 s",
        ),
        (
            logging.DEBUG,
            "reading statefed.members failed again (all brokers down); retrying in 1.0 s",
        ),
        (logging.INFO, "reading statefed.members again, after 3 failed attempts"),
    ]
    assert retries.failures == 0


def test_a_failure_that_points_elsewhere_is_a_warning_again_and_so_is_the_next_outage(
    retries: RetryLog, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, LOGGER):
        retries.failed("all brokers down", BROKER, 1.0)
        retries.failed("authentication failed", SASL, 1.0)  # the broker is back, refusing
        retries.failed("authentication failed", SASL, 1.0)
        retries.read()
        retries.failed("all brokers down", BROKER, 1.0)
    assert [level for level, _ in said(caplog)] == [
        logging.WARNING,
        logging.WARNING,
        logging.DEBUG,
        logging.INFO,
        logging.WARNING,
    ]
    assert SASL in said(caplog)[1][1]
