"""A copy whose changelog ends in offsets that hold no record (retention deleted every
segment of an idle windowed changelog, compaction removed the trailing tombstones) finishes
restoring once a fetch reaches the end: the partition EOF passes those offsets in the stored
offset, as a record after them would, and only after the records before it are written.

Driven with confluent-kafka's own records and EOF events, and a stand-in for the consumer's
cached watermarks, through the apply path both the Materializer (ACTIVE copies) and the
standby replicator (STANDBY copies) use."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, TopicPartition

from node.changelog.materializer import Materializer, Replicator
from node.changelog.partitions import PartitionRegistry
from node.config import NodeConfig
from node.errors import StoreWriteError
from node.replication.standby import StandbyReplicator
from node.storage.changes import ChangeBatch, Effect
from node.storage.store import LevelDBStore
from schema import DEMO_DOMAIN, MEMBERS_TOPIC, WORD_COUNTS, CountRow, encode_count

COUNTS = WORD_COUNTS.changelog_topic
WINDOWED = DEMO_DOMAIN[1].changelog_topic
CATALOGUE = [WORD_COUNTS, DEMO_DOMAIN[1]]
REPLICATORS = [Materializer, StandbyReplicator]


class Watermarks:
    """The consumer's cached (log start, end) per changelog topic, as its fetches saw them."""

    def __init__(self, ends: dict[str, int]) -> None:
        self.ends = ends

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = True) -> tuple[int, int]:
        return self.ends[tp.topic], self.ends[tp.topic]


class FailingStore(LevelDBStore):
    """A store whose writes fail while `full` (a full disk)."""

    full = False

    def apply(self, batch: ChangeBatch) -> list[Effect]:
        if self.full:
            raise StoreWriteError(f"partition store {self.path}: no space left (injected)")
        return super().apply(batch)


def record(offset: int, key: str, count: int) -> Message:
    value = encode_count(CountRow(key, count, 1_700_000_000_000))
    return Message(topic=COUNTS, partition=0, offset=offset, key=key.encode(), value=value)


def eof(topic: str, end: int) -> Message:
    return Message(
        topic=topic, partition=0, offset=end, error=KafkaError(KafkaError._PARTITION_EOF)
    )


def attached(
    kind: type[Replicator], store: LevelDBStore
) -> tuple[Replicator, list[TopicPartition]]:
    """A replicator of `kind` holding partition 0 from `store`, restoring, and its
    changelogs (offsets set to where the consumer would start)."""
    config = NodeConfig(state_dir=store.path.parent)
    replicator = kind(config, CATALOGUE, PartitionRegistry("n1"), store_factory=lambda p: store)
    topics = [TopicPartition(COUNTS, 0), TopicPartition(WINDOWED, 0)]
    replicator._attach(topics)
    return replicator, topics


def apply_polls(replicator: Replicator, polls: list[list[Message]], ends: dict[str, int]) -> None:
    """Apply each poll's messages, then track the ends, as the consumer loop turns."""
    for messages in polls:
        replicator._apply(messages)
        tracked = [TopicPartition(t, 0) for t in ends]
        replicator._track_end_offsets(Watermarks(ends), tracked)  # type: ignore[arg-type]


def serves(replicator: Replicator) -> bool:
    return replicator.registry.read(0, lambda store: None, (replicator.role,)) is not None


@pytest.mark.parametrize("kind", REPLICATORS)
def test_a_changelog_whose_records_retention_deleted_finishes_restoring(
    kind: type[Replicator], tmp_path: Path
) -> None:
    """Log start 5 and end 5 (every segment deleted), the copy's stored position 0."""
    store = LevelDBStore(tmp_path / "partition-0").open()
    earlier = ChangeBatch(offsets={COUNTS: 1, WINDOWED: 0})
    earlier.put_count(WORD_COUNTS.name, CountRow("a", 3, 1_700_000_000_000))
    store.apply(earlier)
    replicator, _ = attached(kind, store)
    assert not serves(replicator)

    # the standby's membership topic ends in the same poll: not a changelog of the store
    polls = [[eof(COUNTS, 1), eof(WINDOWED, 5), eof(MEMBERS_TOPIC, 9)]]
    apply_polls(replicator, polls, {COUNTS: 1, WINDOWED: 5})

    assert 0 not in replicator._restores
    found = replicator.registry.read(
        0, lambda held: held.get(WORD_COUNTS.name, "a"), (replicator.role,)
    )
    assert found is not None
    assert found[0] == CountRow("a", 3, 1_700_000_000_000)
    assert found[1].lag == 0
    assert store.offsets() == {COUNTS: 1, WINDOWED: 5}
    replicator._close_stores([0])


@pytest.mark.parametrize("kind", REPLICATORS)
@pytest.mark.parametrize("eof_poll", ["with the records", "in a later poll"])
def test_a_changelog_whose_last_offsets_hold_no_record_finishes_restoring(
    kind: type[Replicator], eof_poll: str, tmp_path: Path
) -> None:
    """Records at 0-2, the end at 5 (compaction removed what was at 3 and 4)."""
    store = LevelDBStore(tmp_path / "partition-0").open()
    replicator, _ = attached(kind, store)
    records = [record(n, "k", n + 1) for n in range(3)]
    ends = [eof(COUNTS, 5), eof(WINDOWED, 0)]
    polls = [records + ends] if eof_poll == "with the records" else [records, ends]

    apply_polls(replicator, polls, {COUNTS: 5, WINDOWED: 0})

    assert 0 not in replicator._restores
    assert serves(replicator)
    assert store.get(WORD_COUNTS.name, "k") == CountRow("k", 3, 1_700_000_000_000)
    assert store.offsets() == {COUNTS: 5}
    replicator._close_stores([0])


def test_the_end_passed_is_stored_and_a_reopened_copy_goes_on_from_there(
    tmp_path: Path,
) -> None:
    path = tmp_path / "partition-0"
    first, _ = attached(Materializer, LevelDBStore(path).open())
    apply_polls(first, [[eof(COUNTS, 5), eof(WINDOWED, 7)]], {COUNTS: 5, WINDOWED: 7})
    first._close_stores([0])

    store = LevelDBStore(path).open()
    again, topics = attached(Materializer, store)

    assert {tp.topic: tp.offset for tp in topics} == {COUNTS: 5, WINDOWED: 7}
    # a fetch there reaches the end at once: restored without waiting for a record
    apply_polls(again, [[eof(COUNTS, 5), eof(WINDOWED, 7)]], {COUNTS: 5, WINDOWED: 7})
    assert 0 not in again._restores
    assert serves(again)
    again._close_stores([0])


def test_the_end_is_not_passed_while_the_records_before_it_are_not_written(
    tmp_path: Path,
) -> None:
    """A write that failed (a full disk) pauses the partition: the end reached with it, or
    after it, must not move the position past the records the failed write held."""
    store = FailingStore(tmp_path / "partition-0").open()
    store.full = True
    replicator, _ = attached(Materializer, store)
    records = [record(n, "k", n + 1) for n in range(3)]
    ends = [eof(COUNTS, 5), eof(WINDOWED, 0)]

    apply_polls(replicator, [records + ends, ends], {COUNTS: 5, WINDOWED: 0})

    assert replicator._positions[(COUNTS, 0)] == 0
    assert 0 in replicator._restores
    store.full = False
    assert store.offsets() == {}
    replicator._close_stores([0])


@pytest.mark.parametrize("kind", REPLICATORS)
def test_records_below_the_applied_position_are_not_applied_again(
    kind: type[Replicator], tmp_path: Path
) -> None:
    """A poll may hold records fetched for an earlier holder of the copy (a standby's
    fetch before it adopted the revoked active store, applied up to 6 there): applying
    them again would move the stored offset back, and a window's row with it."""
    store = LevelDBStore(tmp_path / "partition-0").open()
    ahead = ChangeBatch(offsets={COUNTS: 6, WINDOWED: 0})
    ahead.put_count(WORD_COUNTS.name, CountRow("k", 6, 1_700_000_000_000))
    store.apply(ahead)
    replicator, _ = attached(kind, store)

    apply_polls(replicator, [[record(n, "k", n + 1) for n in range(2, 5)]], {COUNTS: 6})

    assert store.offsets()[COUNTS] == 6
    assert replicator._positions[(COUNTS, 0)] == 6
    assert store.get(WORD_COUNTS.name, "k") == CountRow("k", 6, 1_700_000_000_000)
    replicator._close_stores([0])


def test_a_write_that_failed_leaves_reads_reporting_only_what_the_store_holds(
    tmp_path: Path,
) -> None:
    """Reads report the positions of a batch from when it is about to be written (a read
    meanwhile may see it); when the write fails, nothing of it is there to see."""
    store = FailingStore(tmp_path / "partition-0").open()
    replicator, _ = attached(Materializer, store)
    apply_polls(replicator, [[record(0, "k", 1), eof(COUNTS, 1), eof(WINDOWED, 0)]], {COUNTS: 1})
    store.full = True
    apply_polls(replicator, [[record(n, "k", n + 1) for n in range(1, 4)]], {COUNTS: 4})
    found = replicator.registry.read_at(0, lambda held: None, (replicator.role,))
    assert found is not None
    assert found[2][COUNTS] == 1  # not 4: the failed batch's
    store.full = False
    replicator._close_stores([0])
