"""Replayed counts on every store backend: Spark Real-Time Mode's Kafka output is
at-least-once, so after a driver crash a key's counts may come again from the last
checkpoint (15, then 11, 12, ... 15). A lower count than the key's changes nothing: not its
row, the top index, the totals nor the changes the store reports to the feed; a tombstone
still deletes, and a count after it starts again."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.config import NodeConfig
from node.replication.feedreplay import Replay
from node.storage.changes import ChangeBatch, Effect
from node.storage.layout import Total
from node.storage.store import LevelDBStore, PartitionStore
from schema import WORD_COUNTS, CountRow, encode_count

VIEW = "counts"
# (offset, count): a count record; (offset, None): a tombstone
Record = tuple[int, int | None]


def row(key: str, count: int) -> CountRow:
    return CountRow(key, count, 1_700_000_000_000 + count)


def records(key: str, *changes: Record, view: str = VIEW) -> ChangeBatch:
    batch = ChangeBatch()
    for offset, count in changes:
        batch.reading(offset)
        if count is None:
            batch.delete(view, key)
        else:
            batch.put_count(view, row(key, count))
    return batch


def shown(effects: list[Effect]) -> list[Record]:
    return [(e.offset, e.row.count if isinstance(e.row, CountRow) else None) for e in effects]


def state(store: PartitionStore) -> tuple[list[tuple[str, int]], Total]:
    return [(r.key, r.count) for r in store.top(VIEW, 10)], store.total(VIEW)


def test_a_lower_count_after_a_higher_one_changes_nothing(store: PartitionStore) -> None:
    store.apply(records("a", (1, 15)))
    store.apply(records("b", (2, 12)))
    before = state(store)
    assert shown(store.apply(records("a", (3, 11), (4, 12)))) == []
    assert store.get(VIEW, "a") == row("a", 15)
    assert state(store) == before == ([("a", 15), ("b", 12)], Total(2, 27))


def test_within_one_batch_the_greater_count_stays(store: PartitionStore) -> None:
    assert shown(store.apply(records("a", (1, 15), (2, 11)))) == [(1, 15)]
    assert store.get(VIEW, "a") == row("a", 15)
    # below the stored 15 a count shows nowhere in the batch, even one a greater replaced
    assert shown(store.apply(records("a", (3, 12), (4, 16), (5, 13)))) == [(4, 16)]
    assert state(store) == ([("a", 16)], Total(1, 16))


def test_a_higher_or_equal_count_still_applies(store: PartitionStore) -> None:
    store.apply(records("a", (1, 15)))
    store.apply(records("b", (2, 16)))
    assert shown(store.apply(records("a", (3, 15), (4, 17)))) == [(3, 15), (4, 17)]
    assert state(store) == ([("a", 17), ("b", 16)], Total(2, 33))


def test_a_tombstone_still_deletes_and_the_count_starts_again(store: PartitionStore) -> None:
    store.apply(records("a", (1, 15)))
    store.apply(records("b", (2, 3)))
    assert shown(store.apply(records("a", (3, 11), (4, None)))) == [(4, None)]
    assert store.get(VIEW, "a") is None
    assert state(store) == ([("b", 3)], Total(1, 3))
    store.apply(records("a", (5, 15)))
    assert shown(store.apply(records("a", (6, 11), (7, None), (8, 1)))) == [(7, None), (8, 1)]
    assert state(store) == ([("b", 3), ("a", 1)], Total(2, 4))


def test_a_feed_replay_shows_the_counts_the_store_kept() -> None:
    """A follow older than the ring replays the changelog: it shows what a live follow of
    the same offsets saw, a lower count than one it replayed not among it."""
    view = WORD_COUNTS.name
    replay = Replay(NodeConfig(), WORD_COUNTS, partition=0, start=1)
    first = records("a", (1, 15), (2, 11), view=view)
    assert shown(replay._effects(first)) == [(1, 15)]  # no broker here: the decoded batches
    then = records("a", (3, 12), (4, 15), (5, None), (6, 2), view=view)
    assert shown(replay._effects(then)) == [(4, 15), (5, None), (6, 2)]
    assert shown(replay._effects(records("a", (7, 1), (8, 3), view=view))) == [(8, 3)]


# a key's changelog: counts 0..5 and tombstones, each cut into batches at random places
changelogs = st.lists(st.none() | st.integers(0, 5), min_size=1, max_size=16).flatmap(
    lambda counts: st.tuples(
        st.just(counts), st.lists(st.integers(1, len(counts)), max_size=4).map(sorted)
    )
)


def one_by_one(counts: list[int | None]) -> tuple[int | None, list[Record]]:
    """The count a key ends with and the changes shown, applying one record at a time."""
    kept: int | None = None
    changes: list[Record] = []
    for offset, count in enumerate(counts):
        if count is None or kept is None or count >= kept:
            kept = count
            changes.append((offset, count))
    return kept, changes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changelog=changelogs)
def test_batched_records_end_and_show_as_one_record_at_a_time(
    changelog: tuple[list[int | None], list[int]],
) -> None:
    counts, cuts = changelog
    changes: list[Record] = []
    with tempfile.TemporaryDirectory() as directory, LevelDBStore(Path(directory)) as store:
        for start, end in zip([0, *cuts], [*cuts, len(counts)], strict=True):
            part = [(offset, counts[offset]) for offset in range(start, end)]
            changes += shown(store.apply(records("k", *part)))
        kept, expected = one_by_one(counts)
        assert changes == expected
        if kept is None:
            assert (store.get(VIEW, "k"), state(store)) == (None, ([], Total()))
        else:
            assert store.get(VIEW, "k") == row("k", kept)
            assert state(store) == ([("k", kept)], Total(1, kept))


class _Record:
    """A count changelog record as a consumer hands it over (the replay reads these)."""

    def __init__(self, offset: int, count: int) -> None:
        self._offset, self._value = offset, encode_count(row("a", count))

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"a"

    def value(self) -> bytes:
        return self._value


class _CompactedChangelog:
    """A consumer of a compacted changelog: a record at every other offset, handed over
    as librdkafka's `consume(n)` does, n records at a time whatever their offsets."""

    def __init__(self, offsets: range) -> None:
        self._records = [_Record(offset, count=offset) for offset in offsets]

    def consume(self, n: int, timeout: float) -> list[_Record]:
        taken, self._records = self._records[:n], self._records[n:]
        return taken

    def close(self) -> None:
        pass


def test_a_replay_of_a_compacted_changelog_shows_every_record_as_its_target_moves() -> None:
    """A follow's replay reads up to where the ring holds changes, which moves on under
    writes: records a read consumed past its target are the next read's, not skipped."""
    replay = Replay(NodeConfig(), WORD_COUNTS, partition=0, start=0)
    replay._consumer = _CompactedChangelog(range(0, 100, 2))  # type: ignore[assignment]
    seen: list[Record] = []
    for until in (10, 20):
        while replay.position < until:  # as the feed socket reads
            seen += shown(replay.read(until))
    assert seen == [(offset, offset) for offset in range(0, 20, 2)]
