"""A partition's watermark offsets, asked so that a reader told to stop is not held.

librdkafka's `get_watermark_offsets` blocks for its whole timeout when no broker answers
(10 s: a broker down or not started yet). A reader thread in that call cannot see its stop
event, so a process asked to stop (Ctrl-C) waited out the timeout before it exited.
`watermarks` asks a second at a time within the same overall timeout while no broker
answers, and gives up at once when `stopping` is set; an answer that is an error (a topic
that does not exist) is raised at once, as before.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

__all__ = ["ASK_S", "watermarks"]

ASK_S = 1.0  # the longest one ask blocks, so the longest a stop waits
# what librdkafka raises when no broker answered within an ask
_UNANSWERED = frozenset(
    {KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT}
)


def watermarks(
    consumer: Consumer,
    partition: TopicPartition,
    stopping: threading.Event,
    timeout_s: float = 10.0,
) -> tuple[int, int]:
    """The (low, high) watermark offsets of `partition`, asked for up to `timeout_s` while
    no broker answers; the last ask's KafkaException when none answered in time or
    `stopping` is set, the broker's at once when it answered with an error."""
    deadline = time.monotonic() + timeout_s
    while True:
        asked = time.monotonic()
        ask_s = max(0.001, min(ASK_S, deadline - asked))
        try:
            low, high = consumer.get_watermark_offsets(partition, timeout=ask_s)
            return low, high
        except KafkaException as exc:
            if not _unanswered(exc):
                raise
            # no broker may fail an ask before its time is up: wait that out, not spin
            if stopping.wait(max(0.0, asked + ask_s - time.monotonic())):
                raise
            if time.monotonic() >= deadline:
                raise


def _unanswered(exc: KafkaException) -> bool:
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and error.code() in _UNANSWERED
