"""A view's totals (number of keys, sum of counts; per window for windowed views), kept by
LevelDB's `apply` in the same write as the rows: after any sequence of batches (upserts,
deletes, expiries) they are what the in-memory model computes from its rows."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import plyvel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.storage import layout
from node.storage.layout import Total
from node.storage.store import ChangeBatch, LevelDBStore, PartitionStore
from schema import CountRow, WindowRow, pack
from tests.node.memory_store import MemoryStore

VIEW = "v"
MINUTE = 60
keys = st.sampled_from(["a", "b", "ab", "é", "\x00"])
count_changes = st.tuples(st.just("count"), keys, st.none() | st.integers(0, 9))
# a window's length in minutes: 1 for tumbling windows; sessions of several keys may share a
# start and end differently
window_changes = st.tuples(
    st.just("window"),
    keys,
    st.tuples(st.integers(0, 3), st.integers(1, 3), st.none() | st.integers(0, 9)),
)
expiries = st.tuples(st.just("expire"), st.just(""), st.integers(0, 4 * MINUTE))
batches = st.lists(st.lists(st.one_of(count_changes, window_changes, expiries), max_size=8))


def _batch(changes: list[tuple[str, str, object]]) -> ChangeBatch:
    batch = ChangeBatch()
    for what, key, value in changes:
        if what == "count":
            if value is None:
                batch.delete(VIEW, key)
            else:
                assert isinstance(value, int)
                batch.put_count(VIEW, CountRow(key, value, 1))
        elif what == "window":
            assert isinstance(value, tuple)
            index, length, count = value
            start = index * MINUTE
            if count is None:
                batch.delete_window(VIEW, key, start)
            else:
                batch.put_window(VIEW, WindowRow(key, start, start + length * MINUTE, count, 1))
        else:
            assert isinstance(value, int)
            batch.expire_windows(VIEW, value)
    return batch


def _totals(store: PartitionStore) -> tuple[Total, list[tuple[int, int, Total]]]:
    return store.total(VIEW), store.window_totals(VIEW, None, None, -1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches)
def test_kept_totals_are_what_the_rows_add_up_to(
    changes: list[list[tuple[str, str, object]]],
) -> None:
    model = MemoryStore().open()
    with tempfile.TemporaryDirectory() as directory, LevelDBStore(Path(directory)) as store:
        for batch in changes:
            model.apply(_batch(batch))
            store.apply(_batch(batch))
            assert _totals(store) == _totals(model)


def test_window_totals_by_time_range_and_horizon(store: PartitionStore) -> None:
    batch = ChangeBatch()
    for start, counts in ((0, (2, 3)), (60, (4,)), (120, (1, 1, 1))):
        for index, count in enumerate(counts):
            batch.put_window(VIEW, WindowRow(f"k{index}", start, start + 60, count, 1))
    store.apply(batch)
    assert store.window_totals(VIEW, None, None, -1) == [
        (0, 60, Total(2, 5)),
        (60, 120, Total(1, 4)),
        (120, 180, Total(3, 3)),
    ]
    assert store.window_totals(VIEW, 60, 120, -1) == [(60, 120, Total(1, 4))]
    assert [w[0] for w in store.window_totals(VIEW, None, None, horizon_ms=60)] == [60, 120]
    assert store.total(VIEW) == Total()


def test_a_store_made_before_totals_were_kept_counts_them_once_at_open(tmp_path: Path) -> None:
    batch = ChangeBatch()
    batch.put_count(VIEW, CountRow("a", 3, 1))
    batch.put_count(VIEW, CountRow("b", 4, 1))
    batch.put_window(VIEW, WindowRow("a", 0, 60, 5, 1))
    with LevelDBStore(tmp_path / "p") as store:
        store.apply(batch)
    db = plyvel.DB(str(tmp_path / "p"))  # as an older version left it: rows, no totals
    for key in (
        layout.TOTALS_KEY,
        layout.WINDOW_TOTALS_KEY,
        layout.total_key(VIEW),
        layout.window_total_key(VIEW, 0, 60),
    ):
        db.delete(key)
    db.close()
    (tmp_path / "p" / "STATEFED-CLOSED").unlink()  # the files changed after the clean close
    with LevelDBStore(tmp_path / "p") as store:
        assert store.total(VIEW) == Total(2, 7)
        assert store.window_totals(VIEW, None, None, -1) == [(0, 60, Total(1, 5))]


def _expiry(horizon_ms: int) -> ChangeBatch:
    batch = ChangeBatch()
    batch.expire_windows(VIEW, horizon_ms)
    return batch


def test_hopping_window_totals_are_per_window(store: PartitionStore) -> None:
    batch = ChangeBatch()
    for start, key, count in ((0, "a", 2), (60, "a", 3), (60, "b", 1), (120, "b", 4)):
        batch.put_window(VIEW, WindowRow(key, start, start + 120, count, 1))  # slide 60
    store.apply(batch)
    assert store.window_totals(VIEW, None, None, -1) == [
        (0, 120, Total(1, 2)),
        (60, 180, Total(2, 4)),
        (120, 240, Total(1, 4)),
    ]
    store.apply(_expiry(120))
    assert store.window_totals(VIEW, None, None, -1) == [
        (60, 180, Total(2, 4)),
        (120, 240, Total(1, 4)),
    ]


SHORT = WindowRow("short", 1_000, 2_000, 1, 1_000)  # sessions of two keys: one start
LONG = WindowRow("long", 1_000, 500_000, 7, 499_000)


@pytest.mark.parametrize(
    "written", [(SHORT, LONG), (LONG, SHORT)], ids=["short-first", "long-first"]
)
def test_sessions_sharing_a_start_keep_a_total_per_end(
    store: PartitionStore, written: tuple[WindowRow, WindowRow]
) -> None:
    batch = ChangeBatch()
    for row in written:
        batch.put_window(VIEW, row)
    store.apply(batch)
    both = [(1_000, 2_000, Total(1, 1)), (1_000, 500_000, Total(1, 7))]
    assert store.window_totals(VIEW, None, None, 0) == both
    assert store.window_totals(VIEW, 1_000, 1_001, 0) == both
    long_only = [(1_000, 500_000, Total(1, 7))]
    assert store.window_totals(VIEW, None, None, 10_000) == long_only  # read past the short
    store.apply(_expiry(10_000))  # the short session expires, the long one lives
    assert store.window_totals(VIEW, None, None, 0) == long_only
    store.apply(_expiry(500_000))
    assert store.window_totals(VIEW, None, None, 0) == []


def test_a_session_rewritten_with_another_end_moves_its_total(store: PartitionStore) -> None:
    batch = ChangeBatch()
    batch.put_window(VIEW, SHORT)
    batch.put_window(VIEW, LONG)
    store.apply(batch)
    batch = ChangeBatch()
    batch.put_window(VIEW, WindowRow("short", 1_000, 3_000, 2, 2_000))
    store.apply(batch)
    assert store.window_totals(VIEW, None, None, 0) == [
        (1_000, 3_000, Total(1, 2)),
        (1_000, 500_000, Total(1, 7)),
    ]
    batch = ChangeBatch()
    batch.delete_window(VIEW, "long", 1_000)
    store.apply(batch)
    assert store.window_totals(VIEW, None, None, 0) == [(1_000, 3_000, Total(1, 2))]
    batch = ChangeBatch()  # rewritten as its old span expires: the old total goes with it
    batch.put_window(VIEW, WindowRow("short", 1_000, 8_000, 3, 7_000))
    batch.expire_windows(VIEW, 5_000)
    store.apply(batch)
    assert store.window_totals(VIEW, None, None, 0) == [(1_000, 8_000, Total(1, 3))]
    batch = ChangeBatch()  # rewritten with a span that has expired: no total is left
    batch.put_window(VIEW, WindowRow("short", 1_000, 4_000, 1, 3_000))
    batch.expire_windows(VIEW, 6_000)
    store.apply(batch)
    assert store.window_totals(VIEW, None, None, 0) == []


def test_a_store_with_a_total_per_start_recounts_them_per_end_at_open(tmp_path: Path) -> None:
    batch = ChangeBatch()
    batch.put_window(VIEW, SHORT)
    batch.put_window(VIEW, LONG)
    batch.put_window(VIEW, WindowRow("a", 0, 60, 5, 1))
    with LevelDBStore(tmp_path / "p") as store:
        store.apply(batch)
    db = plyvel.DB(str(tmp_path / "p"))  # as an older version left it: one total per start
    with db.iterator(prefix=pack("wtotal"), include_value=False) as totals:
        for key in totals:
            db.delete(key)
    db.put(pack("wtotal", VIEW, 0), struct.pack(">QQq", 1, 5, 60))
    db.put(pack("wtotal", VIEW, 1_000), struct.pack(">QQq", 2, 8, 2_000))  # the last end
    db.delete(layout.WINDOW_TOTALS_KEY)
    db.close()
    (tmp_path / "p" / "STATEFED-CLOSED").unlink()  # the files changed after the clean close
    with LevelDBStore(tmp_path / "p") as store:
        assert store.window_totals(VIEW, None, None, 0) == [
            (0, 60, Total(1, 5)),
            (1_000, 2_000, Total(1, 1)),
            (1_000, 500_000, Total(1, 7)),
        ]
        store.apply(_expiry(10_000))
        assert store.window_totals(VIEW, None, None, 0) == [(1_000, 500_000, Total(1, 7))]
