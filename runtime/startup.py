"""What a part logs when it cannot start: one line for an error whose message says what
to fix (a setting, an unreachable Kafka, a missing topic), a traceback for any other,
which is a bug to report."""

from __future__ import annotations

import logging

from runtime.config import ConfigError
from runtime.kafka import KafkaConnectionError
from runtime.topics import TopicError

__all__ = ["EXPLAINED", "log_start_failure"]

# errors raised with the setting or the command that fixes them in their message
EXPLAINED: tuple[type[Exception], ...] = (ConfigError, KafkaConnectionError, TopicError)


def log_start_failure(
    log: logging.Logger,
    what: str,
    error: Exception,
    explained: tuple[type[Exception], ...] = (),
) -> None:
    """Log `what` failed with `error`: its message alone when it is one of `EXPLAINED` or
    `explained` (the part's own), else with its traceback."""
    if isinstance(error, EXPLAINED + explained):
        log.error("%s: %s", what, error)
    else:
        log.error(what, exc_info=error)
