"""Contract suite of scans: a view's rows read slice by slice from a position, forwards and
backwards, within a prefix and a key range, add up to the rows sorted by the UTF-8 bytes of
their keys (then window start, then event position), for every table."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.layout import ScannedRow, ScanSpan, Table
from node.store import ChangeBatch, PartitionStore
from schema import CountRow, EventRow, WindowRow
from tests.node.stores import BACKENDS, store_maker

VIEW = "v"
# short alphabets so that keys are often prefixes of each other, with NUL and non-ASCII
keys = st.text(alphabet=st.sampled_from(["a", "b", "\x00", "é", "\U0001f600", "\x7f"]), max_size=4)
bounds = st.none() | keys


def _batch(table: Table, key_list: list[str]) -> ChangeBatch:
    change = ChangeBatch()
    for index, key in enumerate(key_list):
        if table in (Table.COUNT, Table.TOP):
            change.put_count(VIEW, CountRow(key, index % 4 + 1, 5))  # equal counts too
        elif table is Table.LATEST:
            change.put_latest(VIEW, EventRow(key, 7, 0, index, {"n": index}))
        elif table is Table.WINDOW:
            change.put_window(VIEW, WindowRow(key, index % 3 * 60, index % 3 * 60 + 60, 1, 5))
        else:
            change.put_event(VIEW, EventRow(key, index % 2, 0, index, {"n": index}))
    return change


def _order(row: ScannedRow, table: Table) -> tuple[bytes | int, ...]:
    key = row.key.encode("utf-8")
    if table is Table.TOP:
        assert isinstance(row, CountRow)
        return (-row.count, key)
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

    chosen = sorted((r for r in rows if inside(r.key)), key=lambda r: _order(r, table))
    return chosen[::-1] if span.backward else chosen


def _all_rows(store: PartitionStore, table: Table) -> list[ScannedRow]:
    return [row for _, row in store.scan(VIEW, table, ScanSpan(), 10_000, -1)]


def _pages(store: PartitionStore, table: Table, span: ScanSpan, size: int) -> list[ScannedRow]:
    found: list[ScannedRow] = []
    after = None
    while True:
        page_span = ScanSpan(span.prefix, span.since, span.until, after, span.backward)
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
        # the count index is in count order: no prefix or key range applies
        span = (
            ScanSpan(prefix, since, until, None, backward)
            if table.keyed
            else ScanSpan("", backward=backward)
        )
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


def test_a_prefix_without_a_match_and_an_empty_range_read_nothing(store: PartitionStore) -> None:
    store.apply(_batch(Table.COUNT, ["ab", "b"]))
    assert store.scan(VIEW, Table.COUNT, ScanSpan(prefix="c"), 10, -1) == []
    assert store.scan(VIEW, Table.COUNT, ScanSpan(since="b", until="a"), 10, -1) == []
    assert store.scan(VIEW, Table.COUNT, ScanSpan(prefix="a", since="b"), 10, -1) == []
