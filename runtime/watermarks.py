"""A partition's watermark offsets, asked so that a reader told to stop is not held.

librdkafka's `get_watermark_offsets` blocks for its whole timeout when no broker answers
(10 s: a broker down or not started yet). A reader thread in that call cannot see its stop
event, so a process asked to stop (Ctrl-C) waited out the timeout before it exited.
`watermarks` asks a second at a time within the same overall timeout, and gives up at
once when `stopping` is set.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

__all__ = ["ASK_S", "watermarks"]

ASK_S = 1.0  # the longest one ask blocks, so the longest a stop waits


def watermarks(
    consumer: Consumer,
    partition: TopicPartition,
    stopping: threading.Event,
    timeout_s: float = 10.0,
) -> tuple[int, int]:
    """The (low, high) watermark offsets of `partition`, asked for up to `timeout_s`; the
    last ask's KafkaException when no broker answered in time or `stopping` is set."""
    deadline = time.monotonic() + timeout_s
    while True:
        asked = time.monotonic()
        ask_s = max(0.001, min(ASK_S, deadline - asked))
        try:
            low, high = consumer.get_watermark_offsets(partition, timeout=ask_s)
            return low, high
        except KafkaException:
            # a refusal can come before the ask's time is up: wait that out, not spin
            if stopping.wait(max(0.0, asked + ask_s - time.monotonic())):
                raise
            if time.monotonic() >= deadline:
                raise
