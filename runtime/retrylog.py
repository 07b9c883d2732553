"""What a background reader says while its topic cannot be read: the first failure at
warning, the retries that fail the same way at debug, and the first read that works again
at info.

The gateway's membership and pipeline status readers retry a second after each failure,
and each attempt takes librdkafka's timeout (about 10 s) while the broker does not answer:
a warning for each attempt filled a part's log through an outage, which the Kafka clients'
own lines (`runtime.kafka.ClientLog`) already mark once a minute. A failure that points at
another setting to check (a broker back but refusing the credentials, say) is a warning
again.
"""

from __future__ import annotations

import logging

__all__ = ["RetryLog"]


class RetryLog:
    """The failures and the recovery of one reader of `topic`, said through `logger`."""

    def __init__(self, logger: logging.Logger, topic: str) -> None:
        self._logger = logger
        self._topic = topic
        self._failures = 0
        self._hint: str | None = None  # of the failure last said at warning

    @property
    def failures(self) -> int:
        """Attempts that failed since the topic was last read."""
        return self._failures

    def failed(self, error: object, hint: str, retry_s: float) -> None:
        """An attempt failed with `error`; `hint` names the settings to check. The reader
        tries again in `retry_s`."""
        self._failures += 1
        if hint != self._hint:
            self._hint = hint
            self._logger.warning(
                "reading %s failed (%s: %s); retrying %s s after each failure (the retries "
                "that fail alike are logged at debug level)",
                self._topic,
                error,
                hint,
                retry_s,
            )
        else:
            self._logger.debug(
                "reading %s failed again (%s); retrying in %s s", self._topic, error, retry_s
            )

    def read(self) -> None:
        """An attempt reached the topic: said at info when attempts had failed before."""
        if self._failures:
            self._logger.info(
                "reading %s again, after %d failed attempts", self._topic, self._failures
            )
        self._failures, self._hint = 0, None
