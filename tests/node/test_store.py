"""Contract suite of partition stores: every backend passes the same tests.

LevelDB runs on real files in tmp_path; the in-memory store is the reference model.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.errors import SerializationError, StoreClosedError, StoreError
from node.storage.store import ChangeBatch, LevelDBStore, PartitionStore
from schema import CountRow
from tests.node.stores import StoreMaker


def batch(*rows: tuple[str, str, int], offsets: dict[str, int] | None = None) -> ChangeBatch:
    change = ChangeBatch()
    for view, key, count in rows:
        change.put_count(view, CountRow(key, count, 1_700_000_000_000 + count))
    change.offsets.update(offsets or {})
    return change


def test_unknown_key_is_none_and_empty_store_has_no_offsets(store: PartitionStore) -> None:
    assert store.get("words", "kafka") is None
    assert store.get_many("words", ["a", "b"]) == [None, None]
    assert store.top("words", 10) == []
    assert store.offsets() == {}


def test_apply_writes_rows_and_offsets(store: PartitionStore) -> None:
    store.apply(batch(("words", "kafka", 3), ("words", "spark", 1), offsets={"t.changelog": 7}))
    assert store.get("words", "kafka") == CountRow("kafka", 3, 1_700_000_000_003)
    assert store.get_many("words", ["spark", "nope", "kafka"]) == [
        CountRow("spark", 1, 1_700_000_000_001),
        None,
        CountRow("kafka", 3, 1_700_000_000_003),
    ]
    assert store.offsets() == {"t.changelog": 7}


def test_reads_of_one_key_see_each_applied_batch_and_a_pinned_view_its_own_time(
    store: PartitionStore,
) -> None:
    """One key is read without a snapshot of its own; many keys from one: both must see
    what is applied, a pinned view the moment it was taken."""
    store.apply(batch(("words", "a", 1), ("words", "b", 1)))
    with store.pinned() as pinned:
        store.apply(batch(("words", "a", 2), ("words", "b", 2)))
        then, now = CountRow("a", 1, 1_700_000_000_001), CountRow("a", 2, 1_700_000_000_002)
        assert store.get_many("words", ["a"]) == [now] == [store.get("words", "a")]
        assert pinned.get_many("words", ["a"]) == [then] == [pinned.get("words", "a")]
        assert [r and r.count for r in store.get_many("words", ["a", "b"])] == [2, 2]
        assert [r and r.count for r in pinned.get_many("words", ["a", "b"])] == [1, 1]
    change = ChangeBatch()
    change.delete("words", "a")
    store.apply(change)
    assert store.get_many("words", ["a"]) == [None]


def test_upsert_replaces_value_and_moves_index_entry(store: PartitionStore) -> None:
    store.apply(batch(("words", "a", 5), ("words", "b", 3), ("words", "c", 1)))
    store.apply(batch(("words", "c", 9), ("words", "a", 6)))
    assert [(r.key, r.count) for r in store.top("words", 10)] == [("c", 9), ("a", 6), ("b", 3)]


def test_top_orders_by_count_desc_then_key_asc_and_cuts(store: PartitionStore) -> None:
    store.apply(batch(("words", "b", 2), ("words", "a", 2), ("words", "z", 7), ("words", "m", 1)))
    assert [(r.key, r.count) for r in store.top("words", 3)] == [("z", 7), ("a", 2), ("b", 2)]
    assert store.top("words", 1)[0] == CountRow("z", 7, 1_700_000_000_007)


def test_views_and_topics_are_separate(store: PartitionStore) -> None:
    store.apply(batch(("v1", "k", 1), ("v2", "k", 5), offsets={"a": 1, "b": 2}))
    assert store.get("v1", "k") == CountRow("k", 1, 1_700_000_000_001)
    assert [r.count for r in store.top("v2", 10)] == [5]
    assert [r.count for r in store.top("v1", 10)] == [1]
    assert store.offsets() == {"a": 1, "b": 2}


def test_the_greatest_count_of_a_key_in_a_batch_wins(store: PartitionStore) -> None:
    store.apply(batch(("words", "k", 1), ("words", "k", 4), ("words", "k", 2)))
    assert [(r.key, r.count) for r in store.top("words", 10)] == [("k", 4)]


def test_delete_removes_row_and_index(store: PartitionStore) -> None:
    store.apply(batch(("words", "a", 1), ("words", "b", 2)))
    change = ChangeBatch()
    change.delete("words", "b")
    change.delete("words", "never-seen")
    store.apply(change)
    assert store.get("words", "b") is None
    assert [r.key for r in store.top("words", 10)] == ["a"]


def test_awkward_keys_round_trip(store: PartitionStore) -> None:
    keys = ["", "a\x00b", "a", "ü", "日本", "a\x00", "\x00"]
    store.apply(batch(*[("words", k, i + 1) for i, k in enumerate(keys)]))
    assert store.get_many("words", keys) == [
        CountRow(k, i + 1, 1_700_000_000_001 + i) for i, k in enumerate(keys)
    ]


def test_reopen_keeps_rows_index_and_offsets(make_store: StoreMaker) -> None:
    with make_store() as first:
        first.apply(batch(("words", "a", 2), ("words", "b", 5), offsets={"t": 42}))
    with make_store() as second:
        assert second.get("words", "a") == CountRow("a", 2, 1_700_000_000_002)
        assert [r.key for r in second.top("words", 10)] == ["b", "a"]
        assert second.offsets() == {"t": 42}


def test_closed_store_refuses_reads_and_writes(make_store: StoreMaker) -> None:
    store = make_store()
    with pytest.raises(StoreClosedError):
        store.get("words", "a")
    store.open()
    store.close()
    store.close()  # idempotent
    assert store.closed
    with pytest.raises(StoreClosedError):
        store.apply(batch(("words", "a", 1)))


def test_negative_count_is_refused() -> None:
    with pytest.raises(SerializationError, match="key 'k'"):
        ChangeBatch().put_count("words", CountRow("k", -1, 0))


def test_leveldb_store_is_locked_against_a_second_opener(tmp_path: Path) -> None:
    with LevelDBStore(tmp_path / "p") as _, pytest.raises(StoreError, match="cannot open"):
        LevelDBStore(tmp_path / "p").open()


def test_leveldb_store_lives_in_its_directory(tmp_path: Path) -> None:
    with LevelDBStore(tmp_path / "state" / "partition-3") as store:
        store.apply(batch(("words", "a", 1)))
    assert (tmp_path / "state" / "partition-3" / "CURRENT").is_file()


# keys as the pipeline writes them: UTF-8 decodable text (no lone surrogates)
keys = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)
upserts = st.lists(
    st.lists(st.tuples(keys, st.integers(0, 2**40)), max_size=20), min_size=1, max_size=8
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=upserts, limit=st.integers(1, 30))
def test_leveldb_top_equals_sorted_model_and_survives_reopen(
    batches: list[list[tuple[str, int]]], limit: int
) -> None:
    model: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "partition-0"
        for offset, rows in enumerate(batches, start=1):
            with LevelDBStore(path, cache_mb=1) as store:
                change = ChangeBatch(offsets={"t": offset * 100})
                for key, count in rows:
                    change.put_count("v", CountRow(key, count, count))
                    model[key] = max(count, model.get(key, count))  # a lower one is a replay
                store.apply(change)
        expected = sorted(model.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        with LevelDBStore(path, cache_mb=1) as store:
            assert [(r.key, r.count) for r in store.top("v", limit)] == expected
            assert store.get_many("v", list(model)) == [CountRow(k, c, c) for k, c in model.items()]
            assert store.offsets() == {"t": len(batches) * 100}
