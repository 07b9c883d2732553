"""A damaged store is set aside and rebuilt empty (Materializer._recover): from the moment
it is emptied until the restore has caught up, no read may be answered from it (issue #26:
one read could be answered from the empty store before the copy was marked restoring)."""

from __future__ import annotations

from pathlib import Path

import plyvel
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from node.changelog.materializer import Materializer
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.errors import StoreDamagedError
from node.storage.changes import ChangeBatch, Effect
from node.storage.store import LevelDBStore
from schema import WORD_COUNTS, CountRow, Role

TOPIC = WORD_COUNTS.changelog_topic


class WatchedStore:
    """A partition store that, at each write, asks the registry to read its partition."""

    def __init__(self, path: Path, registry: PartitionRegistry) -> None:
        self.inner = LevelDBStore(path)
        self.registry = registry
        self.reads_while_writing: list[object] = []  # "refused", or the row read

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def apply(self, batch: ChangeBatch) -> list[Effect]:
        found = self.registry.read(0, lambda store: store.get(WORD_COUNTS.name, "k"))
        self.reads_while_writing.append("refused" if found is None else found[0])
        return self.inner.apply(batch)


def test_a_store_rebuilt_after_damage_is_never_read_before_it_restored(tmp_path: Path) -> None:
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({TOPIC: 1})
    materializer = Materializer(NodeConfig(state_dir=tmp_path), [WORD_COUNTS], registry)
    store = WatchedStore(tmp_path / "partition-0", registry)
    store.inner.open()
    filled = ChangeBatch(offsets={TOPIC: 5})
    filled.put_count(WORD_COUNTS.name, CountRow("k", 5, 0))
    store.inner.apply(filled)
    materializer._stores[0] = store  # type: ignore[assignment]
    materializer._assigned = [TopicPartition(TOPIC, 0)]
    registry.attach(0, store, Role.ACTIVE, store.inner.offsets())  # type: ignore[arg-type]
    found = registry.read(0, lambda held: held.get(WORD_COUNTS.name, "k"))
    assert found is not None and found[0] == CountRow("k", 5, 0)

    stored = materializer._recover(0, StoreDamagedError("injected: bad block"))

    assert stored == {}, "the rebuilt store starts empty"
    # the write that proves the rebuilt store takes writes found the copy unreadable
    assert store.reads_while_writing == ["refused"]
    assert registry.read(0, lambda held: None) is None, "readable while it restores"
    store.inner.close()


class StubConsumer:
    """The consumer calls a recovery makes: pause, resume and seek of the changelogs."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.calls.append("pause")

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.calls.append("resume")

    def seek(self, partition: TopicPartition) -> None:
        self.calls.append(f"seek {partition.offset}")


def test_a_store_a_read_found_damaged_is_set_aside_and_restored(tmp_path: Path) -> None:
    registry = PartitionRegistry("n1")
    registry.set_partition_counts({TOPIC: 1})
    materializer = Materializer(NodeConfig(state_dir=tmp_path), [WORD_COUNTS], registry)
    materializer.retry_first_s = 0.0  # the retry is due at once
    store = LevelDBStore(tmp_path / "partition-0").open()
    filled = ChangeBatch(offsets={TOPIC: 5})
    filled.put_count(WORD_COUNTS.name, CountRow("k", 5, 0))
    store.apply(filled)
    materializer._stores[0] = store
    materializer._assigned = [TopicPartition(TOPIC, 0)]
    registry.attach(0, store, Role.ACTIVE, store.offsets())

    def rotten(held: object) -> None:
        raise plyvel.CorruptionError(b"Corruption: bad block (injected)")

    assert registry.read(0, rotten) is None
    consumer = StubConsumer()
    materializer._retry_faults(consumer)  # type: ignore[arg-type]

    (aside,) = registry.set_aside()
    assert "bad block" in aside.reason and Path(aside.moved_to).exists()
    assert consumer.calls == ["pause", "resume", f"seek {OFFSET_BEGINNING}"]
    # rebuilt empty, restoring from the changelog's start: no read until it caught up
    assert store.get(WORD_COUNTS.name, "k") is None
    assert registry.read(0, lambda held: None) is None
    store.close()
