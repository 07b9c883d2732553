"""Following `statefed.members`: a background thread that turns membership records into
routing tables and publishes them to a `RoutingFeed` on the event loop.

Reading starts `lookback_ms` back in time (`find_start_offset`: the broker's time index),
not at the beginning: even compacted (as `statefed topics` creates it), the topic keeps
the last record of every node that ever died without a tombstone, and compaction never
touches the active segment (a week of heartbeats by default), while a node silent for
longer than the lookback is dead anyway.

With the cluster secret, only records and tombstones signed with it count (runtime.trust):
a record without a valid signature is ignored with a WARNING naming its node id, so that
nobody who can write to the topic can make the gateway route queries to their URL; a
signed record or tombstone older than the one held for its node (a replay) is ignored too.

When the broker stops answering (down, frozen, cut off), membership brings no news and
every node would look dead after 3 heartbeats. So node silence is judged as of the last
time the broker answered the reader (`FeedWatch`): a record, or, when every node has been
quiet for a heartbeat, a probe of the topic's offsets. While probes go unanswered the
table keeps the liveness of that time and says since when it is stale; once the broker
answers again, the silence of the outage is not counted against any node.

Heartbeat times are the nodes' clocks', and silence is judged on the gateway's: a node's
clock a few seconds behind would make it dead, one ahead would make every other node
suspect. So a record read live (written after the reader started) tells how far the
node's clock is from the gateway's (`runtime.clockoffsets`), and its heartbeat is taken
on the gateway's clock. A backlog read late (after a pause of the gateway) keeps its
records' times: their delay does not raise the offset.

The partition count of each view comes from the broker's metadata, asked between polls
while a view's changelog topic is missing (not created yet, or the broker not answering):
one request a round, waiting no longer than a probe, so membership is read and probed on
meanwhile; a view found missing is warned about once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition
from confluent_kafka.admin import ClusterMetadata

from gateway.cluster.routing import Liveness, RoutingFeed, RoutingTable, build_routing_table
from runtime.clock import wall_clock_ms
from runtime.clockoffsets import ClockOffsets
from runtime.kafka import KafkaSettings
from runtime.retrylog import RetryLog
from runtime.trust import ClusterSecret, KafkaHeaders, SignedMembers
from runtime.watermarks import watermarks
from schema import CATALOGUE, MEMBERS_TOPIC, MemberRecord, View, decode_member

__all__ = ["FeedWatch", "MemberDirectory", "MembershipReader", "find_start_offset"]

log = logging.getLogger(__name__)

_FETCH_WAIT_MS = 100  # how long membership news may wait in the broker
_RETRY_S = 1.0
# how long a probe waits for the broker before the feed counts as stalled, and a request
# for the partition counts (membership is not read meanwhile)
_ANSWER_TIMEOUT_S = 1.0
_CONNECT_TIMEOUT_MS = 5000
# the longest wait between connection attempts; librdkafka's default (10 s) let a reader
# whose attempts failed through a 30 s outage go on reading nothing for 10 s after it
_RECONNECT_MAX_MS = 1000
_DEFAULT_HEARTBEAT_MS = 1000  # how quiet the feed may be before a probe, with no records


class MemberDirectory:
    """The newest record of every node that has not left, from records applied in order;
    with `secret`, only from records signed with it."""

    def __init__(
        self,
        secret: ClusterSecret | None = None,
        wall: Callable[[], int] = wall_clock_ms,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.records: dict[str, MemberRecord] = {}  # heartbeats on the gateway's clock
        self.offsets = ClockOffsets(wall, monotonic)
        ignored = "membership record of node {node} ignored, not routed to"
        self._signed = None if secret is None else SignedMembers(secret, log, ignored)

    def apply(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: KafkaHeaders = None,
        received_ms: int | None = None,
    ) -> bool:
        """Apply one record of the members topic; a null value (tombstone) means the node
        left. `received_ms`: when a record read live arrived (None: one of the backlog)."""
        if key is None:
            log.warning("membership record without a key ignored")
            return False
        node_id = key.decode("utf-8", errors="replace")
        if self._signed is not None and not self._signed.authentic(node_id, value, headers):
            return False
        if value is None:
            self.offsets.forget(node_id)
            return self.records.pop(node_id, None) is not None
        try:
            record = decode_member(value)
        except ValueError as exc:
            log.warning("membership record of node %s ignored: %s", node_id, exc)
            return False
        if received_ms is not None:
            self.offsets.heard(node_id, record.heartbeat_ms, received_ms, record.incarnation)
        heartbeat_ms = self.offsets.on_own_clock(node_id, record.heartbeat_ms)
        self.records[node_id] = dataclasses.replace(record, heartbeat_ms=heartbeat_ms)
        return True

    def prune(self, now_ms: int, keep_ms: int, liveness: Liveness | None = None) -> bool:
        """Forget dead nodes silent for longer than `keep_ms` (a fresh reader would not see
        them either); silence as `liveness` judges it (default: as of `now_ms`)."""
        liveness = liveness or Liveness(now_ms)
        stale = [
            node_id
            for node_id, record in self.records.items()
            if liveness.silence_ms(record.heartbeat_ms) > keep_ms and not liveness.alive(record)
        ]
        for node_id in stale:
            del self.records[node_id]
            self.offsets.forget(node_id)
        if self._signed is not None:
            self._signed.forget(
                lambda node, signed: node in self.records or now_ms - signed <= keep_ms
            )
        return bool(stale)


def find_start_offset(
    consumer: Consumer, topic: str, target_ms: int, stopping: threading.Event | None = None
) -> int:
    """The first offset of partition 0 of `topic` whose record is at least as new as
    `target_ms` (by the broker's time index), or the end when none is; given up when
    `stopping` is set while the broker does not answer."""
    # the end first: a record produced after the time lookup is then read all the same
    _low, end = watermarks(consumer, TopicPartition(topic, 0), stopping or threading.Event())
    (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, target_ms)], timeout=10)
    if found.error is not None:
        raise KafkaException(found.error)
    offset = found.offset
    return offset if 0 <= offset <= end else end  # -1: no record that new


class FeedWatch:
    """Whether the membership feed works: when the broker last answered the reader, and
    the stall it is in (or was last in). `liveness()` is how the routing table judges
    node silence from it."""

    def __init__(self, now_ms: int) -> None:
        self.answered_ms = now_ms
        self.stalled_since_ms: int | None = None
        self._last_stall: tuple[int, int] | None = None
        self._probed = time.monotonic()  # a rate limit: real time, whatever the clock says

    def answered(self, now_ms: int) -> None:
        """The broker answered at `now_ms` (a record arrived, or a probe was answered)."""
        if self.stalled_since_ms is not None:
            log.warning(
                "membership: the broker answers again after %.1f s; node liveness is judged "
                "again, the silence of the outage not counted",
                (now_ms - self.stalled_since_ms) / 1000,
            )
            self._last_stall = (self.stalled_since_ms, now_ms)
            self.stalled_since_ms = None
        self.answered_ms = max(self.answered_ms, now_ms)

    def unanswered(self, now_ms: int) -> None:
        """A probe went unanswered: the feed is stalled since the broker last answered."""
        if self.stalled_since_ms is None:
            self.stalled_since_ms = self.answered_ms
            log.warning(
                "membership: the broker has not answered for %.1f s; keeping the routing "
                "table of then and judging no node dead until it answers again",
                (now_ms - self.answered_ms) / 1000,
            )

    def probe_due(self, now_ms: int, quiet_ms: int) -> bool:
        """Whether to ask the broker now: no answer for `quiet_ms` and no probe for as long."""
        probed_s = time.monotonic() - self._probed
        if now_ms - self.answered_ms < quiet_ms or probed_s < quiet_ms / 1000:
            return False
        self._probed = time.monotonic()
        return True

    def liveness(self) -> Liveness:
        return Liveness(self.answered_ms, self.stalled_since_ms, self._last_stall)


class MembershipReader:
    """Reads membership in a thread and publishes a routing table on every change.

    Nothing is opened before `start`; `stop` closes the consumer and joins the thread.
    """

    def __init__(
        self,
        kafka: str | KafkaSettings,
        feed: RoutingFeed,
        *,
        lookback_ms: int,
        catalogue: Iterable[View] = CATALOGUE,
        partition_counts: Callable[[], Mapping[str, int]] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        topic: str = MEMBERS_TOPIC,
        poll_s: float = 0.1,
        secret: ClusterSecret | None = None,
    ) -> None:
        self._kafka = KafkaSettings.of(kafka)
        self._feed = feed
        self._lookback_ms = lookback_ms
        self._views = tuple(catalogue)
        self._partition_counts = partition_counts
        self._clock = clock
        self._topic = topic
        self._poll_s = poll_s
        self._secret = secret
        self._retries = RetryLog(log, topic)
        # the topics' metadata, for the partition counts of the views not routed yet
        self._counts_retries = RetryLog(log, "the changelog topics' metadata")
        self._missing_said: set[str] = set()  # views whose missing topic was warned about
        self._stopping = threading.Event()
        self._poked = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start following membership; tables are published on `loop`."""
        self._loop = loop
        self._feed.on_refresh(self._poked.set)
        self._thread = threading.Thread(target=self._run, name="statefed-members", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.error("membership reader did not stop within %s s", timeout_s)

    def consumer_config(self) -> dict[str, object]:
        """The librdkafka configuration of the consumers reading membership."""
        return self._kafka.client(
            fixed={
                # assign() only: the group id is never joined, but librdkafka wants one
                "group.id": f"statefed-gateway-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
            },
            defaults={
                "log.connection.close": False,
                "fetch.wait.max.ms": _FETCH_WAIT_MS,
                # a connection attempt made while the broker was stopped can stay stuck
                # after it is back (librdkafka's default gives up after 30 s), and routing
                # stays stale meanwhile: try a fresh connection after 5 s instead
                "socket.connection.setup.timeout.ms": _CONNECT_TIMEOUT_MS,
                "reconnect.backoff.max.ms": _RECONNECT_MAX_MS,
            },
        )

    def _consumer(self) -> Consumer:
        return Consumer(self.consumer_config())

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                start = self._start_offset()
                self._retries.read()
                self._follow(start)
            except Exception as exc:  # broker down or topic missing: log, wait, start over
                if self._stopping.is_set():
                    break  # told to stop while the broker did not answer: nothing to say
                self._retries.failed(exc, self._kafka.hint(exc), _RETRY_S)
                self._stopping.wait(_RETRY_S)

    def _start_offset(self) -> int:
        consumer = self._consumer()
        try:
            target_ms = self._clock() - self._lookback_ms
            return find_start_offset(consumer, self._topic, target_ms, self._stopping)
        finally:
            consumer.close()

    def _follow(self, start: int) -> None:
        consumer = self._consumer()
        try:
            # records from the end at the start on are read live: their arrival is news
            _, live_from = consumer.get_watermark_offsets(
                TopicPartition(self._topic, 0), timeout=_CONNECT_TIMEOUT_MS / 1000
            )
            consumer.assign([TopicPartition(self._topic, 0, start)])
            self._publish_changes(consumer, live_from)
        finally:
            consumer.close()

    def _publish_changes(self, consumer: Consumer, live_from: int) -> None:
        directory = MemberDirectory(self._secret, self._clock)
        watch = FeedWatch(self._clock())
        counts: dict[str, int] = {}
        counts_due = 0.0
        published: tuple[object, ...] | None = None
        while not self._stopping.is_set():
            if len(counts) < len(self._views) and time.monotonic() >= counts_due:
                counts.update(self._read_counts(consumer, counts))
                counts_due = time.monotonic() + _RETRY_S
            messages = consumer.consume(500, 0 if self._poked.is_set() else self._poll_s)
            self._poked.clear()
            if self._apply(directory, messages, live_from):
                watch.answered(self._clock())
            elif watch.probe_due(self._clock(), _quiet_ms(directory)):
                if self._broker_answers(consumer):
                    watch.answered(self._clock())
                else:
                    watch.unanswered(self._clock())
            now, liveness = self._clock(), watch.liveness()
            directory.prune(now, self._lookback_ms, liveness)
            table = build_routing_table(directory.records, counts, now, liveness)
            fingerprint = _fingerprint(table)
            if fingerprint != published:
                published = fingerprint
                self._publish(table)

    def _apply(self, directory: MemberDirectory, messages: list[Message], live_from: int) -> int:
        """Apply a poll's records, those from `live_from` on as read live; returns how many
        arrived (news from the broker)."""
        records = 0
        for message in messages:
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise KafkaException(error)
                log.warning("membership topic %s: %s", self._topic, error)
                continue
            records += 1
            offset = message.offset()
            live = offset is not None and offset >= live_from
            received_ms = self._clock() if live else None
            directory.apply(message.key(), message.value(), message.headers(), received_ms)
        return records

    def _broker_answers(self, consumer: Consumer) -> bool:
        """Whether the broker answers a request for the topic's offsets in time."""
        try:
            consumer.get_watermark_offsets(
                TopicPartition(self._topic, 0), timeout=_ANSWER_TIMEOUT_S
            )
        except KafkaException as exc:
            log.debug("membership: probe of %s unanswered: %s", self._topic, exc)
            return False
        return True

    def _read_counts(self, consumer: Consumer, known: Mapping[str, int]) -> dict[str, int]:
        """P of the views not in `known` whose changelog topic has partitions now; the
        others are asked again next round (their queries say ROUTING_NOT_READY)."""
        missing = [view for view in self._views if view.name not in known]
        try:
            if self._partition_counts is not None:
                found = dict(self._partition_counts())
            else:  # one request for every topic, however many views are missing
                found = _changelog_counts(consumer.list_topics(timeout=_ANSWER_TIMEOUT_S), missing)
        except Exception as exc:
            self._counts_retries.failed(exc, self._kafka.hint(exc), _RETRY_S)
            return {}
        self._counts_retries.read()
        self._say_missing([view for view in missing if view.name not in found])
        counts = {view.name: found[view.name] for view in missing if view.name in found}
        for name in self._missing_said & counts.keys():
            self._missing_said.discard(name)
            log.info("view %s: partition count %d read, its queries are routed", name, counts[name])
        return counts

    def _say_missing(self, views: Sequence[View]) -> None:
        """A WARNING the first time a view's changelog topic is found missing, then debug."""
        for view in views:
            if view.name in self._missing_said:
                log.debug(
                    "view %s: changelog topic %s still missing", view.name, view.changelog_topic
                )
                continue
            self._missing_said.add(view.name)
            log.warning(
                "view %s: changelog topic %s not found on %s (or without partitions): its "
                "queries say ROUTING_NOT_READY until it is created (`statefed topics`); "
                "looked for again every %s s, said at debug level",
                view.name,
                view.changelog_topic,
                self._kafka.bootstrap,
                _RETRY_S,
            )

    def _publish(self, table: RoutingTable) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._feed.publish, table)
        except RuntimeError:  # the loop closed while stopping
            self._stopping.set()


def _fingerprint(table: RoutingTable) -> tuple[object, ...]:
    """What makes two tables different for routing and for the cluster view: every node as
    its newest record describes it (a node's records of one millisecond may differ in its
    partitions: a revoke publishes ACTIVE, then STANDBY), the counts and the staleness."""
    nodes = tuple(sorted(table.nodes.values(), key=lambda node: node.node_id))
    return (nodes, tuple(sorted(table.partition_counts.items())), table.stale_since_ms)


def _changelog_counts(metadata: ClusterMetadata, views: Iterable[View]) -> dict[str, int]:
    """P of each of `views` whose changelog topic `metadata` shows with partitions."""
    counts: dict[str, int] = {}
    for view in views:
        topic = metadata.topics.get(view.changelog_topic)
        if topic is not None and topic.error is None and topic.partitions:
            counts[view.name] = len(topic.partitions)
    return counts


def _quiet_ms(directory: MemberDirectory) -> int:
    """How long every node may be quiet before the reader asks the broker: one heartbeat."""
    intervals = [r.heartbeat_interval_ms for r in directory.records.values()]
    return min(intervals, default=_DEFAULT_HEARTBEAT_MS)
