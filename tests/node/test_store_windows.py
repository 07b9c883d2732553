"""Contract suite of windowed_count in partition stores: windows by key and start, the
per-window top index, and retention (expired windows are never returned, and purged); and
of a windowed aggregate view's windows, whose results every read returns."""

from __future__ import annotations

import tempfile
from pathlib import Path

import plyvel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.errors import SerializationError
from node.storage.layout import ScanSpan, Table
from node.storage.store import ChangeBatch, PartitionStore
from schema import WindowRow, pack, unpack
from tests.node.stores import BACKENDS, StoreMaker, store_maker

V = "per_minute"
SIZE = 60_000
NEVER = -1  # a horizon before every window: reads see every stored window


def window(key: str, start: int, count: int) -> WindowRow:
    return WindowRow(key, start, start + SIZE, count, start + count)


def put(*rows: WindowRow, horizon: int | None = None, view: str = V) -> ChangeBatch:
    change = ChangeBatch()
    for row in rows:
        change.put_window(view, row)
    if horizon is not None:
        change.expire_windows(view, horizon)
    return change


def ranked(store: PartitionStore, start: int, horizon: int = NEVER) -> list[tuple[str, int]]:
    return [(r.key, r.count) for r in store.top_window(V, start, 100, horizon)]


def test_windows_of_a_key_by_start_with_open_and_closed_ends(store: PartitionStore) -> None:
    rows = [window("a", i * SIZE, i + 1) for i in range(5)]
    store.apply(put(*rows, window("b", 0, 9), window("ab", SIZE, 2)))
    assert store.windows(V, "a", None, None, NEVER) == rows
    assert store.windows(V, "a", SIZE, 3 * SIZE, NEVER) == rows[1:3]
    assert store.windows(V, "a", SIZE + 1, None, NEVER) == rows[2:]
    assert store.windows(V, "a", None, SIZE, NEVER) == rows[:1]
    assert store.windows(V, "a", 2 * SIZE, 2 * SIZE, NEVER) == []
    assert store.windows(V, "nope", None, None, NEVER) == []
    assert store.windows("other", "a", None, None, NEVER) == []


def test_top_of_one_window_orders_by_count_then_key(store: PartitionStore) -> None:
    store.apply(put(window("b", 0, 2), window("a", 0, 2), window("z", 0, 7), window("z", SIZE, 1)))
    assert ranked(store, 0) == [("z", 7), ("a", 2), ("b", 2)]
    assert ranked(store, SIZE) == [("z", 1)]
    assert store.top_window(V, 0, 1, NEVER) == [window("z", 0, 7)]
    assert ranked(store, 2 * SIZE) == []


def test_upsert_moves_the_index_entry_and_delete_removes_both(store: PartitionStore) -> None:
    store.apply(put(window("a", 0, 5), window("b", 0, 3)))
    store.apply(put(window("b", 0, 9), window("a", 0, 1)))
    assert ranked(store, 0) == [("b", 9), ("a", 1)]
    change = ChangeBatch()
    change.delete_window(V, "b", 0)
    change.delete_window(V, "never-seen", 0)
    store.apply(change)
    assert ranked(store, 0) == [("a", 1)]
    assert store.windows(V, "b", None, None, NEVER) == []


def test_expired_windows_are_never_returned(store: PartitionStore) -> None:
    store.apply(put(window("a", 0, 1), window("a", SIZE, 2), window("b", 0, 3)))
    # a window ending exactly at the horizon is expired
    assert store.windows(V, "a", None, None, SIZE) == [window("a", SIZE, 2)]
    assert ranked(store, 0, horizon=SIZE) == []
    assert ranked(store, SIZE, horizon=SIZE) == [("a", 2)]
    assert ranked(store, 0, horizon=SIZE - 1) == [("b", 3), ("a", 1)]


def test_a_horizon_purges_rows_and_index_and_drops_expired_upserts(
    store: PartitionStore,
) -> None:
    store.apply(put(window("a", 0, 1), window("a", SIZE, 2), window("b", 0, 3)))
    # the batch both purges the old window of a and brings an already expired one of c
    store.apply(put(window("c", 0, 4), window("c", 2 * SIZE, 5), horizon=SIZE))
    assert store.windows(V, "a", None, None, NEVER) == [window("a", SIZE, 2)]
    assert store.windows(V, "b", None, None, NEVER) == []
    assert store.windows(V, "c", None, None, NEVER) == [window("c", 2 * SIZE, 5)]
    assert ranked(store, 0) == []
    # a horizon only touches its own view
    store.apply(put(window("a", 0, 1), view="other"))
    store.apply(put(horizon=10 * SIZE, view=V))
    assert store.windows("other", "a", None, None, NEVER) == [window("a", 0, 1)]


def test_a_rewritten_window_survives_the_purge_of_its_old_value(store: PartitionStore) -> None:
    store.apply(put(window("a", SIZE, 1)))
    store.apply(put(window("a", SIZE, 4), horizon=SIZE))
    assert store.windows(V, "a", None, None, NEVER) == [window("a", SIZE, 4)]
    assert ranked(store, SIZE) == [("a", 4)]


def test_a_view_found_without_windows_is_purged_again_once_one_is_written(
    store: PartitionStore,
) -> None:
    """A store skips purging a view it found holding no window (`LevelDBStore`), and
    purges it again from the batch after one of its windows is written (also when another
    one of the batch expired as it was written)."""
    store.apply(put(horizon=SIZE))  # nothing to purge: the view is known empty
    store.apply(put(window("a", 0, 1)))
    store.apply(put(horizon=SIZE))
    assert store.windows(V, "a", None, None, NEVER) == []
    assert store.window_totals(V, None, None, NEVER) == []
    store.apply(put(horizon=3 * SIZE))  # empty again
    store.apply(put(window("b", SIZE, 2), horizon=SIZE))
    store.apply(put(window("c", 0, 3), horizon=2 * SIZE))  # expired as it is written
    store.apply(put(horizon=3 * SIZE))
    assert store.windows(V, "b", None, None, NEVER) == []
    assert store.windows(V, "c", None, None, NEVER) == []
    assert store.window_totals(V, None, None, NEVER) == []


def _at(row: WindowRow) -> tuple[str, int]:
    return (row.key, row.start_ms)


def test_a_windows_results_come_back_from_every_read(make_store: StoreMaker) -> None:
    def results(key: str, start: int, count: int, basket: float | None) -> WindowRow:
        fields = {"basket": basket, "products": count, "name": "Straße"}
        return WindowRow(key, start, start + SIZE, count, start + count, fields)

    rows = [results("a", 0, 2, 10.5), results("b", 0, 5, None), results("a", SIZE, 1, -1e300)]
    with make_store() as first:
        first.apply(put(*rows))
        first.apply(put(results("a", 0, 3, 7.25)))  # rewritten: the index entry moves
    rows[0] = results("a", 0, 3, 7.25)
    with make_store() as store:
        assert store.windows(V, "a", None, None, NEVER) == [rows[0], rows[2]]
        assert store.top_window(V, 0, 10, NEVER, results=True) == [rows[1], rows[0]]
        for table in (Table.WINDOW, Table.WINDOW_START, Table.WINDOW_TOP):
            scanned = store.scan(V, table, ScanSpan(), 10, NEVER, results=True)
            windows = [row for _, row in scanned if isinstance(row, WindowRow)]
            assert sorted(windows, key=_at) == sorted(rows, key=_at), table


def _basket(key: str, start: int, basket: object) -> WindowRow:
    return WindowRow(key, start, start + SIZE, 1, start, {"basket": basket})


def _by_basket(store: PartitionStore, start: int, horizon: int = NEVER) -> list[str]:
    return [w.key for w in store.top_window(V, start, 10, horizon, results=True, by="basket")]


def test_windows_rank_by_a_result_per_window_and_leave_the_index_when_gone(
    tmp_path: Path,
) -> None:
    ranked = ("basket",)

    def apply(store: PartitionStore, *rows: WindowRow, horizon: int | None = None) -> None:
        change = ChangeBatch()
        for row in rows:
            change.put_window(V, row, ranked)
        if horizon is not None:
            change.expire_windows(V, horizon)
        store.apply(change)

    for backend in BACKENDS:
        with store_maker(backend, tmp_path / backend)() as store:
            apply(store, _basket("a", 0, 2.5), _basket("b", 0, 9), _basket("c", 0, None))
            apply(store, _basket("a", SIZE, 1), _basket("z", SIZE, -3))
            assert _by_basket(store, 0) == ["b", "a"]  # c has no basket: in no ranking
            assert store.top_window(V, 0, 1, NEVER, results=True, by="basket") == [
                _basket("b", 0, 9)
            ]
            apply(store, _basket("b", 0, 1.5), _basket("c", 0, 4))  # rewritten: they move
            assert _by_basket(store, 0) == ["c", "a", "b"]
            change = ChangeBatch()
            change.delete_window(V, "c", 0, ranked)
            store.apply(change)
            assert _by_basket(store, 0) == ["a", "b"]
            assert _by_basket(store, SIZE) == ["a", "z"]
            apply(store, horizon=SIZE)  # the windows starting at 0 end at SIZE: purged
            assert _by_basket(store, 0, NEVER) == []
            assert _by_basket(store, SIZE) == ["a", "z"]
            # a result the view no longer has: its entries go with their windows too
            gone = ChangeBatch()
            gone.put_window(V, WindowRow("g", 0, SIZE, 1, 0, {"gone": 1.0}), ("gone",))
            store.apply(gone)
            apply(store, horizon=SIZE)
    # and the purged windows left no entry in the LevelDB index
    db = plyvel.DB(str(tmp_path / "leveldb" / "partition-0"))
    try:
        entries = [unpack(k) for k in db.iterator(prefix=pack("wrank"), include_value=False)]
    finally:
        db.close()
    assert sorted(e[3] for e in entries) == [SIZE, SIZE]


def test_windows_survive_reopen(make_store: StoreMaker) -> None:
    with make_store() as first:
        first.apply(put(window("a", 0, 2), window("b", 0, 5)))
    with make_store() as second:
        assert ranked(second, 0) == [("b", 5), ("a", 2)]
        assert second.windows(V, "a", 0, None, NEVER) == [window("a", 0, 2)]


@pytest.mark.parametrize(
    "row",
    [WindowRow("k", -SIZE, 0, 1, 0), WindowRow("k", 0, 0, 1, 0), WindowRow("k", 0, SIZE, -1, 0)],
)
def test_impossible_windows_are_refused_while_building_the_batch(row: WindowRow) -> None:
    with pytest.raises(SerializationError, match="view v: key 'k'"):
        ChangeBatch().put_window("v", row)


# -- against a model, with a clock ----------------------------------------------------------

keys = st.sampled_from(["a", "b", "c", "ab", "", "a\x00", "ü"])
starts = st.integers(0, 12).map(lambda i: i * SIZE)
rows = st.builds(window, keys, starts, st.integers(0, 50))
# each batch: upserts, and how far the clock moved before it (ms)
batches = st.lists(
    st.tuples(st.lists(rows, max_size=12), st.integers(0, 3 * SIZE)), min_size=1, max_size=6
)


def model_after(
    steps: list[tuple[list[WindowRow], int]], retention: int
) -> dict[tuple[str, int], WindowRow]:
    """What a store holds after the batches: purge what expired, then upsert (unless expired)."""
    model: dict[tuple[str, int], WindowRow] = {}
    now = retention
    for upserts, moved in steps:
        now += moved
        horizon = now - retention
        model = {at: w for at, w in model.items() if w.end_ms > horizon}
        for row in upserts:
            if row.end_ms > horizon:
                model[(row.key, row.start_ms)] = row
            else:
                model.pop((row.key, row.start_ms), None)
    return model


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=batches,
    retention=st.sampled_from([SIZE, 5 * SIZE]),
    later=st.integers(0, 2 * SIZE),
    since=st.none() | starts,
    until=st.none() | starts,
)
def test_ranges_and_tops_equal_a_model_with_retention(
    backend: str,
    steps: list[tuple[list[WindowRow], int]],
    retention: int,
    later: int,
    since: int | None,
    until: int | None,
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        make = store_maker(backend, Path(directory))
        now = retention
        for upserts, moved in steps:
            now += moved
            with make() as store:
                store.apply(put(*upserts, horizon=now - retention))
        stored = model_after(steps, retention)
        # reads happen later still: what expired since the last batch is hidden, not purged
        read_horizon = now + later - retention
        visible = {at: w for at, w in stored.items() if w.end_ms > read_horizon}
        with make() as store:
            for key in {k for k, _ in stored} | {"a"}:
                expected = sorted(
                    (w for (k, s), w in visible.items() if k == key), key=lambda w: w.start_ms
                )
                expected = [
                    w
                    for w in expected
                    if (since is None or since <= w.start_ms)
                    and (until is None or w.start_ms < until)
                ]
                assert store.windows(V, key, since, until, read_horizon) == expected
                everything = [w for (k, _), w in sorted(stored.items()) if k == key]
                assert store.windows(V, key, None, None, NEVER) == everything, "not purged"
            for start in {s for _, s in stored} | {0}:
                expected_top = sorted(
                    (w for (_, s), w in visible.items() if s == start),
                    key=lambda w: (-w.count, w.key),
                )
                assert store.top_window(V, start, 5, read_horizon) == expected_top[:5]
