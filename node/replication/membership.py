"""The membership publisher: this node's MemberRecord on `statefed.members`.

A thread publishes the record (key = node id) every heartbeat and at once on every change
of state or held partitions; `stop()` publishes a tombstone so readers drop the node
without waiting for its heartbeats to age out. With the cluster secret, every record and
the tombstone carry its signature (header `statefed-signature`, runtime.trust).

The acknowledgements of these records are how the node knows the broker answers: a record
still unacknowledged after `UNANSWERED_HEARTBEATS` heartbeats (a healthy broker answers
within one) means the broker has not answered since the newest acknowledged record was
sent, and the registry is told so; every copy's freshness then says its lag is unknown.

The gaps between heartbeats are how the node knows it stood still (SIGSTOP, a paused VM):
a gap of `STALL_HEARTBEATS` heartbeats (the silence after which a gateway judges the node
dead) means every end offset is as old as the last heartbeat before it, so no record may
report a lag from them until the consumers fetched again (node.changelog.partitions `Doubt`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from confluent_kafka import KafkaError, Message, Producer

from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.times import iso_ms
from runtime.trust import ClusterSecret
from schema import MEMBER_SIGNATURE_HEADER, MEMBERS_TOPIC, MemberRecord, encode_member

__all__ = ["MembershipPublisher"]

log = logging.getLogger(__name__)

UNANSWERED_HEARTBEATS = 2
STALL_HEARTBEATS = 3
STALL_MIN_S = 2.0  # a busy machine may delay a short heartbeat this much without a stall


class MembershipPublisher:
    """Publishes `record()` from a thread; `start()`, then `stop()` (which sends the tombstone)."""

    def __init__(
        self,
        config: NodeConfig,
        registry: PartitionRegistry,
        *,
        clock: Callable[[], float] = time.time,
        secret: ClusterSecret | None = None,
        incarnation: str = "",
    ):
        self.config = config
        self.incarnation = incarnation  # this node process's (NodeApp's), in every record
        self.registry = registry
        self._clock = clock
        self._secret = secret
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self.published = 0
        self._failing = False
        # when each record not yet acknowledged was sent (ms, oldest first; one partition,
        # so reports come in order), and when the newest acknowledged one was
        self._unacked: deque[int] = deque()
        self._acked_ms: int | None = None
        # when the previous heartbeat ran (monotonic s, wall ms), to see a stall
        self._beat: tuple[float, int] | None = None

    def record(self) -> MemberRecord:
        """This node's membership record as of now."""
        return MemberRecord(
            node_id=self.config.node_id,
            url=self.config.url,
            state=self.registry.state,
            heartbeat_ms=int(self._clock() * 1000),
            heartbeat_interval_ms=self.config.heartbeat_ms,
            partitions=tuple(self.registry.statuses()),
            incarnation=self.incarnation,
        )

    def producer_config(self) -> dict[str, object]:
        """The membership producer's librdkafka configuration."""
        return self.config.kafka.client(
            defaults={"client.id": f"{self.config.node_id}-members", "linger.ms": 0},
        )

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("membership publisher already started")
        self._producer = Producer(self.producer_config())
        self._thread = threading.Thread(
            target=self._run, name=f"membership-{self.config.node_id}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop heartbeating and publish the tombstone (waits up to `timeout_s` for it)."""
        self._stop.set()
        self.registry.changed.set()  # wake the thread from its heartbeat wait
        if self._thread is not None:
            self._thread.join(timeout_s)
        producer, self._producer = self._producer, None
        if producer is None:
            return
        self._produce(producer, None)
        if producer.flush(timeout_s) > 0:
            log.warning("node %s: membership tombstone not delivered", self.config.node_id)

    def _run(self) -> None:
        producer = self._producer
        assert producer is not None
        interval_s = self.config.heartbeat_ms / 1000
        while not self._stop.is_set():
            # clear before reading the state: a change after this wakes the next wait
            self.registry.changed.clear()
            self._judge_stall(time.monotonic(), int(self._clock() * 1000))
            try:
                self._produce(producer, encode_member(self.record()))
            except Exception:  # a full queue or a broker hiccup: try again next heartbeat
                log.exception("node %s: publishing membership failed", self.config.node_id)
            producer.poll(0)
            self._judge_broker()
            self.registry.changed.wait(interval_s)

    def stalled_since_ms(self, now_s: float) -> int | None:
        """When the previous heartbeat ran (wall ms), if the node stood still since: the
        gap since then is `STALL_HEARTBEATS` heartbeats and at least `STALL_MIN_S`."""
        if self._beat is None:
            return None
        limit_s = max(STALL_HEARTBEATS * self.config.heartbeat_ms / 1000, STALL_MIN_S)
        last_s, last_ms = self._beat
        return last_ms if now_s - last_s > limit_s else None

    def _judge_stall(self, now_s: float, now_ms: int) -> None:
        since = self.stalled_since_ms(now_s)
        self._beat = (now_s, now_ms)
        if since is None:
            return
        self.registry.doubt_ends(None, since, lapses=True)
        log.warning(
            "node %s: stood still for %.1f s (no heartbeat since %s); every copy's lag is "
            "unknown until its consumer has fetched again",
            self.config.node_id,
            (now_ms - since) / 1000,
            iso_ms(since),
        )

    def unanswered_since_ms(self, now_ms: int) -> int | None:
        """Since when the broker has not answered, judged from the acknowledgements of
        membership records; None while it answers."""
        limit_ms = UNANSWERED_HEARTBEATS * self.config.heartbeat_ms
        if not self._unacked or now_ms - self._unacked[0] <= limit_ms:
            return None
        return self._acked_ms if self._acked_ms is not None else self._unacked[0]

    def _judge_broker(self) -> None:
        before = self.registry.broker_unreachable_since_ms
        since = self.unanswered_since_ms(int(self._clock() * 1000))
        if (since is None) == (before is None):
            return
        self.registry.set_broker_unreachable_since(since)
        if since is not None:
            log.warning(
                "node %s: the broker has not acknowledged membership records for %d "
                "heartbeats; serving what the stores hold, with the lag unknown since %s",
                self.config.node_id,
                UNANSWERED_HEARTBEATS,
                iso_ms(since),
            )
        else:
            log.info("node %s: the broker answers again", self.config.node_id)

    def _produce(self, producer: Producer, value: bytes | None) -> None:
        headers: list[tuple[str, str | bytes | None]] | None = None
        if self._secret is not None:
            now_ms = int(self._clock() * 1000)
            signature = self._secret.sign_member(self.config.node_id, value, now_ms)
            headers = [(MEMBER_SIGNATURE_HEADER, signature)]
        producer.produce(
            MEMBERS_TOPIC,
            key=self.config.node_id,
            value=value,
            headers=headers,
            on_delivery=self._delivered,
        )
        self._unacked.append(int(self._clock() * 1000))
        self.published += 1

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        sent_ms = self._unacked.popleft() if self._unacked else None
        if error is None and sent_ms is not None:
            self._acked_ms = sent_ms
        # log transitions only: a broker outage would otherwise log every heartbeat
        if error is not None and not self._failing:
            log.warning("node %s: membership records not delivered: %s", self.config.node_id, error)
        elif error is None and self._failing:
            log.info("node %s: membership records delivered again", self.config.node_id)
        self._failing = error is not None
