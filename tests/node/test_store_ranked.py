"""The rank index of aggregate views' rows: every store backend ranks a view's latest rows by
each ranked field (value descending as a double, then key ascending), keeps it right as rows
are rewritten, replayed and deleted, and leaves out rows without a number there; scans it
slice by slice in either direction; and keeps the view's totals: its keys, and each
field's sum, least and greatest value."""

from __future__ import annotations

import math
import tempfile
from fractions import Fraction
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.storage.layout import (
    ResultTotal,
    ScanSpan,
    Table,
    decode_aggregate_total,
    encode_aggregate_total,
    exact_steps,
    rounded_sum,
)
from node.storage.store import ChangeBatch, LevelDBStore, PartitionStore
from runtime.ranking import is_rankable, value_rank
from schema import EventRow

VIEW = "spend"
RANKED = ("revenue", "orders")


def _row(key: str, events: int, revenue: object, orders: object) -> EventRow:
    return EventRow(key, 1_700_000_000_000, 0, events, {"revenue": revenue, "orders": orders})


def test_rows_rank_by_each_field_and_move_when_rewritten(store: PartitionStore) -> None:
    first = ChangeBatch()
    first.put_latest(VIEW, _row("a", 1, 10.5, 1), RANKED)
    first.put_latest(VIEW, _row("b", 2, 99.0, 2), RANKED)
    first.put_latest(VIEW, _row("c", 1, None, 1), RANKED)  # no revenue: in no revenue ranking
    store.apply(first)
    assert store.aggregate_total(VIEW, RANKED) == (
        3,
        [ResultTotal("revenue", 109.5, 10.5, 99.0), ResultTotal("orders", 4.0, 1.0, 2.0)],
    )
    assert [r.key for r in store.ranked(VIEW, "revenue", 10)] == ["b", "a"]
    assert [r.key for r in store.ranked(VIEW, "orders", 10)] == ["b", "a", "c"]
    later = ChangeBatch()
    later.put_latest(VIEW, _row("a", 3, 200.25, 3), RANKED)
    later.put_latest(VIEW, _row("b", 1, 1e9, 9), RANKED)  # an older row: never replaces
    later.delete_latest(VIEW, "c", RANKED)
    store.apply(later)
    assert store.ranked(VIEW, "revenue", 1) == [_row("a", 3, 200.25, 3)]
    assert [r.key for r in store.ranked(VIEW, "orders", 10)] == ["a", "b"]
    assert store.ranked(VIEW, "revenue", 0) == []
    assert store.ranked("other", "revenue", 10) == []
    assert store.aggregate_total(VIEW, RANKED) == (
        2,
        [ResultTotal("revenue", 299.25, 99.0, 200.25), ResultTotal("orders", 5.0, 2.0, 3.0)],
    )
    assert store.aggregate_total("other", ("revenue",)) == (
        0,
        [ResultTotal("revenue", *[None] * 3)],
    )


def test_a_scan_by_a_result_pages_its_ranking_both_ways(store: PartitionStore) -> None:
    batch = ChangeBatch()
    for index, revenue in enumerate([5.0, -2.5, 5.0, None, 1e300, 0, -0.0, 7]):
        batch.put_latest(VIEW, _row(f"k{index}", 1, revenue, index), RANKED)
    store.apply(batch)
    ranking = [r.key for r in store.ranked(VIEW, "revenue", 100)]
    assert ranking == ["k4", "k7", "k0", "k2", "k5", "k6", "k1"]  # k3 has no revenue

    def pages(backward: bool) -> list[str]:
        keys: list[str] = []
        after = None
        while True:
            span = ScanSpan(after=after, backward=backward, by="revenue")
            rows = store.scan(VIEW, Table.RANK, span, 3, -1)
            if not rows:
                return keys
            keys += [row.key for _, row in rows]
            after = rows[-1][0]

    assert pages(backward=False) == ranking
    assert pages(backward=True) == ranking[::-1]
    assert store.scan(VIEW, Table.RANK, ScanSpan(by="nothing"), 3, -1) == []


_numbers = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 0.0, -0.0, 1, 1.0, "7"]),  # equal values of both types, and text
)
_updates = st.lists(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "ab", "é", "z"]), _numbers, _numbers, st.booleans()),
        min_size=1,
        max_size=6,
    ),
    min_size=1,
    max_size=6,
)


def _total_agrees(got: ResultTotal, rows: dict[str, EventRow], field: str) -> bool:
    """`got` is the model's total of `field`: least and greatest exactly, and the sum the
    exact sum of the values rounded once (an infinity past the largest double)."""
    values = [float(r.fields[field]) for r in rows.values() if is_rankable(r.fields.get(field))]
    if not values:
        return got == ResultTotal(field, None, None, None)
    exact = sum(map(Fraction, values), Fraction(0))
    try:
        want = float(exact)
    except OverflowError:
        want = math.inf if exact > 0 else -math.inf
    return (got.name, got.min, got.max, got.sum) == (field, min(values), max(values), want)


def _model(rows: dict[str, EventRow], field: str) -> list[EventRow]:
    ranked = [r for r in rows.values() if is_rankable(r.fields.get(field))]
    return sorted(ranked, key=lambda r: value_rank(r.fields[field], r.key))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=_updates)
def test_leveldb_ranks_as_the_model_across_batches_deletes_and_a_reopen(
    batches: list[list[tuple[str, object, object, bool]]],
) -> None:
    rows: dict[str, EventRow] = {}
    events = 0
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "partition-0"
        for number, updates in enumerate(batches):
            change = ChangeBatch()
            for key, revenue, orders, delete in updates:
                events += 1
                if delete:
                    change.delete_latest(VIEW, key, RANKED)
                    rows.pop(key, None)
                else:
                    row = _row(key, events, revenue, orders)
                    change.put_latest(VIEW, row, RANKED)
                    rows[key] = row
            with LevelDBStore(path, cache_mb=1) as store:  # reopened for every batch
                store.apply(change)
                for field in RANKED:
                    assert store.ranked(VIEW, field, 100) == _model(rows, field), (number, field)
                keys, totals = store.aggregate_total(VIEW, RANKED)
                assert keys == len(rows), number
                for got, field in zip(totals, RANKED, strict=True):
                    assert _total_agrees(got, rows, field), (number, got)


def test_a_sum_past_the_largest_double_comes_back_exact(tmp_path: Path) -> None:
    """Two values near the largest double sum past it (the total reads as infinity); once
    one is deleted the total is the other exactly, not an infinity or NaN left behind."""
    big = 1.5e308
    with LevelDBStore(tmp_path / "partition-0", cache_mb=1) as store:
        both = ChangeBatch()
        both.put_latest(VIEW, _row("a", 1, big, 1), RANKED)
        both.put_latest(VIEW, _row("b", 2, big, 1), RANKED)
        store.apply(both)
        assert store.aggregate_total(VIEW, ("revenue",))[1][0].sum == math.inf
        one = ChangeBatch()
        one.delete_latest(VIEW, "b", RANKED)
        store.apply(one)
        assert store.aggregate_total(VIEW, ("revenue",)) == (
            1,
            [ResultTotal("revenue", big, big, big)],
        )


def test_a_total_stored_with_double_sums_reads_as_it_was() -> None:
    stored = b'{"keys":2,"sums":{"orders":3,"revenue":0.1}}'
    total = decode_aggregate_total("spend", stored)
    assert (total.keys, dict(total.sums)) == (
        2,
        {"orders": exact_steps(3.0), "revenue": exact_steps(0.1)},
    )
    assert rounded_sum(dict(total.sums)["revenue"]) == 0.1
    assert decode_aggregate_total("spend", encode_aggregate_total(total)) == total
