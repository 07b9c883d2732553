"""The end offsets of changelog partitions as the broker sees them now: learned from a fetch
sent after the question was asked, the proof a copy needs to count as current.

One consumer that never joins a group, driven by one thread: it assigns the asked
partitions at the copies' applied offsets, and the first event of each is its end (a
partition-EOF event carries it; a record means the end is past that record, and the
high watermark of the same fetch says where). Questions asked while a round is under way
wait for the next round, since its fetches may have been sent before they were asked.
A ListOffsets LATEST request sent after the question would prove as much on Apache Kafka;
fetch rounds are used because one round answers every asked partition of every waiting
question together, where librdkafka's watermark query asks for one partition at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from node.config import NodeConfig

__all__ = ["EndProbe", "EndUnknownError"]

log = logging.getLogger(__name__)

# a round that has not seen every asked partition's end by then gives up on the rest
_ROUND_S = 2.0

_Key = tuple[str, int]  # (topic, partition)


class EndUnknownError(Exception):
    """The broker did not tell the end of a partition in time (unreachable, or no such
    partition)."""


@dataclass
class _Question:
    topic: str
    applied: dict[int, int]  # partition -> next offset the copy will apply (a valid start)
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[dict[int, int]]


class EndProbe:
    """`await ends(topic, applied)`: end offsets from fetches sent after the call.
    `start()` it, `stop()` it."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self._questions: queue.SimpleQueue[_Question | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._consumer: Consumer | None = None
        self._met: set[str] = set()  # topics whose leaders the consumer has looked up
        self.rounds = 0

    def consumer_config(self) -> dict[str, object]:
        node_id = self.config.node_id
        return self.config.kafka.client(
            fixed={
                # assign() only: never joined, but librdkafka wants a group id
                "group.id": f"{self.config.group_id}-probe-{node_id}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,  # the event that carries a partition's end
            },
            # a fetch at the end waits this long for records before it answers: the latency
            # of a probe, paid only while a probe runs
            defaults={"client.id": f"{node_id}-probe", "fetch.wait.max.ms": 5},
        )

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("end probe already started")
        self._consumer = Consumer(self.consumer_config())
        self._thread = threading.Thread(
            target=self._run, name=f"endprobe-{self.config.node_id}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Answer nothing more, stop the thread and close the consumer."""
        self._questions.put(None)
        if self._thread is not None:
            self._thread.join(timeout_s)
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    async def ends(
        self, topic: str, applied: Mapping[int, int], timeout_s: float
    ) -> dict[int, int]:
        """The end offset of each partition of `topic` in `applied` (partition -> an offset
        at or before its end, where the fetch starts) from a fetch sent after this call;
        EndUnknownError when the broker has not told every one within `timeout_s`."""
        if self._thread is None or not self._thread.is_alive():
            raise EndUnknownError(f"the end-offset probe of node {self.config.node_id} is stopped")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[int, int]] = loop.create_future()
        self._questions.put(_Question(topic, dict(applied), loop, future))
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            raise EndUnknownError(
                f"no end of {topic} partitions {sorted(applied)} from the broker within "
                f"{timeout_s * 1000:.0f} ms"
            ) from None

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._questions.get()
            if first is None:
                return
            batch = [first]
            while not self._questions.empty():
                more = self._questions.get_nowait()
                if more is None:
                    stopping = True
                    break
                batch.append(more)
            self._answer(batch)

    def _answer(self, batch: list[_Question]) -> None:
        try:
            ends = self._round(batch)
        except KafkaException as exc:
            log.warning("node %s: end-offset probe failed: %s", self.config.node_id, exc)
            ends = {}
        for question in batch:
            found = {
                p: ends[(question.topic, p)]
                for p in question.applied
                if (question.topic, p) in ends
            }
            if len(found) == len(question.applied):
                _settle(question, found)
            else:
                missing = sorted(set(question.applied) - set(found))
                _settle(
                    question, EndUnknownError(f"no end of {question.topic} partitions {missing}")
                )

    def _round(self, batch: list[_Question]) -> dict[_Key, int]:
        """One fetch of every asked partition from its smallest asked offset."""
        consumer = self._consumer
        assert consumer is not None
        starts: dict[_Key, int] = {}
        for question in batch:
            for partition, offset in question.applied.items():
                key = (question.topic, partition)
                starts[key] = min(starts.get(key, offset), offset)
        assigned = [TopicPartition(t, p, max(0, o)) for (t, p), o in starts.items()]
        self._meet({topic for topic, _partition in starts})
        self.rounds += 1
        consumer.incremental_assign(assigned)
        try:
            return self._collect(consumer, starts)
        finally:
            consumer.incremental_unassign(assigned)

    def _meet(self, topics: set[str]) -> None:
        """Look up the leaders of topics the consumer has not fetched from yet: left to
        itself, librdkafka finds a newly assigned topic's leaders only at its next metadata
        refresh, up to a second later, and a first `readCurrent` read would time out."""
        consumer = self._consumer
        assert consumer is not None
        for topic in sorted(topics - self._met):
            try:
                consumer.list_topics(topic, timeout=_ROUND_S)
            except KafkaException as exc:  # the fetch round then says what is missing
                log.info("end probe: no metadata of %s yet: %s", topic, exc)
                continue
            self._met.add(topic)

    def _collect(self, consumer: Consumer, starts: Mapping[_Key, int]) -> dict[_Key, int]:
        ends: dict[_Key, int] = {}
        deadline = time.monotonic() + _ROUND_S
        while len(ends) < len(starts) and (left := deadline - time.monotonic()) > 0:
            for message in consumer.consume(1, left):
                topic, partition = message.topic(), message.partition()
                key = (topic or "", -1 if partition is None else partition)
                if key in starts and key not in ends:
                    end = _end_of(consumer, message)
                    if end is not None:
                        ends[key] = end
        return ends


def _end_of(consumer: Consumer, message: Message) -> int | None:
    """The partition end a fetch's first event says, or None for an event that says none."""
    error = message.error()
    offset = message.offset()
    if error is None and offset is not None:
        # a record at or after the asked offset: the end is past it; the high watermark
        # cached from the same fetch response says where
        _low, high = consumer.get_watermark_offsets(
            TopicPartition(message.topic() or "", message.partition() or 0), cached=True
        )
        return max(high, offset + 1)
    if error is not None and error.code() == KafkaError._PARTITION_EOF and offset is not None:
        return offset
    if error is not None and error.fatal():
        raise KafkaException(error)
    return None


def _settle(question: _Question, outcome: Any) -> None:
    """Resolve the asker's future on its own loop (it may have given up meanwhile)."""

    def settle() -> None:
        if question.future.done():
            return
        if isinstance(outcome, BaseException):
            question.future.set_exception(outcome)
        else:
            question.future.set_result(outcome)

    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        question.loop.call_soon_threadsafe(settle)
