"""What a part logs when it cannot start (runtime.startup): the message alone for an error
that says what to fix, the traceback with it for any other."""

from __future__ import annotations

import logging

import pytest

from runtime.config import ConfigError
from runtime.kafka import KafkaConnectionError
from runtime.startup import log_start_failure

log = logging.getLogger("tests.startup")


class OwnError(RuntimeError):
    """A part's own error that names its fix."""


def _raised(error: Exception) -> Exception:
    try:
        raise error
    except Exception as exc:
        return exc


@pytest.mark.parametrize(
    "error",
    [
        KafkaConnectionError("no metadata from Kafka at k:9092: check STATEFED_BOOTSTRAP"),
        ConfigError("STATEFED_CLUSTER_SECRET_FILE", "cannot read '/x'"),
        OwnError("changelog topics must have one partition count"),
    ],
)
def test_an_error_that_names_its_fix_is_one_line(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, "tests.startup"):
        log_start_failure(log, "node n1 failed to start", _raised(error), (OwnError,))
    assert [(r.getMessage(), r.exc_info) for r in caplog.records] == [
        (f"node n1 failed to start: {error}", None)
    ]


def test_any_other_error_comes_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, "tests.startup"):
        log_start_failure(log, "gateway start-up failed", _raised(KeyError("views")))
    (record,) = caplog.records
    assert record.getMessage() == "gateway start-up failed"
    assert record.exc_info is not None and record.exc_info[0] is KeyError
    assert "Traceback" in caplog.text
