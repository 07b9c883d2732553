"""Contract suite of scans: a view's rows read slice by slice from a position, forwards and
backwards, within a prefix and a key range (a range of window starts for the window
indexes), add up to the rows sorted by the UTF-8 bytes of their keys (then window start,
then event position), or by the index's order, for every table."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import plyvel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.storage import layout
from node.storage.layout import ScannedRow, ScanSpan, Table
from node.storage.store import ChangeBatch, LevelDBStore, PartitionStore
from schema import CountRow, EventRow, WindowRow
from tests.node.stores import BACKENDS, store_maker

VIEW = "v"
# short alphabets so that keys are often prefixes of each other, with NUL and non-ASCII
keys = st.text(alphabet=st.sampled_from(["a", "b", "\x00", "é", "\U0001f600", "\x7f"]), max_size=4)
bounds = st.none() | keys
times = st.none() | st.integers(-60, 240)
WINDOWED = (Table.WINDOW, Table.WINDOW_TOP, Table.WINDOW_START)


def _batch(table: Table, key_list: list[str]) -> ChangeBatch:
    change = ChangeBatch()
    for index, key in enumerate(key_list):
        if table in (Table.COUNT, Table.TOP):
            change.put_count(VIEW, CountRow(key, index % 4 + 1, 5))  # equal counts too
        elif table is Table.LATEST:
            change.put_latest(VIEW, EventRow(key, 7, 0, index, {"n": index}))
        elif table in WINDOWED:  # equal counts in a window too
            start = index % 3 * 60
            change.put_window(VIEW, WindowRow(key, start, start + 60, index % 2 + 1, 5))
        else:
            change.put_event(VIEW, EventRow(key, index % 2, 0, index, {"n": index}))
    return change


def _order(row: ScannedRow, table: Table) -> tuple[bytes | int, ...]:
    key = row.key.encode("utf-8")
    if table is Table.TOP:
        assert isinstance(row, CountRow)
        return (-row.count, key)
    if table is Table.WINDOW_TOP:
        assert isinstance(row, WindowRow)
        return (row.start_ms, -row.count, key)
    if table is Table.WINDOW_START:
        assert isinstance(row, WindowRow)
        return (row.start_ms, key)
    if isinstance(row, WindowRow):
        return (key, row.start_ms)
    if isinstance(row, EventRow):
        return (key, row.event_ms, row.source_partition, row.source_offset)
    return (key,)


def _truth(rows: list[ScannedRow], span: ScanSpan, table: Table) -> list[ScannedRow]:
    def inside(key: str) -> bool:
        data = key.encode("utf-8")
        return (
            data.startswith(span.prefix.encode("utf-8"))
            and (span.since is None or data >= span.since.encode("utf-8"))
            and (span.until is None or data < span.until.encode("utf-8"))
        )

    def timely(row: ScannedRow) -> bool:
        assert isinstance(row, WindowRow)
        return (span.since_ms is None or row.start_ms >= span.since_ms) and (
            span.until_ms is None or row.start_ms < span.until_ms
        )

    chosen = sorted(
        (r for r in rows if inside(r.key) and (not table.timed or timely(r))),
        key=lambda r: _order(r, table),
    )
    return chosen[::-1] if span.backward else chosen


def _all_rows(store: PartitionStore, table: Table) -> list[ScannedRow]:
    return [row for _, row in store.scan(VIEW, table, ScanSpan(), 10_000, -1)]


def _pages(store: PartitionStore, table: Table, span: ScanSpan, size: int) -> list[ScannedRow]:
    found: list[ScannedRow] = []
    after = None
    while True:
        page_span = dataclasses.replace(span, after=after)
        page = store.scan(VIEW, table, page_span, size, -1)
        found.extend(row for _, row in page)
        if len(page) < size:
            return found
        after = page[-1][0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("table", list(Table))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key_list=st.lists(keys.filter(bool), max_size=25),
    prefix=keys,
    since=bounds,
    until=bounds,
    since_ms=times,
    until_ms=times,
    size=st.integers(1, 6),
    backward=st.booleans(),
)
def test_slices_add_up_to_the_rows_in_utf8_key_order(
    backend: str,
    table: Table,
    key_list: list[str],
    prefix: str,
    since: str | None,
    until: str | None,
    since_ms: int | None,
    until_ms: int | None,
    size: int,
    backward: bool,
) -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        store_maker(backend, Path(directory))() as store,
    ):
        store.apply(_batch(table, key_list))
        stored = _all_rows(store, table)
        assert stored == _truth(stored, ScanSpan(), table)
        # the indexes are in count or start order: no prefix or key range applies to them,
        # and a range of starts only to the window indexes
        span = (
            ScanSpan(prefix, since, until, None, backward)
            if table.keyed
            else ScanSpan("", backward=backward)
        )
        if table.timed:
            span = dataclasses.replace(span, since_ms=since_ms, until_ms=until_ms)
        assert _pages(store, table, span, size) == _truth(stored, span, table)


def test_expired_windows_are_skipped_and_other_views_are_not_read(store: PartitionStore) -> None:
    change = ChangeBatch()
    change.put_window(VIEW, WindowRow("a", 0, 60, 1, 5))
    change.put_window(VIEW, WindowRow("a", 60, 120, 2, 5))
    change.put_window("other", WindowRow("a", 60, 120, 3, 5))
    change.put_count(VIEW, CountRow("a", 1, 5))
    store.apply(change)
    scanned = store.scan(VIEW, Table.WINDOW, ScanSpan(), 10, horizon_ms=60)
    assert [row for _, row in scanned] == [WindowRow("a", 60, 120, 2, 5)]


def _windows(store: PartitionStore, table: Table, span: ScanSpan, horizon: int) -> list[WindowRow]:
    rows = [row for _, row in store.scan(VIEW, table, span, 10, horizon)]
    assert all(isinstance(row, WindowRow) for row in rows)
    return rows  # type: ignore[return-value]


@pytest.mark.parametrize("table", WINDOWED)
def test_every_window_order_skips_expired_windows_and_rewritten_ones_move(
    store: PartitionStore, table: Table
) -> None:
    change = ChangeBatch()
    windows = (("b", 0, 1), ("a", 60, 1), ("b", 60, 5), ("a", 120, 1), ("c", 120, 2), ("d", 120, 1))
    for key, start, count in windows:
        change.put_window(VIEW, WindowRow(key, start, start + 60, count, 5))
    store.apply(change)
    rewrite = ChangeBatch()
    rewrite.put_window(VIEW, WindowRow("a", 60, 120, 4, 6))
    rewrite.delete_window(VIEW, "c", 120)
    rewrite.expire_windows(VIEW, 60)  # the window [0, 60) ends at the horizon
    store.apply(rewrite)
    found = [(r.key, r.start_ms, r.count) for r in _windows(store, table, ScanSpan(), 60)]
    expected = {
        Table.WINDOW: [("a", 60, 4), ("a", 120, 1), ("b", 60, 5), ("d", 120, 1)],
        Table.WINDOW_TOP: [("b", 60, 5), ("a", 60, 4), ("a", 120, 1), ("d", 120, 1)],
        Table.WINDOW_START: [("a", 60, 4), ("b", 60, 5), ("a", 120, 1), ("d", 120, 1)],
    }[table]
    assert found == expected
    if table.timed:  # one window
        one = _windows(store, table, ScanSpan(since_ms=60, until_ms=61), -1)
        assert [r.key for r in one] == (["b", "a"] if table is Table.WINDOW_TOP else ["a", "b"])


def test_a_store_made_before_the_start_index_builds_it_once_at_open(tmp_path: Path) -> None:
    change = ChangeBatch()
    change.put_window(VIEW, WindowRow("b", 0, 60, 2, 1))
    change.put_window(VIEW, WindowRow("a", 60, 120, 5, 1))
    with LevelDBStore(tmp_path / "p") as store:
        store.apply(change)
    db = plyvel.DB(str(tmp_path / "p"))  # as an older version left it: no "wstart" index
    with db.iterator(prefix=Table.WINDOW_START.head(VIEW), include_value=False) as entries:
        for key in entries:
            db.delete(key)
    db.delete(layout.WINDOW_STARTS_KEY)
    db.close()
    (tmp_path / "p" / "STATEFED-CLOSED").unlink()  # the files changed after the clean close
    with LevelDBStore(tmp_path / "p") as store:
        scanned = _windows(store, Table.WINDOW_START, ScanSpan(), -1)
        assert [(r.key, r.start_ms) for r in scanned] == [("b", 0), ("a", 60)]


def test_a_prefix_without_a_match_and_an_empty_range_read_nothing(store: PartitionStore) -> None:
    store.apply(_batch(Table.COUNT, ["ab", "b"]))
    assert store.scan(VIEW, Table.COUNT, ScanSpan(prefix="c"), 10, -1) == []
    assert store.scan(VIEW, Table.COUNT, ScanSpan(since="b", until="a"), 10, -1) == []
    assert store.scan(VIEW, Table.COUNT, ScanSpan(prefix="a", since="b"), 10, -1) == []


@pytest.mark.parametrize("backend", ["leveldb", "memory"])
def test_a_backward_slice_includes_its_lower_bound_when_it_is_the_only_key(backend: str) -> None:
    # plyvel's reverse iterator yields nothing when the only key in [start, stop) is start
    with tempfile.TemporaryDirectory() as directory, store_maker(backend, Path(directory))() as s:
        s.apply(_batch(Table.COUNT, ["a"]))
        rows = s.scan(VIEW, Table.COUNT, ScanSpan("", "a", None, None, True), 5, -1)
        assert [row.key for _, row in rows] == ["a"]
