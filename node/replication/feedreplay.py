"""Replaying a changelog range from Kafka as feed changes, for a follow older than the ring.

A `Replay` reads one changelog topic of one partition from an offset with a consumer that
joins no group (assign only), decodes each record with the view kind's applier, like the
replicators do, and returns the changes, in offset order, chunk by chunk up to a target
(the offset from which the node's ring holds every change). Its calls block: the feed
socket runs them in a worker thread.

A replay cannot see the store as it was, so a latest row counts as a change when its
event is later than the latest one the replay saw of its key, and a count when it is not
lower than the greatest the replay saw of its key since it was last deleted (the store's
rules, from the replay's start on); records a replicator skipped as undecodable are
skipped here too. A history event written twice (a pipeline replay) shows once when both
records come in one read (one `consume`, often fewer than its 1,000 records); otherwise
twice, where a live follow, which the store tells, shows it once.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from node.config import NodeConfig
from node.errors import ReplayError, SerializationError
from node.storage.changes import ChangeBatch, Effect, EventPosition, Stored, position
from node.storage.kinds import kind_of
from schema import View

__all__ = ["Replay"]

log = logging.getLogger(__name__)


class Replay:
    """Reads `view`'s changelog of `partition` from `start`; `read` then `close` (blocking)."""

    def __init__(
        self, config: NodeConfig, view: View, partition: int, start: int, stall_s: float = 30.0
    ):
        self.config = config
        self.view = view
        self.partition = partition
        self.position = start  # the next offset to read
        self.stall_s = stall_s
        self._apply = kind_of(view).apply
        self._consumer: Consumer | None = None
        # what a read consumed at or past its `until`: the next read's first (the consumer
        # has moved past them; on a compacted changelog a consume can reach past `until`)
        self._held: list[Message] = []
        self._latest: dict[str, EventPosition] = {}  # the latest event seen per key
        self._counts: dict[str, int] = {}  # the count kept per key (the greatest seen)
        # a follow cancelled mid-read closes the replay from another worker thread
        self._lock = threading.Lock()

    def _open(self) -> Consumer:
        if self._consumer is None:
            config = self.config
            self._consumer = Consumer(
                config.kafka.client(
                    fixed={
                        # assign() only: never joined, but librdkafka wants a group id
                        "group.id": f"{config.group_id}-feed-{config.node_id}",
                        "enable.auto.commit": False,
                        "enable.partition.eof": True,
                        "auto.offset.reset": "earliest",
                    },
                    defaults={"client.id": f"{config.node_id}-feed", "fetch.wait.max.ms": 100},
                )
            )
            topic = TopicPartition(self.view.changelog_topic, self.partition, self.position)
            self._consumer.assign([topic])
        return self._consumer

    def read(self, until: int, max_records: int = 1000) -> list[Effect]:
        """The changes of the records from `position` up to `until` (exclusive), at most
        `max_records` of them read; advances `position`, past offsets with no record too
        (a compacted changelog), as a record above them or the partition's end shows; the
        records consumed past `until` are the next read's.
        ReplayError when no record comes for `stall_s`."""
        with self._lock:
            return self._read(until, max_records)

    def _read(self, until: int, max_records: int) -> list[Effect]:
        consumer = self._open()
        deadline = time.monotonic() + self.stall_s
        batch = ChangeBatch()
        while self.position < until:
            # consume(n) waits for n records: ask for what is left of the range
            wanted = min(max_records, until - self.position)
            messages, self._held = self._held or consumer.consume(wanted, 0.5), []
            end = self._end(messages)
            records = [m for m in messages if m.error() is None]
            for index, message in enumerate(records):
                offset = message.offset()
                assert offset is not None
                if offset >= until:  # none is left before it; a later read takes it
                    self._held = records[index:]
                    self.position = until
                    break
                self._decode(batch, message, offset)
                self.position = offset + 1
            if end is not None:  # every record below the end came: none is left before it
                self.position = max(self.position, min(end, until))
            if records:
                break
            if time.monotonic() > deadline:
                raise ReplayError(
                    f"view {self.view.name} partition {self.partition}: no changelog record "
                    f"at offset {self.position} for {self.stall_s:.0f} s (the follow wants up "
                    f"to {until}); the records may be gone from {self.view.changelog_topic}"
                )
        return self._effects(batch)

    def _end(self, messages: list[Message]) -> int | None:
        """The end offset a partition EOF among `messages` reports (None: none did); raises
        on a fatal consumer error."""
        end = None
        for message in messages:
            error = message.error()
            if error is None:
                continue
            if error.fatal():
                raise ReplayError(
                    f"view {self.view.name}: changelog consumer failed: {error}"
                ) from KafkaException(error)
            if error.code() == KafkaError._PARTITION_EOF:
                end = message.offset()
            else:
                log.warning("view %s: changelog replay: %s", self.view.name, error)
        return end

    def _decode(self, batch: ChangeBatch, message: Message, offset: int) -> None:
        batch.reading(offset, len(message.value() or b""))
        try:
            self._apply(batch, self.view, message)
        except (ValueError, SerializationError) as exc:
            log.debug("view %s: replay skips the record at %d: %s", self.view.name, offset, exc)

    def _effects(self, batch: ChangeBatch) -> list[Effect]:
        """The batch's changes; latest rows only when later than the latest seen, counts
        only when not below the count kept."""
        return batch.effects(Stored(self._latest_before(batch), self._counts_before(batch)))

    def _latest_before(self, batch: ChangeBatch) -> dict[tuple[str, str], EventPosition]:
        """The latest event seen of each of the batch's latest keys; then notes the batch's."""
        before = {}
        for (view, key), event in batch.latest.items():
            seen = self._latest.get(key)
            if seen is not None:
                before[(view, key)] = seen
            if event is None:
                self._latest.pop(key, None)
            elif seen is None or position(event) > seen:
                self._latest[key] = position(event)
        return before

    def _counts_before(self, batch: ChangeBatch) -> dict[tuple[str, str], int]:
        """The count kept of each of the batch's count keys; then keeps the batch's."""
        before = {}
        for (view, key), row in batch.counts.items():
            kept = self._counts.get(key)
            if kept is not None:
                before[(view, key)] = kept
            if row is None:
                self._counts.pop(key, None)
            elif kept is None or not batch.keeps_count(view, key, kept):
                self._counts[key] = row.count
        return before

    def close(self) -> None:
        """Close the consumer, once any read running in another thread is done."""
        with self._lock:
            consumer, self._consumer = self._consumer, None
            if consumer is not None:
                consumer.close()
