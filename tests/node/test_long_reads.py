"""A long read of a partition (`PartitionRegistry.read_long`: a snapshot of every key, run in
a worker thread) holds its copy's store open, not the registry lock: other reads go on while
it runs, and `detach` and `exclusive`, which close or reopen the store, wait for it to end,
also after the store passed to another copy (a revoked copy a standby adopts)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import plyvel
import pytest

from node.changelog.partitions import PartitionRegistry
from node.storage.changes import ChangeBatch
from node.storage.store import LevelDBStore, PartitionStore
from schema import WORD_COUNTS, CountRow, Role, partition_for

pytestmark = pytest.mark.timeout(30)

P = 2
TOPIC = WORD_COUNTS.changelog_topic
WORD = next(f"w{i}" for i in range(100) if partition_for(f"w{i}", P) == 0)
WAIT_S = 10.0


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[PartitionRegistry, LevelDBStore]]:
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({TOPIC: P})
    store = LevelDBStore(tmp_path / "partition-0").open()
    batch = ChangeBatch(offsets={TOPIC: 3})
    batch.put_count(WORD_COUNTS.name, CountRow(WORD, 3, 0))
    store.apply(batch)
    registry.attach(0, store, Role.ACTIVE, store.offsets())
    yield registry, store
    store.close()


class HeldRead:
    """A long read of partition 0 in a thread, held inside its reader until `release`."""

    def __init__(self, registry: PartitionRegistry) -> None:
        self.inside, self.released = threading.Event(), threading.Event()
        self.result: object = None
        self.thread = threading.Thread(target=self._run, args=(registry,))

    def _reader(self, store: PartitionStore) -> CountRow | None:
        self.inside.set()
        assert self.released.wait(WAIT_S)
        return store.get(WORD_COUNTS.name, WORD)

    def _run(self, registry: PartitionRegistry) -> None:
        self.result = registry.read_long(0, self._reader)

    def start(self) -> HeldRead:
        self.thread.start()
        assert self.inside.wait(WAIT_S)
        return self

    def release(self) -> None:
        self.released.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()


def test_a_long_read_does_not_hold_the_registry_lock(
    held: tuple[PartitionRegistry, LevelDBStore],
) -> None:
    registry, _ = held
    long_read = HeldRead(registry).start()
    try:
        # the same partition, read while the long read runs: no wait for it
        read = registry.read(0, lambda store: store.get(WORD_COUNTS.name, WORD))
        assert read is not None and read[0] == CountRow(WORD, 3, 0)
    finally:
        long_read.release()
    assert isinstance(long_read.result, tuple)
    assert long_read.result[0] == CountRow(WORD, 3, 0)


@pytest.mark.parametrize("closing", ["detach", "exclusive", "handed over, then detached"])
def test_the_store_is_not_closed_under_a_long_read(
    held: tuple[PartitionRegistry, LevelDBStore], closing: str
) -> None:
    registry, store = held
    long_read = HeldRead(registry).start()
    closed = threading.Event()

    def close() -> None:
        if closing == "handed over, then detached":  # the standby adopts the open store
            registry.attach(0, store, Role.STANDBY, store.offsets())
        if closing != "exclusive":
            detached = registry.detach(0)
            assert detached is store
            store.close()
        else:
            registry.exclusive(0, lambda held_store: held_store.close())
        closed.set()

    closer = threading.Thread(target=close)
    closer.start()
    try:
        assert not closed.wait(0.5), f"{closing} closed the store under a running long read"
    finally:
        long_read.release()
    closer.join(WAIT_S)
    assert closed.is_set()
    assert isinstance(long_read.result, tuple)
    assert long_read.result[0] == CountRow(WORD, 3, 0)  # read whole, from the open store


def test_a_long_read_that_finds_the_store_damaged_hands_it_to_its_holder(
    held: tuple[PartitionRegistry, LevelDBStore],
) -> None:
    registry, _ = held

    def rotten(store: PartitionStore) -> None:
        raise plyvel.CorruptionError(b"Corruption: block checksum mismatch (injected)")

    assert registry.read_long(0, rotten) is None
    assert "block checksum mismatch" in registry.take_damaged([0])[0]
    assert registry.read(0, lambda store: store.offsets()) is None  # refused until rebuilt


def test_exclusive_acts_on_the_store_held_once_the_long_read_ended(
    held: tuple[PartitionRegistry, LevelDBStore], tmp_path: Path
) -> None:
    """`exclusive` waits for a long read with the lock let go: a store attached meanwhile
    (the partition reassigned) is the one it acts on, never the one it first found."""
    registry, _ = held
    newer = LevelDBStore(tmp_path / "partition-0-again").open()
    acted_on: list[PartitionStore] = []
    long_read = HeldRead(registry).start()
    closer = threading.Thread(target=registry.exclusive, args=(0, acted_on.append))
    try:
        closer.start()
        registry.attach(0, newer, Role.ACTIVE, newer.offsets())
    finally:
        long_read.release()
        closer.join(WAIT_S)
    try:
        assert acted_on == [newer]
    finally:
        newer.close()
