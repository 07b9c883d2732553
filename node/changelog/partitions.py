"""The partition copies a node holds, shared by the materializer thread and the readers.

The materializer attaches a partition's open store when the group assigns it and
detaches it before closing it; readers go through `read`, which holds the registry lock,
or `read_long`, which pins the store instead (`detach` and `exclusive` wait for its pins to
go, whichever copy holds the store by then), so a store is never closed under a running
read, and a copy still restoring is not read
(it may be behind what was already served from it or its previous holder), nor is one
whose store is closed (a reopen after a failed write that failed too). The registry also
keeps the node state, per-partition applied and end offsets (for lag, freshness and
membership), each copy's store error (a full disk), the damaged stores set aside, and
since when the lag is unknown: for every copy while the broker does not answer the node,
for a copy held after the group lost its assignment (node.changelog.materializer) until it is
given up, and while a copy's end offsets are doubted (`Doubt`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from node.changelog.lease import Lease
from node.errors import AWAITING_GROUP, LEASE_LAPSED, STORE_DAMAGED, TopologyError
from node.storage.store import READ_DAMAGE, PartitionStore
from schema import NodeState, PartitionStatus, Role

__all__ = ["CopyOffsets", "Doubt", "PartitionRegistry", "SetAside"]

log = logging.getLogger(__name__)

T = TypeVar("T")


# a doubt raised by a stall lapses after this much running: the consumer's fetches in that
# time refresh every cached high watermark (librdkafka fetches at least every 0.5 s)
STALL_DOUBT_S = 2.0


@dataclass(frozen=True)
class Doubt:
    """A copy's end offsets may be old, so its lag is unknown since `since_ms`: either the
    copy was just attached (a consumer keeps a partition's cached high watermark across
    unassign and assign) until a fetch for each of its topics came back, or the node
    stood still (SIGSTOP, a paused VM) and its end offsets are as of then, until
    `STALL_DOUBT_S` after `raised_s` (monotonic)."""

    since_ms: int
    raised_s: float
    lapses: bool

    def lapsed(self, now_s: float) -> bool:
        return self.lapses and now_s - self.raised_s >= STALL_DOUBT_S


@dataclass
class _Copy:
    store: PartitionStore
    role: Role
    applied: dict[str, int]
    # the offsets a read may already see: raised before a batch is written (`applying`),
    # so the positions a read reports are never behind the rows it read (node read tokens)
    visible: dict[str, int] = field(default_factory=dict)
    # high watermark per changelog topic from the latest fetch; -1 until one is seen
    end: dict[str, int] = field(default_factory=dict)
    # catching up since it was attached: records done / to do (0 until the target is known)
    restoring: bool = False
    restore_done: int = 0
    restore_total: int = 0
    # held after its assignment was lost: nothing is fetched for it since
    held_since_ms: int | None = None
    # why the store cannot be written now (applying is paused and retried), else None
    store_error: str | None = None
    doubt: Doubt | None = None
    # why a read found the store damaged: no read until the copy is rebuilt
    damaged: str | None = None
    # the last status built and the broker outage it was built for, until a field above
    # changes (`forget_status`): every read reports a status, and building one cost a 1-key
    # lookup ~4 us
    _built: tuple[int | None, PartitionStatus] | None = field(default=None, repr=False)

    def forget_status(self) -> None:
        """A field changed: the next status is built anew."""
        self._built = None

    def status(self, partition: int, unreachable_since_ms: int | None) -> PartitionStatus:
        """The copy's status (`partition` is the one it is held for)."""
        built = self._built
        # a doubt may lapse with time alone: its status is built on every read
        if built is not None and built[0] == unreachable_since_ms and self.doubt is None:
            return built[1]
        status = self._build_status(partition, unreachable_since_ms)
        self._built = (unreachable_since_ms, status)
        return status

    def _build_status(self, partition: int, unreachable_since_ms: int | None) -> PartitionStatus:
        applied = sum(self.applied.values())
        end = sum(max(self.end.get(t, -1), n) for t, n in self.applied.items())
        if self.doubt is not None and self.doubt.lapsed(time.monotonic()):
            self.doubt = None
        doubted = None if self.doubt is None else self.doubt.since_ms
        unknown = [t for t in (self.held_since_ms, unreachable_since_ms, doubted) if t is not None]
        return PartitionStatus(
            partition,
            self.role,
            applied,
            end,
            restoring=self.restoring,
            restore_done=self.restore_done,
            restore_total=self.restore_total,
            lag_unknown_since_ms=min(unknown, default=None),
            store_error=self.store_error,
        )


@dataclass(frozen=True)
class CopyOffsets:
    """A held copy's offsets per changelog topic: next to apply, and the end (high
    watermark) from the latest fetch (-1 until one is seen), for `/metrics`."""

    partition: int
    role: Role
    applied: dict[str, int]
    end: dict[str, int]


@dataclass(frozen=True)
class SetAside:
    """A damaged store moved out of the way; the partition was rebuilt from the changelog."""

    partition: int
    reason: str
    moved_to: str
    at_ms: int


def _readable(
    copy: _Copy | None,
    roles: Collection[Role],
    proved: Mapping[str, int] | None = None,
    lease: Lease | None = None,
    floor: Mapping[str, int] | None = None,
    stranded: bool = False,
) -> bool:
    # a restoring copy may be far behind what its previous holder served: reading it
    # could answer a count lower than one already given, so it is not held yet, unless
    # the read proved it current (node.reads.currency) and it still has applied what was proved;
    # an ACTIVE copy of a node whose lease lapsed (node.changelog.lease) may have moved, and
    # one below the `floor` a copy of the partition here had applied before (`_floors`) would answer
    # older than this node did, and a copy `stranded` after a broker outage (`_stranded`)
    # may have a newer owner: all are held on the same terms; a closed store (a reopen
    # after a failed write that failed too) is not held either
    if copy is None or copy.role not in roles or copy.store.closed or copy.damaged:
        return False
    below = floor is not None and any(copy.applied.get(t, 0) < n for t, n in floor.items())
    leased = copy.role is not Role.ACTIVE or (not stranded and (lease is None or lease.held()))
    if not copy.restoring and not below and leased:
        return True
    return proved is not None and all(copy.applied.get(t, 0) >= n for t, n in proved.items())


class PartitionRegistry:
    """Thread-safe table of held partition copies, the node state and topic layout."""

    def __init__(self, node_id: str, lease: Lease | None = None):
        self.node_id = node_id
        # None: no consumer group assigns the ACTIVE copies (a node under test)
        self.lease = lease
        # per partition, the offsets (per topic) a copy held here had applied when it was
        # let go or rebuilt: a later copy answers no read below them, so this node never
        # answers older than it did; dropped once the copy held has reached it
        self._floors: dict[int, dict[str, int]] = {}
        self._damaged: dict[int, str] = {}  # found by reads, not yet taken by the holder
        # set on every change of state or held partitions; the membership publisher waits on it
        self.changed = threading.Event()
        self._lock = threading.Lock()
        self._unpinned = threading.Condition(self._lock)  # a store's last pin went
        # long reads running without the lock (`read_long`), by the id of the store they
        # read: a store handed to another copy (a revoked copy a standby adopts) stays pinned
        self._pins: dict[int, int] = {}
        self._copies: dict[int, _Copy] = {}
        self._state = NodeState.STARTING
        self._partition_counts: dict[str, int] = {}
        self._unreachable_since_ms: int | None = None
        self._set_aside: list[SetAside] = []
        # counted for /metrics: reads of a held copy, failed writes per partition
        self.reads = 0
        self.store_errors: dict[int, int] = {}

    def set_partition_counts(self, counts: Mapping[str, int]) -> None:
        """The partition count of each changelog topic, from topic metadata."""
        with self._lock:
            self._partition_counts = dict(counts)

    def partition_count(self, topic: str) -> int:
        count = self._partition_counts.get(topic)
        if count is None:
            raise TopologyError(f"partition count of {topic} is not known yet on {self.node_id}")
        return count

    @property
    def state(self) -> NodeState:
        return self._state

    def set_state(self, state: NodeState) -> None:
        with self._lock:
            changed = state is not self._state
            self._state = state
        if changed:
            self.changed.set()

    @property
    def broker_unreachable_since_ms(self) -> int | None:
        """Since when the broker has not answered this node; None while it answers."""
        return self._unreachable_since_ms

    def set_broker_unreachable_since(self, since_ms: int | None) -> None:
        """Since when the broker has not answered (None: it answers): the lag of every copy
        is unknown since then."""
        with self._lock:
            self._unreachable_since_ms = since_ms

    def hold(self, partitions: Collection[int], since_ms: int) -> None:
        """Keep serving `partitions`, whose assignment was lost at a time nothing could
        fetch for them: their lag is unknown since `since_ms`, until they are detached. They
        serve only while the broker does not answer (`_stranded`), which the loss showed:
        if the membership heartbeats have not noticed yet, the outage starts at `since_ms`."""
        with self._lock:
            if self._unreachable_since_ms is None:
                self._unreachable_since_ms = since_ms
            for partition in partitions:
                copy = self._copies.get(partition)
                if copy is not None:
                    copy.held_since_ms = since_ms
                    copy.forget_status()
        self.changed.set()

    def doubt_ends(self, partitions: Collection[int] | None, since_ms: int, lapses: bool) -> None:
        """Doubt the end offsets of `partitions` (None: of every copy) since `since_ms`: see
        `Doubt`; one that `lapses` ends by itself, the others at `trust_ends`."""
        raised = Doubt(since_ms, time.monotonic(), lapses)
        with self._lock:
            for partition, copy in self._copies.items():
                if partitions is not None and partition not in partitions:
                    continue
                # a stall's doubt does not replace one that ends at trust_ends only
                if copy.doubt is None or copy.doubt.lapses or not lapses:
                    copy.doubt = raised
                    copy.forget_status()
        self.changed.set()

    def trust_ends(self, partition: int) -> None:
        """A fetch for each topic of `partition` came back after it was attached: its end
        offsets are current (a stall's doubt still runs its course)."""
        with self._lock:
            copy = self._copies.get(partition)
            if copy is not None and copy.doubt is not None and not copy.doubt.lapses:
                copy.doubt = None
                copy.forget_status()
        self.changed.set()

    def attach(
        self,
        partition: int,
        store: PartitionStore,
        role: Role,
        applied: Mapping[str, int],
        *,
        restoring: bool = False,
    ) -> None:
        """Serve `partition` from the open `store`; `applied` = next offset of each topic."""
        with self._lock:
            copy = _Copy(store, role, dict(applied), dict(applied), restoring=restoring)
            self._copies[partition] = copy
        self.changed.set()

    def detach(self, partition: int) -> PartitionStore | None:
        """Stop serving `partition`; waits for running reads, then returns its store."""
        with self._lock:
            copy = self._copies.pop(partition, None)
            if copy is not None:
                self._raise_floor(partition, copy.applied)
                self._wait_unpinned(copy.store)
        self.changed.set()
        return None if copy is None else copy.store

    def _raise_floor(self, partition: int, applied: Mapping[str, int]) -> None:
        floor = self._floors.setdefault(partition, {})
        for topic, offset in applied.items():
            floor[topic] = max(floor.get(topic, 0), offset)

    def applying(self, partition: int, offsets: Mapping[str, int]) -> None:
        """A batch up to `offsets` is about to be written to `partition`'s store: reads
        from now on may see it, so the positions they report cover it."""
        with self._lock:
            copy = self._copies.get(partition)
            if copy is not None:
                _raise(copy.visible, offsets)

    def not_applied(self, partition: int) -> None:
        """The batch `applying` announced was not written (a store fault writes nothing):
        reads see, and report, only what the store holds."""
        with self._lock:
            copy = self._copies.get(partition)
            if copy is not None:
                copy.visible = dict(copy.applied)

    def record_applied(self, partition: int, offsets: Mapping[str, int]) -> None:
        with self._lock:
            copy = self._copies.get(partition)
            if copy is not None:
                copy.applied.update(offsets)
                _raise(copy.visible, offsets)
                copy.forget_status()
                floor = self._floors.get(partition)
                if floor is not None and all(copy.applied.get(t, 0) >= n for t, n in floor.items()):
                    del self._floors[partition]  # reached: reads need not compare any more

    def record_end(self, partition: int, topic: str, end_offset: int) -> None:
        with self._lock:
            copy = self._copies.get(partition)
            if copy is not None and copy.end.get(topic) != end_offset:
                copy.end[topic] = end_offset
                copy.forget_status()

    def record_restore(self, partition: int, done: int, total: int, restoring: bool) -> None:
        """Restore progress of `partition`: records caught up of `total`; publishes the end."""
        with self._lock:
            copy = self._copies.get(partition)
            if copy is None:
                return
            finished = copy.restoring and not restoring
            copy.restoring, copy.restore_done, copy.restore_total = restoring, done, total
            copy.forget_status()
        if finished:
            self.changed.set()

    def record_store_error(self, partition: int, error: str | None) -> None:
        """Why `partition`'s store cannot be written now; None once it can again."""
        with self._lock:
            if error is not None:
                self.store_errors[partition] = self.store_errors.get(partition, 0) + 1
            copy = self._copies.get(partition)
            if copy is None or copy.store_error == error:
                return
            copy.store_error = error
            copy.forget_status()
        self.changed.set()

    def restart_restore(self, partition: int, applied: Mapping[str, int]) -> None:
        """`partition` restores again from `applied` (its store was rebuilt empty)."""
        with self._lock:
            copy = self._copies.get(partition)
            if copy is not None:
                self._raise_floor(partition, copy.applied)
                copy.applied, copy.visible = dict(applied), dict(applied)
                copy.damaged = None  # rebuilt
                copy.restoring, copy.restore_done, copy.restore_total = True, 0, 0
                copy.forget_status()
        self.changed.set()

    def exclusive(self, partition: int, action: Callable[[PartitionStore], T]) -> T | None:
        """`action(store)` of `partition` with no read running (to close and reopen it);
        None when `partition` is not held. `action` must not call the registry."""
        with self._lock:
            # the wait lets the lock go: the copy held once it ends is the one acted on
            self._unpinned.wait_for(lambda: not self._pinned(self._copies.get(partition)))
            copy = self._copies.get(partition)
            return None if copy is None else action(copy.store)

    def _pinned(self, copy: _Copy | None) -> bool:
        return copy is not None and id(copy.store) in self._pins

    def _wait_unpinned(self, store: PartitionStore) -> None:
        """Wait (under the lock, which the wait releases) until no long read reads `store`."""
        self._unpinned.wait_for(lambda: id(store) not in self._pins)

    def record_set_aside(self, entry: SetAside) -> None:
        with self._lock:
            self._set_aside.append(entry)

    def set_aside(self) -> list[SetAside]:
        """The damaged stores moved aside since this node started, oldest first."""
        with self._lock:
            return list(self._set_aside)

    def read(
        self,
        partition: int,
        reader: Callable[[PartitionStore], T],
        roles: Collection[Role] = (Role.ACTIVE,),
        proved: Mapping[str, int] | None = None,
    ) -> tuple[T, PartitionStatus] | None:
        """`reader(store)` and the partition's status, or None when `partition` is not held
        in one of `roles`, or is still restoring and has not applied the `proved` offsets
        (per topic) of a read that proved it current."""
        found = self.read_at(partition, reader, roles, proved)
        return None if found is None else (found[0], found[1])

    def read_at(
        self,
        partition: int,
        reader: Callable[[PartitionStore], T],
        roles: Collection[Role] = (Role.ACTIVE,),
        proved: Mapping[str, int] | None = None,
    ) -> tuple[T, PartitionStatus, dict[str, int], dict[str, int]] | None:
        """As `read`, with the positions (next offset per changelog topic) the read
        reflects: at least those of every row it may have seen; and the offsets applied
        then (below the positions while a batch is being written)."""
        with self._lock:
            started = self._start_read(partition, roles, proved)
            if started is None:
                return None
            copy, status = started
            try:
                value = reader(copy.store)
            except READ_DAMAGE as exc:
                self._found_damaged(partition, copy, exc)
                return None
            return value, status, dict(copy.visible), dict(copy.applied)

    def _found_damaged(self, partition: int, copy: _Copy, exc: Exception) -> None:
        """A read of `copy` found its store damaged (under the lock): no read of it until
        its holder, told by `take_damaged`, rebuilt it."""
        log.error("node %s: a read of partition %d: %s", self.node_id, partition, exc)
        if self._copies.get(partition) is copy:  # else let go meanwhile: nothing to rebuild
            copy.damaged = str(exc) or type(exc).__name__
            self._damaged[partition] = copy.damaged
        self.changed.set()

    def read_long(
        self,
        partition: int,
        reader: Callable[[PartitionStore], T],
        roles: Collection[Role] = (Role.ACTIVE,),
    ) -> tuple[T, PartitionStatus] | None:
        """As `read`, for a reader that takes long (a snapshot of every key of a partition,
        run in a worker thread): it pins the store, not the registry lock, so reads of every
        partition go on meanwhile, and `detach` and `exclusive` wait for it to end."""
        with self._lock:
            started = self._start_read(partition, roles, None)
            if started is None:
                return None
            copy, status = started
            pin = id(copy.store)
            self._pins[pin] = self._pins.get(pin, 0) + 1
        try:
            return reader(copy.store), status
        except READ_DAMAGE as exc:
            with self._lock:
                self._found_damaged(partition, copy, exc)
            return None
        finally:
            with self._lock:
                self._pins[pin] -= 1
                if not self._pins[pin]:
                    del self._pins[pin]
                    self._unpinned.notify_all()

    def take_damaged(self, partitions: Collection[int]) -> dict[int, str]:
        """The partitions among `partitions` a read found damaged since the last call, and
        why: their holder rebuilds them (node.changelog.materializer)."""
        with self._lock:
            return {p: self._damaged.pop(p) for p in list(self._damaged) if p in partitions}

    def applied(
        self, partition: int, topic: str, roles: Collection[Role] = (Role.ACTIVE,)
    ) -> int | None:
        """The next offset of `topic` the copy of `partition` will apply, or None when
        `partition` is not held in one of `roles`."""
        with self._lock:
            copy = self._copies.get(partition)
            if copy is None or copy.role not in roles:
                return None
            return copy.applied.get(topic, 0)

    def holds(
        self,
        partition: int,
        roles: Collection[Role] = (Role.ACTIVE,),
        proved: Mapping[str, int] | None = None,
    ) -> bool:
        """Whether `partition` can be read here in one of `roles` (held, not restoring or
        proved current)."""
        with self._lock:  # a store being reopened is closed for a moment
            return self._readable_copy(partition, roles, proved) is not None

    def _start_read(
        self, partition: int, roles: Collection[Role], proved: Mapping[str, int] | None
    ) -> tuple[_Copy, PartitionStatus] | None:
        """A read of `partition` starts (under the lock): counted, with the copy it reads and
        that copy's status, or None when no copy may be read."""
        copy = self._readable_copy(partition, roles, proved)
        if copy is None:
            return None
        self.reads += 1
        return copy, copy.status(partition, self._unreachable_since_ms)

    def _readable_copy(
        self, partition: int, roles: Collection[Role], proved: Mapping[str, int] | None
    ) -> _Copy | None:
        """The copy of `partition` a read in `roles` may use (under the lock), else None."""
        copy = self._copies.get(partition)
        floor = self._floors.get(partition)
        stranded = self._stranded(copy)
        return copy if _readable(copy, roles, proved, self.lease, floor, stranded) else None

    def _stranded(self, copy: _Copy | None) -> bool:
        """Whether `copy` was held through a broker outage (`hold`) and the broker answers
        again: the group may already have given its partition to another node, which
        applies what this copy does not, until it assigns this node's partitions again."""
        return (
            copy is not None
            and copy.held_since_ms is not None
            and (self._unreachable_since_ms is None)
        )

    def refusal_reason(self, partition: int | None = None) -> str | None:
        """Why a read of `partition` is refused though it may be held: STORE_DAMAGED while
        a read found its store damaged, LEASE_LAPSED while the node's lease has lapsed
        (node.changelog.lease); None otherwise."""
        with self._lock:
            copy = self._copies.get(partition) if partition is not None else None
            if copy is not None and copy.damaged is not None:
                return STORE_DAMAGED
            if copy is not None and copy.role is Role.ACTIVE and self._stranded(copy):
                return AWAITING_GROUP
        return None if self.lease is None or self.lease.held() else LEASE_LAPSED

    def partitions(self, role: Role | None = None) -> list[int]:
        with self._lock:
            return sorted(p for p, c in self._copies.items() if role is None or c.role is role)

    def offsets(self) -> list[CopyOffsets]:
        """Each held copy's offsets per changelog topic, by partition."""
        with self._lock:
            return [
                CopyOffsets(p, c.role, dict(c.applied), dict(c.end))
                for p, c in sorted(self._copies.items())
            ]

    def statuses(self) -> list[PartitionStatus]:
        with self._lock:
            since = self._unreachable_since_ms
            return [self._copies[p].status(p, since) for p in sorted(self._copies)]


def _raise(positions: dict[str, int], offsets: Mapping[str, int]) -> None:
    for topic, offset in offsets.items():
        if offset > positions.get(topic, 0):
            positions[topic] = offset
