"""The materializer: a thread that applies the changelog partitions this node owns.

It runs one confluent-kafka consumer in the node group. The group assigns partitions of one
changelog topic (the lead topic, the first in name order) with the cooperative-sticky
assignor, and the node takes the same partitions of every other changelog topic with them,
so partition p of every view is on one node, in one LevelDB store. Cooperative: a rebalance
revokes only the partitions that move, in a first round, and assigns them in a second;
the others keep being applied and served. On assign it opens the stores and seeks to their
stored offsets (the group's committed offsets are never trusted), reports RESTORING
until every partition reaches the high watermark of a fetch, then RUNNING (reaching it
stores it as the offset, past offsets that hold no record, as a record would); each
partition's restore progress (records done / to do) goes to the registry, and its start
and finish (records, rate) to the log. On revoke (or loss) it hands the open stores to the
standby replicator, which keeps them current as STANDBY copies until the new owner runs
(`StoreHandoff.adopt`); without one it closes them (they stay on disk). When the group
session lapses because the broker does not answer (the assignment is "lost" while nobody
can take it over), the stores stay open and keep serving as ACTIVE, with their lag
unknown, until the group assigns partitions again; a session lost while the broker
answers (this node was frozen) is a revoke. A store found damaged at open is moved
aside and its partition restored from offset 0 while the others serve; a write that
fails (a full disk) pauses that partition's changelogs, keeps the store readable and
its offsets where they were, and retries with backoff from the stored offsets
(`_retry_faults`). The `Replicator` base is shared with the standby replicator. Each
view's kind
(`node.storage.kinds`) turns one changelog record into store changes, and, for kinds whose rows
expire (windows past their retention, by the injected clock), purges them with every
batch and by a periodic sweep. After each successful write the changes that took effect go
to the node's change feed (node.changelog.feed), with every attach, detach, end offset and restore
state of a copy: the tap only appends to memory, it never waits on the network. A batch of
a partition nobody follows computes no changes: only its offsets go to the feed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from node.changelog.feed import ChangeFeed
from node.changelog.lease import Lease
from node.changelog.partitions import PartitionRegistry, SetAside
from node.config import NodeConfig
from node.errors import SerializationError, StoreDamagedError, StoreError, StoreWriteError
from node.storage.kinds import kind_of
from node.storage.store import ChangeBatch, LevelDBStore, PartitionStore
from runtime.clock import Clock, wall_clock_ms
from schema import NodeState, Role, View

__all__ = ["Materializer", "Replicator", "StoreFactory", "StoreHandoff"]

log = logging.getLogger(__name__)

# the node group's: the least Kafka accepts by default (group.min.session.timeout.ms), so
# the partitions of a node that died move to the others soonest
SESSION_TIMEOUT_MS = 6000
# the group heartbeat: a third of the session, as Kafka advises; a session expires no
# sooner than SESSION_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS after a node froze
HEARTBEAT_INTERVAL_MS = 2000
# the node's lease on its ACTIVE copies (node.changelog.lease): it lapses well before a
# frozen node's session can expire and its partitions move
LEASE_TERM_S = (SESSION_TIMEOUT_MS - HEARTBEAT_INTERVAL_MS) / 2000
# how often a lapsed lease asks the group again when a confirmation failed
_CONFIRM_RETRY_S = 1.0
# how often the watchdog renews the lease: a gap of the term between two renewals is a pause
_LEASE_TICK_S = 0.1
# an apply loop that has not turned for this long is stuck (a batch, a restore step or a
# rebalance callback takes far less): the watchdog stops renewing the lease, so the node's
# ACTIVE copies, which have stopped applying, answer no unproved read
APPLY_STALL_S = 10.0
# how long closing waits for a confirmation's commit in flight
_CONFIRM_JOIN_S = 10.0
# how long a node whose group session lapsed waits for the broker to answer a metadata
# request before it takes the broker for unreachable
_BROKER_ANSWER_S = 2.0
# while no partition restores, the changelog ends (for lag) are recorded at most this
# often: recording them reads every assigned partition's watermark, and an apply loop that
# turns for every few records (10,000 a second) spent 4-5% of the node's CPU doing it
_ENDS_EVERY_S = 0.02

StoreFactory = Callable[[int], PartitionStore]


@dataclass
class _Restore:
    """One partition catching up since it was attached: where it started, its targets."""

    started_s: float
    starts: dict[str, int]
    # the first high watermark seen per topic after the attach
    targets: dict[str, int] = field(default_factory=dict)
    # topics whose end a fetch after the attach reached (a partition EOF event): a cached
    # watermark may predate the attach (kept from an earlier assignment of the partition),
    # so only this proves the copy caught up
    reached: set[str] = field(default_factory=set)

    def progress(self, positions: Mapping[tuple[str, int], int], partition: int) -> tuple[int, int]:
        """(records restored so far, records to restore; 0 while a target is unknown)."""
        done = sum(max(0, positions.get((t, partition), s) - s) for t, s in self.starts.items())
        total = sum(
            max(0, self.targets[t] - s) for t, s in self.starts.items() if t in self.targets
        )
        return min(done, total), total

    def reached_end(self, topic: str, end: int) -> None:
        self.reached.add(topic)
        self.targets[topic] = max(self.targets.get(topic, end), end)

    def finished(self, positions: Mapping[tuple[str, int], int], partition: int) -> bool:
        return all(
            t in self.reached and positions.get((t, partition), s) >= self.targets[t]
            for t, s in self.starts.items()
        )


@dataclass
class _Fault:
    """A partition whose store failed a write or was found damaged: its changelogs are
    paused (`held`) until `retry_at` (monotonic s); `recovered` once a retry wrote again,
    until the first batch after it is applied."""

    error: StoreError
    since_s: float
    retry_at: float
    backoff_s: float
    attempts: int = 0  # failures so far
    held: bool = False
    recovered: bool = False


# what a store may raise on apply that the replicator retries instead of dying
_STORE_FAULTS = (StoreWriteError, StoreDamagedError)


class Replicator:
    """Applies changelog partitions into partition stores from a consumer thread.

    Subclasses own the consumer (`_run`): the group-based `Materializer` for ACTIVE copies,
    `node.replication.standby.StandbyReplicator` (assign() only) for STANDBY copies. `start()` it,
    `stop()` it, then `close()`.
    """

    role: ClassVar[Role] = Role.ACTIVE
    batch_size = 2000
    # how long an idle consumer thread sleeps between wake-ups; a record wakes it at once
    # (`_consume`), so this bounds stop and housekeeping, not freshness
    poll_timeout_s = 0.5
    # a store that failed is retried after this, doubling up to `retry_max_s`
    retry_first_s = 0.5
    retry_max_s = 10.0

    def __init__(
        self,
        config: NodeConfig,
        catalogue: Iterable[View],
        registry: PartitionRegistry,
        *,
        store_factory: StoreFactory | None = None,
        on_fatal: Callable[[BaseException], None] | None = None,
        clock: Clock = wall_clock_ms,
        feed: ChangeFeed | None = None,
    ):
        self.config = config
        self._feed = feed
        self.registry = registry
        self.views = {view.changelog_topic: view for view in catalogue}
        # per topic, resolved once: the apply loop runs once per changelog record
        self._appliers = {topic: (view, kind_of(view).apply) for topic, view in self.views.items()}
        self._store_factory = store_factory or self._leveldb_store
        self._on_fatal = on_fatal
        self._clock = clock
        # the views whose rows expire, and how
        self._expiring = [
            (view, expire)
            for view in self.views.values()
            if (expire := kind_of(view).expire) is not None
        ]
        self._last_sweep = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Consumer | None = None
        self._stores: dict[int, PartitionStore] = {}
        # next offset to apply per (topic, partition)
        self._positions: dict[tuple[str, int], int] = {}
        self._restores: dict[int, _Restore] = {}
        self._ends_recorded = 0.0  # when `_track_end_offsets` last read the watermarks
        self._faults: dict[int, _Fault] = {}
        # per partition attached, its topics no fetch has come back for since: their cached
        # high watermarks may be of an earlier assignment, so its lag is doubted until then
        self._unfetched: dict[int, set[str]] = {}
        self.records_read = 0
        self.failure: BaseException | None = None

    def _leveldb_store(self, partition: int) -> PartitionStore:
        path = Path(self.config.state_dir) / f"partition-{partition}"
        return LevelDBStore(path, cache_mb=self.config.store_cache_mb)

    @property
    def name(self) -> str:
        return f"{self.role.value.lower()} replicator of node {self.config.node_id}"

    def _consume(self, consumer: Consumer) -> list[Message]:
        """Up to `batch_size` records as soon as one is there, else none after
        `poll_timeout_s`. `consume(n, timeout)` alone waits for n records or the whole
        timeout, which delayed every change of a quiet changelog by up to the timeout."""
        messages = consumer.consume(1, self.poll_timeout_s)
        if messages:
            messages.extend(consumer.consume(self.batch_size - 1, 0))
        return messages

    def start(self) -> None:
        """Start consuming in a new thread; returns at once."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name} already started")
        self._thread = threading.Thread(
            target=self._guarded_run,
            name=f"{self.role.value.lower()}-{self.config.node_id}",
            daemon=True,
        )
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop consuming and close every store; the consumer stays open until `close`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.error("%s did not stop in %s s", self.name, timeout_s)

    def close(self) -> None:
        """Close the consumer (after `stop`): the Materializer leaves the group here."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()
        self._close_stores(list(self._stores))

    def _guarded_run(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            self.failure = exc
            log.exception("%s failed", self.name)
            if self._on_fatal is not None:
                self._on_fatal(exc)
        finally:
            self._close_stores(list(self._stores))

    def _run(self) -> None:
        raise NotImplementedError

    def _attach(self, partitions: list[TopicPartition]) -> None:
        """Open the stores of `partitions`, point each TopicPartition at its stored offset,
        and serve them in `role`, restoring from there. A store that cannot be written (a
        full disk) is attached closed and retried."""
        for partition in sorted({tp.partition for tp in partitions}):
            topics = [tp for tp in partitions if tp.partition == partition]
            store = self._store_factory(partition)
            failure = self._open(partition, store)
            self._hold(partition, store, topics, restoring=True, failure=failure)

    @staticmethod
    def _assign(consumer: Consumer, topics: list[TopicPartition]) -> None:
        """Add `topics` to `consumer`'s assignment, from the offsets set on them, unpaused:
        librdkafka keeps a pause (of a store fault) across unassign and assign again."""
        consumer.incremental_assign(topics)
        consumer.resume(topics)

    def _hold(
        self,
        partition: int,
        store: PartitionStore,
        topics: list[TopicPartition],
        restoring: bool,
        failure: StoreWriteError | None = None,
    ) -> None:
        """Serve `store` of `partition` in `role`, applying `topics` from its stored offsets
        (set on them); `restoring` until a fetch after now reached their ends. A store that
        could not be opened for writing (`failure`) is held closed and retried."""
        stored = {} if failure is not None else store.offsets()
        for tp in topics:
            tp.offset = stored.get(tp.topic, OFFSET_BEGINNING)
        self._stores[partition] = store
        applied = {tp.topic: stored.get(tp.topic, 0) for tp in topics}
        self._positions.update({(t, partition): n for t, n in applied.items()})
        if restoring:
            self._restores[partition] = _Restore(time.monotonic(), applied)
        self.registry.attach(partition, store, self.role, applied, restoring=restoring)
        self.registry.doubt_ends([partition], self._clock(), lapses=False)
        self._unfetched[partition] = {tp.topic for tp in topics}
        if self._feed is not None:
            self._feed.attach(partition, self.role, applied, restoring)
        if failure is not None:
            self._fault(partition, failure)
        log.info(
            "node %s: %s partition %d %s from offsets %s",
            self.config.node_id,
            self.role.value,
            partition,
            "restoring" if restoring else "following",
            applied,
        )

    def _open(self, partition: int, store: PartitionStore) -> StoreWriteError | None:
        """Open `store`; a damaged one (found at open, or by reading its offsets, which
        `_hold` needs) is moved aside and opened empty. Returns the error of a store that
        cannot be written now (a full disk) instead of raising it."""
        try:
            try:
                store.open()
                store.offsets()
            except StoreDamagedError as exc:
                self._set_aside(partition, exc, store.set_aside())
                store.open()
        except StoreWriteError as exc:
            return exc
        return None

    def _set_aside(self, partition: int, damage: StoreError, moved_to: str) -> None:
        """Record and log that `partition`'s damaged store was moved to `moved_to`."""
        self.registry.record_set_aside(SetAside(partition, str(damage), moved_to, self._clock()))
        log.error(
            "node %s: %s partition %d: %s; moved it aside to %s and rebuilding the "
            "partition from the changelog",
            self.config.node_id,
            self.role.value,
            partition,
            damage,
            moved_to,
        )

    def _close_stores(self, partitions: Iterable[int]) -> None:
        for partition in sorted(partitions):
            # detach first: it waits for running reads, so no read sees a closed store
            self.registry.detach(partition)
            if self._feed is not None:
                self._feed.detach(partition, f"{self.name} let partition {partition} go")
            self._restores.pop(partition, None)
            self._faults.pop(partition, None)
            self._unfetched.pop(partition, None)
            store = self._stores.pop(partition, None)
            if store is not None:
                store.close()

    def _apply(self, messages: list[Message]) -> None:
        """Apply one poll batch: one ChangeBatch, so one atomic write, per partition."""
        if self._unfetched:
            self._note_fetched(messages)
        batches: dict[int, ChangeBatch | None] = {}  # None: the partition's records are skipped
        read = 0
        for message in messages:
            error = message.error()
            if error is not None:
                self._on_message_error(message, error)
                if error.code() == KafkaError._PARTITION_EOF:
                    self._pass_to_end(message, batches)
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            assert topic is not None and partition is not None and offset is not None
            if offset < self._positions.get((topic, partition), 0):
                # applied already: a poll fetched it for an earlier holder of the copy (a
                # standby's fetch before it adopted the revoked active store)
                continue
            batch = batches.get(partition)
            if batch is None:
                if partition in batches:
                    continue
                batch = batches[partition] = self._batch_for(partition)
                if batch is None:
                    continue
            read += 1
            view, apply = self._appliers[topic]
            if batch.tracked:
                batch.reading(offset, len(message.value() or b""))
            try:
                apply(batch, view, message)
            except (ValueError, SerializationError) as exc:
                # skip it but advance past it: one bad record must not stop the partition
                log.warning(
                    "view %s: skipping undecodable changelog record at partition %d offset %d: %s",
                    view.name,
                    partition,
                    offset,
                    exc,
                )
            batch.advance(topic, offset + 1)
        self.records_read += read
        for partition, batch in batches.items():
            if batch is not None:
                self._write(partition, batch)

    def _pass_to_end(self, eof: Message, batches: dict[int, ChangeBatch | None]) -> None:
        """A fetch reached the end of a changelog at offset `eof.offset()`: librdkafka
        queues a partition's records and its EOF in fetch order, so every record before the
        end is in this poll's batch or an earlier one. Offsets up to the end that hold no
        record (retention deleted them, compaction removed them) are passed in the batch,
        as a record after them would pass them; else the copy would wait for the end
        forever (restoring, or behind by a phantom lag)."""
        topic, partition, end = eof.topic(), eof.partition(), eof.offset()
        if topic not in self._appliers or partition is None or end is None:
            return  # not a changelog (the standby's membership topic)
        batch = batches.get(partition)
        applied = batch.offsets.get(topic) if batch is not None else None
        if applied is None:
            applied = self._positions.get((topic, partition), end)
        if applied >= end:
            return  # the usual end: just after the last record
        if batch is None:
            if partition in batches:
                return  # skipped in this poll: read again by its next holder or a retry
            batch = batches[partition] = self._batch_for(partition)
            if batch is None:
                return
        batch.advance(topic, end)

    def _note_fetched(self, messages: list[Message]) -> None:
        """Trust the end offsets of a partition attached earlier once a fetch came back for
        each of its topics since: a record, or a partition EOF at the end."""
        for message in messages:
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                continue
            partition = message.partition()
            topics = None if partition is None else self._unfetched.get(partition)
            if partition is None or topics is None:
                continue
            topics.discard(message.topic() or "")
            if not topics:
                del self._unfetched[partition]
                self.registry.trust_ends(partition)

    def _batch_for(self, partition: int) -> ChangeBatch | None:
        """A new batch for the records of `partition` in this poll, or None to skip them: a
        store closed during this poll (its next holder applies them) or paused after it
        failed (they are read again from the stored offsets once it recovers)."""
        if partition not in self._stores or self._held(partition):
            return None
        return self._new_batch(self._followed(partition))

    def _write(self, partition: int, batch: ChangeBatch) -> None:
        """Write `batch` to `partition`'s store and tell the registry and the feed."""
        self.registry.applying(partition, batch.offsets)
        try:
            changes = self._stores[partition].apply(batch)
        except _STORE_FAULTS as exc:
            self.registry.not_applied(partition)
            self._fault(partition, exc)  # nothing of the batch was written
            return
        self._faults.pop(partition, None)
        self.registry.record_applied(partition, batch.offsets)
        if self._feed is not None:
            self._feed.publish(partition, changes if batch.tracked else None, batch.offsets)
        for topic, next_offset in batch.offsets.items():
            self._positions[(topic, partition)] = next_offset

    def _followed(self, partition: int) -> bool:
        """Whether the change feed wants the changes of `partition`'s next batch."""
        return self._feed is not None and self._feed.wants_changes(partition)

    def _new_batch(self, tracked: bool = False) -> ChangeBatch:
        """An empty batch that also purges the rows (windows) expired by now (and drops
        incoming ones that are), so a restore from an old changelog does not store dead rows.
        Only a `tracked` batch reports its changes (for the change feed)."""
        batch = ChangeBatch(tracked=tracked)
        if self._expiring:
            now_ms = self._clock()
            for view, expire in self._expiring:
                expire(batch, view, now_ms)
        return batch

    def _sweep_if_due(self) -> None:
        """Purge expired rows of every store now and then, records or not."""
        interval_s = self.config.retention_sweep_ms / 1000
        if not self._expiring or time.monotonic() - self._last_sweep < interval_s:
            return
        self._last_sweep = time.monotonic()
        for partition, store in list(self._stores.items()):
            if self._held(partition):
                continue
            try:
                store.apply(self._new_batch())
            except _STORE_FAULTS as exc:
                self._fault(partition, exc)

    # -- store faults ----------------------------------------------------------------------

    def _held(self, partition: int) -> bool:
        """Whether `partition` is paused because its store failed."""
        fault = self._faults.get(partition)
        return fault is not None and not fault.recovered

    def _fault(self, partition: int, error: StoreError) -> None:
        """Pause `partition` after its store failed; its offsets stay where they were."""
        now = time.monotonic()
        fault = self._faults.get(partition)
        if fault is None:
            fault = self._faults[partition] = _Fault(error, now, now, self.retry_first_s / 2)
            log.error(
                "node %s: %s partition %d: %s; applying it is paused and retried until it "
                "succeeds (the store keeps its data and offsets)",
                self.config.node_id,
                self.role.value,
                partition,
                error,
            )
        fault.error, fault.recovered = error, False
        fault.attempts += 1
        fault.backoff_s = min(fault.backoff_s * 2, self.retry_max_s)
        fault.retry_at = now + fault.backoff_s
        self.registry.record_store_error(partition, str(error))

    def _retry_faults(self, consumer: Consumer) -> None:
        """Pause the changelogs of failed stores; retry those that are due: reopen (or
        rebuild a damaged one), write, then read on from the stored offsets."""
        for partition, why in self.registry.take_damaged(self._stores.keys()).items():
            self._fault(partition, StoreDamagedError(f"a read found it damaged: {why}"))
        now = time.monotonic()
        for partition, fault in list(self._faults.items()):
            if fault.recovered:
                continue
            topics = [TopicPartition(topic, partition) for topic in self.views]
            # a copy held through a broker outage is not assigned: librdkafka refuses to
            # seek it, and its next assignment starts from the stored offsets anyway
            consuming = self._consuming(partition)
            if not fault.held and consuming:
                consumer.pause(topics)
            fault.held = True
            damaged = isinstance(fault.error, StoreDamagedError)
            if now < fault.retry_at:
                continue
            if not damaged and not self._stores[partition].room_to_write():
                # a reopen would fail and leave the store closed: keep serving reads
                fault.retry_at = now + fault.backoff_s
                continue
            try:
                stored = self._recover(partition, fault.error if damaged else None)
            except _STORE_FAULTS as exc:
                self._fault(partition, exc)
                continue
            if consuming:
                consumer.resume(topics)
                for tp in topics:
                    tp.offset = stored.get(tp.topic, OFFSET_BEGINNING)
                    consumer.seek(tp)
            fault.held, fault.recovered = False, True
            self.registry.record_store_error(partition, None)
            log.info(
                "node %s: %s partition %d: its store takes writes again after %.1f s and "
                "%d failures; applying from offsets %s",
                self.config.node_id,
                self.role.value,
                partition,
                time.monotonic() - fault.since_s,
                fault.attempts,
                stored,
            )

    def _consuming(self, partition: int) -> bool:
        """Whether `partition`'s changelogs are in the consumer's assignment now."""
        raise NotImplementedError

    def _recover(self, partition: int, damage: StoreError | None) -> dict[str, int]:
        """Reopen `partition`'s store (a damaged one moved aside first, opened empty) and
        prove it takes writes; returns its stored offsets, from which it goes on."""
        store = self._stores[partition]
        if damage is not None:
            # restoring before the store is emptied: no read may find it empty meanwhile;
            # and a restore of ours, so that a retry after a failure below (a full disk)
            # still ends it once the changelog's end is reached
            self.registry.restart_restore(partition, {})
            emptied = dict.fromkeys(self.views, 0)
            self._restores[partition] = _Restore(time.monotonic(), emptied)
            self._positions.update({(t, partition): 0 for t in self.views})
            moved_to = self.registry.exclusive(partition, lambda held: held.set_aside())
            if moved_to is not None:
                self._set_aside(partition, damage, moved_to)
        self.registry.exclusive(partition, lambda held: held.reopen())
        store.apply(self._new_batch())
        stored = store.offsets()
        applied = {topic: stored.get(topic, 0) for topic in self.views}
        self._positions.update({(t, partition): n for t, n in applied.items()})
        if damage is not None or partition in self._restores:
            self._restores[partition] = _Restore(time.monotonic(), applied)
            self.registry.restart_restore(partition, applied)
        else:
            self.registry.record_applied(partition, applied)
        if self._feed is not None:  # a rebuilt store starts anew: its follows are gone
            self._feed.attach(partition, self.role, applied, partition in self._restores)
        return stored

    def _on_message_error(self, message: Message, error: KafkaError) -> None:
        if error.fatal():
            raise KafkaException(error)
        if error.code() != KafkaError._PARTITION_EOF:
            log.warning("%s: changelog consumer error: %s", self.name, error)
            return
        # a fetch reached the end of the partition: its offset is the high watermark
        topic, partition, end = message.topic(), message.partition(), message.offset()
        restore = self._restores.get(partition) if partition is not None else None
        if restore is not None and topic in restore.starts and end is not None and end >= 0:
            restore.reached_end(topic, end)

    def _track_end_offsets(self, consumer: Consumer, assigned: Iterable[TopicPartition]) -> int:
        """Record each partition's high watermark from the latest fetch and the restore
        progress; returns the records of the restores that finished now.

        Cached watermarks come from the consumer's own fetch responses: the ends
        ListOffsets LATEST would answer, without one more request per partition. A
        partition is restored once a fetch after its attach reached the end of each topic
        (a partition EOF; the cached watermark of a partition assigned again may be an old
        one) and it applied up to the first end seen (a moving target would never be
        reached under steady traffic). While none restores, the ends are recorded at most
        every _ENDS_EVERY_S: a lag may then be that much older than the loop's last turn.
        """
        now = time.monotonic()
        if not self._restores and now - self._ends_recorded < _ENDS_EVERY_S:
            return 0
        self._ends_recorded = now
        for tp in assigned:
            if tp.partition not in self._stores:
                continue
            _low, high = consumer.get_watermark_offsets(tp, cached=True)
            if high >= 0:
                self.registry.record_end(tp.partition, tp.topic, high)
                if self._feed is not None:
                    self._feed.record_end(tp.partition, tp.topic, high)
                restore = self._restores.get(tp.partition)
                if restore is not None:
                    restore.targets.setdefault(tp.topic, high)
        restored = 0
        for partition, restore in list(self._restores.items()):
            done, total = restore.progress(self._positions, partition)
            finished = restore.finished(self._positions, partition)
            self.registry.record_restore(partition, done, total, restoring=not finished)
            if self._feed is not None:
                self._feed.record_restoring(partition, not finished)
            if finished:
                del self._restores[partition]
                restored += done
                self._log_restored(partition, done, time.monotonic() - restore.started_s)
        return restored

    def _log_restored(self, partition: int, records: int, elapsed_s: float) -> None:
        log.info(
            "node %s: %s partition %d restored: %d records in %.2f s (%.0f records/s)",
            self.config.node_id,
            self.role.value,
            partition,
            records,
            elapsed_s,
            records / elapsed_s if elapsed_s > 0 else 0.0,
        )


class StoreHandoff(Protocol):
    """Who else may hold this node's partition stores (the standby replicator): the
    Materializer claims a partition before opening its store, releases it after closing,
    and on revoke offers it the open store to keep serving (`adopt`: False = declined, the
    Materializer closes it)."""

    def claim(self, partitions: set[int]) -> None: ...

    def release(self, partitions: set[int]) -> None: ...

    def adopt(self, partition: int, store: PartitionStore, restoring: bool) -> bool: ...


class Materializer(Replicator):
    """The ACTIVE copies: one consumer in the node group, assigned partitions of the lead
    topic, applying the same partitions of every changelog topic."""

    role = Role.ACTIVE

    def __init__(
        self,
        config: NodeConfig,
        catalogue: Iterable[View],
        registry: PartitionRegistry,
        *,
        store_factory: StoreFactory | None = None,
        on_fatal: Callable[[BaseException], None] | None = None,
        clock: Clock = wall_clock_ms,
        handoff: StoreHandoff | None = None,
        feed: ChangeFeed | None = None,
    ):
        super().__init__(
            config,
            catalogue,
            registry,
            store_factory=store_factory,
            on_fatal=on_fatal,
            clock=clock,
            feed=feed,
        )
        self._handoff = handoff
        self._assigned: list[TopicPartition] = []
        # stores kept serving after the assignment was lost in a broker outage
        # partitions kept serving through a broker outage that lost the group session
        self._outage_held: set[int] = set()
        self._restore_started = 0.0
        self._restored_records = 0
        # the registry's ACTIVE copies serve unproved reads only while this lease holds
        self.lease = Lease(LEASE_TERM_S)
        registry.lease = self.lease
        self._turned = self.lease.now()  # when the apply loop last turned (the lease's clock)
        self._stalled = False  # whether the watchdog logged the loop stuck
        self._confirming: threading.Thread | None = None
        self._lapses_logged = 0
        self._confirm_asked = -_CONFIRM_RETRY_S

    def consumer_config(self) -> dict[str, object]:
        return self.config.kafka.client(
            fixed={
                "group.id": self.config.group_id,
                # a rebalance revokes only what moves; partition p of the other changelog
                # topics follows partition p of the lead topic
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                # the stored offset is the truth; commits only show progress to Kafka tools
                "enable.auto.commit": True,
                "auto.offset.reset": "earliest",
                "enable.partition.eof": True,  # how a restore knows it reached the end
            },
            defaults={
                "client.id": self.config.node_id,
                "fetch.wait.max.ms": 100,
                "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            },
        )

    @property
    def lead_topic(self) -> str:
        """The changelog topic whose partitions the group assigns."""
        return min(self.views)

    def _run(self) -> None:
        consumer = Consumer(self.consumer_config())
        self._consumer = consumer
        consumer.subscribe(
            [self.lead_topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        watchdog = threading.Thread(
            target=self._renew_lease, name=f"lease-watch-{self.config.node_id}", daemon=True
        )
        watchdog.start()
        while not self._stop.is_set():
            self._turned = self.lease.now()
            if self.lease.waiting():
                self._confirm(consumer)
            messages = self._consume(consumer)
            if messages:
                self._apply(messages)
            self._retry_faults(consumer)
            self._track(consumer)
            self._sweep_if_due()

    def close(self) -> None:
        confirming = self._confirming
        if confirming is not None:
            confirming.join(_CONFIRM_JOIN_S)  # a commit in flight uses the consumer
        super().close()

    def _renew_lease(self) -> None:
        self.lease.begin()
        self._turned = self.lease.now()
        while not self._stop.wait(_LEASE_TICK_S):
            self.watch()

    def watch(self) -> None:
        """One tick of the lease watchdog: renew the lease while the apply loop turns."""
        stuck_s = self.lease.now() - self._turned
        if stuck_s <= APPLY_STALL_S:
            self._stalled = False
            self.lease.renew()
            return
        if not self._stalled:
            self._stalled = True
            log.error(
                "node %s: the apply loop has not turned for %.1f s: the lease is not renewed, "
                "so ACTIVE copies answer only proved reads until it turns again and the "
                "group confirms the assignment",
                self.config.node_id,
                stuck_s,
            )

    def _confirm(self, consumer: Consumer) -> None:
        """The lease lapsed: ask the group to confirm the assignment, on a thread of its own
        (a commit waits for the coordinator, and the loop must go on applying)."""
        if self._lapses_logged != self.lease.lapses:
            self._lapses_logged = self.lease.lapses
            log.warning(
                "node %s: the lease lapsed (the process was paused or starved for %.1f s, "
                "over the %.1f s term): ACTIVE copies answer only proved reads until the "
                "group confirms the assignment",
                self.config.node_id,
                self.lease.gap_s,
                self.lease.term_s,
            )
        if self._confirming is not None and self._confirming.is_alive():
            return
        if self.lease.now() - self._confirm_asked < _CONFIRM_RETRY_S:
            return
        self._confirm_asked = self.lease.now()
        self._confirming = threading.Thread(
            target=self._commit_to_confirm,
            args=(consumer, self._confirm_asked),
            name=f"lease-{self.config.node_id}",
            daemon=True,
        )
        self._confirming.start()

    def _commit_to_confirm(self, consumer: Consumer, asked_at: float) -> None:
        """Commit the next offsets of the assigned partitions: the coordinator accepts it
        only from a member of the current generation, so success confirms the assignment
        (a fenced member gets an error, and its partitions are lost at the next poll)."""
        lead = self.lead_topic
        offsets = [
            TopicPartition(lead, tp.partition, self._positions[(lead, tp.partition)])
            for tp in list(self._assigned)
            if tp.topic == lead and (lead, tp.partition) in self._positions
        ]
        if not offsets and self.registry.partitions(Role.ACTIVE):
            return  # ACTIVE copies but no assignment to confirm: they wait for the group
        try:
            if offsets:
                consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            log.info(
                "node %s: the lease lapsed %.1f s ago and the group did not confirm the "
                "assignment (%s): ACTIVE copies refuse unproved reads until it does",
                self.config.node_id,
                self.lease.lapsed_for_s() or 0.0,
                exc.args[0] if exc.args else exc,
            )
            return
        if self.lease.confirm(asked_at):
            log.info(
                "node %s: the group confirmed the assignment after the lease lapsed: "
                "ACTIVE copies serve again",
                self.config.node_id,
            )

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Cooperative: `partitions` (of the lead topic) are only those added now, maybe none."""
        if self._outage_held:
            # the group is back: copies held through the outage go on as STANDBY copies (so
            # each partition keeps a copy serving until its new owner runs); one assigned
            # here again is claimed back from there and restores the tail
            held, self._outage_held = self._outage_held, set()
            # nobody could apply more while the broker was away: they are not behind
            kept = self._hand_over(held, behind=False)
            self._close_stores(held - kept)
            log.info(
                "node %s: the group assigns partitions again: copies %s held through the "
                "outage go on as standby copies (%s closed)",
                self.config.node_id,
                sorted(kept),
                sorted(held - kept),
            )
        added = sorted({tp.partition for tp in partitions} - self._assigned_partitions())
        if added:
            self.registry.set_state(NodeState.RESTORING)
            if self._handoff is not None:
                self._handoff.claim(set(added))
            topics = [TopicPartition(topic, p) for p in added for topic in self.views]
            self._attach(topics)
            self._assign(consumer, topics)
            self._assigned.extend(topics)
            self._restore_started = time.monotonic()
            self._restored_records = 0
            log.info("node %s: partitions %s assigned", self.config.node_id, added)
        self.registry.set_state(NodeState.RESTORING if self._restores else NodeState.RUNNING)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Stop applying the revoked partitions; their copies stay readable as STANDBY
        copies if the handoff adopts them."""
        self._give_up(consumer, partitions, behind=False)

    def _give_up(
        self, consumer: Consumer, partitions: list[TopicPartition], *, behind: bool
    ) -> None:
        """Stop applying `partitions` and offer their copies to the handoff; `behind`: the
        new owner may have applied more than they hold (the session was lost)."""
        revoked = {tp.partition for tp in partitions}
        if not revoked:
            return
        self.registry.set_state(NodeState.REBALANCING)
        consumer.incremental_unassign([tp for tp in self._assigned if tp.partition in revoked])
        self._assigned = [tp for tp in self._assigned if tp.partition not in revoked]
        kept = self._hand_over(revoked, behind=behind)
        self._close_stores(revoked - kept)
        log.info(
            "node %s: partitions %s revoked (%s kept as standby copies)",
            self.config.node_id,
            sorted(revoked),
            sorted(kept),
        )

    def _assigned_partitions(self) -> set[int]:
        return {tp.partition for tp in self._assigned}

    def _consuming(self, partition: int) -> bool:
        return any(tp.partition == partition for tp in self._assigned)

    def _hand_over(self, partitions: set[int], *, behind: bool) -> set[int]:
        """Offer the open stores of `partitions` to the handoff; returns those it adopted.
        A store left closed by a failed reopen (a full disk) is not offered: it has nothing
        to serve and its offsets cannot be read. A copy `behind` its new owner is adopted
        restoring: read only by a read that proved it current until it has caught up (a
        standby read could otherwise answer older than one its new owner gave)."""
        if self._handoff is None:
            return set()
        adopted = set()
        for partition in sorted(partitions & set(self._stores)):
            store = self._stores[partition]
            if store.closed:
                continue
            if self._handoff.adopt(partition, store, behind or partition in self._restores):
                adopted.add(partition)
                # the store, its registry entry and its fault (retried by the standby
                # replicator once it fails there too) are the standby replicator's now
                del self._stores[partition]
                self._restores.pop(partition, None)
                self._faults.pop(partition, None)
        return adopted

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """The group session lapsed: no heartbeat was answered for a session timeout. If the
        broker does not answer now either, nobody can have taken the partitions over: keep
        serving what the stores hold until the group assigns partitions again. If it
        answers, another node may own them already and have applied more than this node
        (it stood still, or was cut off): give them up like a revoke, their copies behind."""
        # a node that was paused lost its session by itself, not by a broker outage (its
        # stale connections may also make the broker look away for a moment): give up
        if not self.lease.held() or self._broker_answers(consumer):
            self._give_up(consumer, partitions, behind=True)
            return
        held = {tp.partition for tp in partitions} & set(self._stores)
        unreachable = self.registry.broker_unreachable_since_ms
        since = unreachable if unreachable is not None else self._clock() - SESSION_TIMEOUT_MS
        self.registry.set_state(NodeState.REBALANCING)
        self.registry.hold(held, since)
        self._outage_held |= held
        # the partitions of the other changelog topics were assigned by hand: unassign all
        consumer.incremental_unassign(self._assigned)
        self._assigned = []
        log.warning(
            "node %s: group session lost while the broker does not answer; partitions %s "
            "keep serving what their stores hold (lag unknown) until the group assigns "
            "partitions again",
            self.config.node_id,
            sorted(held),
        )

    def _broker_answers(self, consumer: Consumer) -> bool:
        """Whether the broker answers a metadata request within _BROKER_ANSWER_S. Asked from
        a thread of its own: this runs in a rebalance callback, inside `consume`, and a
        blocking call on the same client from the same thread clears confluent-kafka's
        per-thread call state, so the next callback of that `consume` aborts the process
        (`CallState_get: Assertion cs != NULL`)."""
        failure: list[BaseException] = []

        def ask() -> None:
            try:
                consumer.list_topics(timeout=_BROKER_ANSWER_S)
            except KafkaException as exc:
                failure.append(exc)

        asking = threading.Thread(target=ask, name=f"broker-check-{self.config.node_id}")
        asking.start()
        asking.join(_BROKER_ANSWER_S + 1.0)
        if asking.is_alive() or failure:
            why = failure[0] if failure else "no answer"
            log.info("node %s: the broker does not answer: %s", self.config.node_id, why)
            return False
        return True

    def _close_stores(self, partitions: Iterable[int]) -> None:
        closing = set(partitions)
        super()._close_stores(closing)
        if self._handoff is not None and closing:
            self._handoff.release(closing)

    def _track(self, consumer: Consumer) -> None:
        """Track end offsets and restores; RUNNING once every assigned partition is restored."""
        if not self._assigned:
            return
        self._restored_records += self._track_end_offsets(consumer, self._assigned)
        if self.registry.state is NodeState.RESTORING and not self._restores:
            elapsed = time.monotonic() - self._restore_started
            log.info(
                "node %s: restored %d records in %.1f s (%.0f records/s), RUNNING",
                self.config.node_id,
                self._restored_records,
                elapsed,
                self._restored_records / elapsed if elapsed > 0 else 0.0,
            )
            self.registry.set_state(NodeState.RUNNING)
