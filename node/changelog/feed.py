"""The change feed of a node: per held partition, the recent changes its copy applied.

The replicators' consumer threads are the tap: after each successful store write they
`publish` the changes that took effect (ChangeBatch.changes) with the new applied offsets;
`attach`/`detach` follow the copies the node holds, `record_end`/`record_restoring` their
end offsets and restore state. Each partition keeps a bounded ring of recent changes, each
encoded as its JSON text for the wire when first read; together the rings hold about
STATEFED_NODE_FEED_BUFFER_MB (counted by the records' sizes), the oldest change of the
partition that grows going first.
`first[topic]` is the offset from which a ring holds every change of a topic; a follow
from an older offset is replayed from Kafka first (node.replication.feedreplay), the feed socket
(node.replication.feedsocket) reads the rest from here.

A partition nobody follows costs the tap nothing per record: its replicator asks
`wants_changes` before building a batch and publishes none (None) when no follow runs, and
its ring then holds nothing, from the applied offsets on. A follow counts from before its
first read (`followed`) to its end, so every batch begun after it started is kept; one begun
before and published after only moves `first` past it, and the follow replays it.

The threads never wait on the network or the event loop: a publish appends under a short
lock, notes the keys it changed and, once per quiet period, asks the loop
(`call_soon_threadsafe`) to wake the follows of those keys (and those of every key). A
follow of some keys reads them through the ring's index of entries by key, so a thousand
one-key follows of a partition cost each record one wake and one read, not a thousand
scans of the ring. A copy attached again with other offsets (a rebuilt store), or detached,
ends the follows of the old one (`gone`): their offsets mean nothing to the new copy.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from node.storage.changes import Effect
from schema import Role, View

__all__ = ["ChangeFeed", "Entry", "Read"]

# what one ring entry costs beyond its JSON text (tuple, strings, list slot)
_ENTRY_OVERHEAD = 200
# a ring wakes every follow at most once per this many entries (a quarter of them) added
_WAKE_ALL_MIN = 256
# every ring a node makes has its own number: a follow of an older ring of its partition
# (detached and attached again meanwhile) is gone, its offsets mean nothing to the new one
_generations = itertools.count(1)


class Entry:
    """One change in a ring: its changelog topic, offset and key, and its JSON text, made
    when first read (in the event loop, never by the consumer thread that publishes it)."""

    __slots__ = ("_doc", "effect", "key", "offset", "topic")

    def __init__(self, topic: str, effect: Effect):
        self.topic, self.offset, self.key = topic, effect.offset, effect.key
        self.effect = effect
        self._doc: bytes | None = None

    @property
    def doc(self) -> bytes:
        if self._doc is None:
            self._doc = self.effect.json()
        return self._doc

    @property
    def size(self) -> int:
        """What the entry holds in memory, about: its record's value, key and bookkeeping."""
        return self.effect.size + len(self.key) + _ENTRY_OVERHEAD


@dataclass
class _Ring:
    """One copy's recent changes; `seq` numbers entries across evictions."""

    role: Role
    applied: dict[str, int]
    restoring: bool
    first: dict[str, int] = field(default_factory=dict)
    end: dict[str, int] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    head: int = 0  # entries[:head] are evicted, kept until compaction
    base_seq: int = 0  # seq of entries[0]
    by_key: dict[str, list[int]] = field(default_factory=dict)  # key -> its entries' seqs
    size: int = 0  # bytes held
    status_version: int = 0  # bumped when role, restore state or end offsets change
    added: int = 0  # entries added since every follow was last woken
    generation: int = field(default_factory=lambda: next(_generations))

    @property
    def start_seq(self) -> int:
        return self.base_seq + self.head

    @property
    def end_seq(self) -> int:
        return self.base_seq + len(self.entries)

    def forget(self) -> None:
        """Hold nothing, every change from the applied offsets on."""
        self.base_seq, self.entries, self.head, self.size = self.end_seq, [], 0, 0
        self.by_key = {}
        for topic, offset in self.applied.items():
            self.first[topic] = max(self.first.get(topic, 0), offset)

    def append(self, entries: list[Entry]) -> None:
        """Hold `entries` too."""
        self._index(entries, self.end_seq)
        self.entries.extend(entries)
        self.size += sum(entry.size for entry in entries)
        self.added += len(entries)

    def wake_all_due(self) -> bool:
        """Whether every follow is to be woken, not only those of the keys just added: once
        a quarter of what the ring holds was added since. A follow of quiet keys then
        reads, which moves its cursor to the ring's end, long before eviction reaches it
        (else it would be found behind and replay others' changes from Kafka)."""
        if self.added * 4 < max(_WAKE_ALL_MIN, len(self.entries) - self.head):
            return False
        self.added = 0
        return True

    def _index(self, entries: list[Entry], seq: int) -> None:
        """Note the seqs of `entries` (from `seq` on) in the index by key."""
        for at, entry in enumerate(entries, start=seq):
            self.by_key.setdefault(entry.key, []).append(at)

    def seqs_of(self, keys: Collection[str], seq: int, most: int) -> tuple[list[int], int]:
        """The seqs of the entries of `keys` from `seq` on, ascending, at most `most` of each
        key (a read takes at most `most` in all), and the seq they reach: below it they are
        every entry of the keys (the ring's end unless a key's were cut)."""
        found: list[int] = []
        stop = self.end_seq
        for key in keys:
            seqs = self.by_key.get(key)
            if seqs:
                first = bisect.bisect_left(seqs, seq)
                taken = seqs[first : first + most]
                if first + most < len(seqs):
                    stop = min(stop, taken[-1] + 1)
                found.extend(taken)
        if len(keys) > 1:
            found.sort()
        if stop < self.end_seq:
            del found[bisect.bisect_left(found, stop) :]
        return found, stop

    def evict(self) -> None:
        entry = self.entries[self.head]
        self.head += 1
        self.size -= entry.size
        self.first[entry.topic] = max(self.first.get(entry.topic, 0), entry.offset + 1)
        if self.head >= 1024 and self.head * 2 >= len(self.entries):
            del self.entries[: self.head]
            self.base_seq += self.head
            self.head = 0
            self.by_key = {}  # made anew from what is left: the evicted seqs go with it
            self._index(self.entries, self.base_seq)


def _candidates(
    ring: _Ring, seq: int, keys: Collection[str] | None, most: int, max_scan: int
) -> tuple[Iterable[int], int]:
    """The seqs a read from `seq` looks at, and the seq it stands at once it looked at them
    all: the entries of `keys` through the index when they are fewer than the entries to
    scan, else the next `max_scan` entries."""
    if keys is not None and len(keys) < ring.end_seq - seq:
        return ring.seqs_of(keys, seq, most)
    scanned = range(seq, min(ring.end_seq, seq + max_scan))
    return scanned, scanned.stop


class _Listeners:
    """The follows of one partition waiting for changes: of every key, or of some."""

    def __init__(self) -> None:
        self.everything: set[asyncio.Event] = set()
        self.by_key: dict[str, set[asyncio.Event]] = {}

    @property
    def empty(self) -> bool:
        return not self.everything and not self.by_key

    def add(self, event: asyncio.Event, keys: Collection[str] | None) -> None:
        if keys is None:
            self.everything.add(event)
        for key in keys or ():
            self.by_key.setdefault(key, set()).add(event)

    def remove(self, event: asyncio.Event, keys: Collection[str] | None) -> None:
        self.everything.discard(event)
        for key in keys or ():
            waiting = self.by_key.get(key)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self.by_key[key]

    def wake(self, keys: Collection[str] | None) -> None:
        """Set the events of the follows of `keys` and of every key (None: all)."""
        for event in self.everything:
            event.set()
        if keys is None:
            for waiting in self.by_key.values():
                for event in waiting:
                    event.set()
            return
        for key in keys:
            for event in self.by_key.get(key, ()):
                event.set()


@dataclass(frozen=True)
class Read:
    """What a follow read from a ring: `gone` (the copy is not held: why), or `behind`
    (topics whose cursor the ring no longer holds: replay them), or entries from `seq` on
    with the cursor after them; `more` when the ring has more entries after `seq`."""

    gone: str | None = None
    behind: tuple[str, ...] = ()
    entries: tuple[Entry, ...] = ()
    seq: int = 0
    cursor: Mapping[str, int] = field(default_factory=dict)
    more: bool = False


class ChangeFeed:
    """The rings of every held partition and the tap the replicators publish to."""

    def __init__(self, budget_bytes: int, catalogue: Iterable[View]):
        self.budget_bytes = budget_bytes
        self.topics = {view.name: view.changelog_topic for view in catalogue}
        self._lock = threading.Lock()
        self._rings: dict[int, _Ring] = {}
        self._gone: dict[int, str] = {}  # why the last copy of a partition went
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: dict[int, _Listeners] = {}  # loop side only
        # per partition, the keys changed since its last wake (None: every follow's concern)
        self._touched: dict[int, set[str] | None] = {}
        self._follows: dict[int, int] = {}  # running follows per partition

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake follows in `loop` (the server's) from now on."""
        self._loop = loop

    # -- the tap (consumer threads) ---------------------------------------------------------

    def attach(
        self, partition: int, role: Role, applied: Mapping[str, int], restoring: bool
    ) -> None:
        """The node holds `partition` in `role` from `applied`; a copy held already goes on
        when it stands at the same offsets (handed from ACTIVE to STANDBY), else it is gone."""
        with self._lock:
            ring = self._rings.get(partition)
            if ring is not None and ring.applied == dict(applied):
                ring.role, ring.restoring = role, restoring
                ring.status_version += 1
            else:
                if ring is not None:
                    self._gone[partition] = f"its copy restarts from offsets {dict(applied)}"
                self._rings[partition] = _Ring(role, dict(applied), restoring, dict(applied))
        self._wake(partition)

    def detach(self, partition: int, reason: str) -> None:
        with self._lock:
            if self._rings.pop(partition, None) is not None:
                self._gone[partition] = reason
        self._wake(partition)

    def wants_changes(self, partition: int) -> bool:
        """Whether a follow of `partition` runs: a batch begun now must report its changes."""
        with self._lock:
            return partition in self._follows

    def publish(
        self, partition: int, effects: list[Effect] | None, offsets: Mapping[str, int]
    ) -> None:
        """The changes a store write made take effect (offset order; None: not known, as
        nobody followed when the batch began) and its new offsets."""
        topics = self.topics
        entries = None if effects is None else [Entry(topics[e.view], e) for e in effects]
        with self._lock:
            ring = self._rings.get(partition)
            if ring is None:
                return
            ring.applied.update(offsets)
            if entries is None:
                ring.forget()
                if partition not in self._follows:
                    return  # nobody to wake
            else:
                ring.append(entries)
                cap = self.budget_bytes // max(1, len(self._rings))
                while ring.size > cap and ring.head < len(ring.entries):
                    ring.evict()
                if ring.wake_all_due():
                    entries = None
        self._wake(partition, None if entries is None else {e.key for e in entries})

    def record_end(self, partition: int, topic: str, end: int) -> None:
        with self._lock:
            ring = self._rings.get(partition)
            if ring is None or ring.end.get(topic) == end:
                return
            ring.end[topic] = end
            ring.status_version += 1

    def record_restoring(self, partition: int, restoring: bool) -> None:
        with self._lock:
            ring = self._rings.get(partition)
            if ring is None or ring.restoring == restoring:
                return
            ring.restoring = restoring
            ring.status_version += 1
        self._wake(partition)

    def _wake(self, partition: int, keys: set[str] | None = None) -> None:
        """Wake the follows of `partition` concerned by a change of `keys` (None: all)."""
        loop = self._loop
        if loop is None:
            return
        with self._lock:
            pending = partition in self._touched
            touched = self._touched.get(partition)
            if keys is None or not pending:
                self._touched[partition] = keys
            elif touched is not None:
                touched.update(keys)
        if not pending:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody follows any more
                loop.call_soon_threadsafe(self._woken, partition)

    # -- the follows (event loop) -----------------------------------------------------------

    def _woken(self, partition: int) -> None:
        with self._lock:
            keys = self._touched.pop(partition, None)
        listeners = self._listeners.get(partition)
        if listeners is not None:
            listeners.wake(keys)

    @contextlib.contextmanager
    def followed(
        self, partition: int, keys: Collection[str] | None = None
    ) -> Iterator[asyncio.Event]:
        """A follow of `partition` (of `keys`, None: all) runs for the block: the
        replicators keep its changes, and the event yielded is set at each change of its
        keys and each change of the copy (attach, detach, restore state). Clear it before
        reading the ring."""
        with self._lock:
            self._follows[partition] = self._follows.get(partition, 0) + 1
        changed = asyncio.Event()
        listeners = self._listeners.setdefault(partition, _Listeners())
        listeners.add(changed, keys)
        try:
            yield changed
        finally:
            listeners.remove(changed, keys)
            if listeners.empty and self._listeners.get(partition) is listeners:
                del self._listeners[partition]
            with self._lock:
                left = self._follows.pop(partition) - 1
                if left:
                    self._follows[partition] = left

    def gone_reason(self, partition: int) -> str | None:
        """Why `partition` is not followed here (None: it is)."""
        with self._lock:
            if partition in self._rings:
                return None
            return self._gone.get(partition, "the node does not hold it")

    def status(self, partition: int) -> tuple[Role, bool, dict[str, int], dict[str, int], int]:
        """(role, restoring, applied, end offsets, status version) of the held copy;
        KeyError when `partition` is not held."""
        with self._lock:
            ring = self._rings[partition]
            return (
                ring.role,
                ring.restoring,
                dict(ring.applied),
                dict(ring.end),
                ring.status_version,
            )

    def end_seq(self, partition: int) -> tuple[int, int]:
        """The ring generation of `partition` and the seq its next entry will take;
        KeyError when `partition` is not held."""
        with self._lock:
            ring = self._rings[partition]
            return ring.generation, ring.end_seq

    def start(
        self, partition: int, wanted: Mapping[str, int | None]
    ) -> tuple[int, dict[str, int], int]:
        """A new follow's ring generation, cursor (None: the applied offset now) and the seq
        to read from; KeyError when `partition` is not held."""
        with self._lock:
            ring = self._rings[partition]
            cursor = {t: ring.applied.get(t, 0) if n is None else n for t, n in wanted.items()}
            caught_up = all(n >= ring.applied.get(t, 0) for t, n in cursor.items())
            return ring.generation, cursor, ring.end_seq if caught_up else ring.start_seq

    def read(
        self,
        partition: int,
        generation: int,
        seq: int,
        cursor: Mapping[str, int],
        keys: Collection[str] | None,
        max_entries: int = 500,
        max_bytes: int = 256 << 10,
        max_scan: int = 20_000,
    ) -> Read:
        """The entries of ring `generation` of `partition` from `seq` on that a follow at
        `cursor` (next offset per topic) of `keys` (None: all) wants, up to `max_entries` or
        about `max_bytes` (one frame)."""
        with self._lock:
            ring = self._rings.get(partition)
            if ring is None or ring.generation != generation:
                return Read(gone=self._gone.get(partition, "the node does not hold it"))
            behind = tuple(t for t, n in cursor.items() if n < ring.first.get(t, 0))
            if behind:
                return Read(behind=behind)
            seq = max(seq, ring.start_seq)
            candidates, last = _candidates(ring, seq, keys, max_entries, max_scan)
            after = dict(cursor)
            found: list[Entry] = []
            size = 0
            for at in candidates:
                if len(found) >= max_entries or size >= max_bytes:
                    last = at  # cut: read on from here
                    break
                entry = ring.entries[at - ring.base_seq]
                wanted = after.get(entry.topic)
                if wanted is None or entry.offset < wanted:
                    continue
                after[entry.topic] = entry.offset + 1
                if keys is None or entry.key in keys:
                    found.append(entry)
                    size += entry.size
            more = last < ring.end_seq
            if not more:  # every change the copy applied was seen
                for topic, n in after.items():
                    after[topic] = max(n, ring.applied.get(topic, 0))
            return Read(entries=tuple(found), seq=last, cursor=after, more=more)

    def first(self, partition: int, generation: int, topic: str) -> int | None:
        """From which offset ring `generation` of `partition` holds every change of `topic`
        (None: that ring is gone)."""
        with self._lock:
            ring = self._rings.get(partition)
            if ring is None or ring.generation != generation:
                return None
            return ring.first.get(topic, 0)
