"""A view's totals (number of keys, sum of counts; per window for windowed views), kept by
LevelDB's `apply` in the same write as the rows: after any sequence of batches (upserts,
deletes, expiries) they are what the in-memory model computes from its rows."""

from __future__ import annotations

import tempfile
from pathlib import Path

import plyvel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.storage import layout
from node.storage.layout import Total
from node.storage.store import ChangeBatch, LevelDBStore, PartitionStore
from schema import CountRow, WindowRow
from tests.node.memory_store import MemoryStore

VIEW = "v"
MINUTE = 60
keys = st.sampled_from(["a", "b", "ab", "é", "\x00"])
count_changes = st.tuples(st.just("count"), keys, st.none() | st.integers(0, 9))
window_changes = st.tuples(
    st.just("window"), keys, st.tuples(st.integers(0, 3), st.none() | st.integers(0, 9))
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
            index, count = value
            start = index * MINUTE
            if count is None:
                batch.delete_window(VIEW, key, start)
            else:
                batch.put_window(VIEW, WindowRow(key, start, start + MINUTE, count, 1))
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
    for key in (layout.TOTALS_KEY, layout.total_key(VIEW), layout.window_total_key(VIEW, 0)):
        db.delete(key)
    db.close()
    (tmp_path / "p" / "STATEFED-CLOSED").unlink()  # the files changed after the clean close
    with LevelDBStore(tmp_path / "p") as store:
        assert store.total(VIEW) == Total(2, 7)
        assert store.window_totals(VIEW, None, None, -1) == [(0, 60, Total(1, 5))]
