"""Contract suite of latest and history in partition stores: the latest event per key
never regresses, and a key's history reads in pages that add up to the sorted whole."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.errors import SerializationError
from node.storage.changes import EventPosition, position
from node.storage.store import ChangeBatch, PartitionStore
from schema import EventRow
from tests.node.stores import BACKENDS, StoreMaker, store_maker

LATEST = "last_booking"
HISTORY = "booking_history"


def event(key: str, event_ms: int, partition: int = 0, offset: int = 0, **fields: Any) -> EventRow:
    return EventRow(key, event_ms, partition, offset, fields or {"trip": f"t{event_ms}"})


def latest(*rows: EventRow) -> ChangeBatch:
    change = ChangeBatch()
    for row in rows:
        change.put_latest(LATEST, row)
    return change


def history(*rows: EventRow) -> ChangeBatch:
    change = ChangeBatch()
    for row in rows:
        change.put_event(HISTORY, row)
    return change


# -- latest --------------------------------------------------------------------------------


def test_latest_lookup_and_unknown_keys(store: PartitionStore) -> None:
    a, b = event("a", 10, trip="x", seats=2, meta={"n": [1, None]}), event("b", 5)
    store.apply(latest(a, b))
    assert store.latest(LATEST, "a") == a
    assert store.latest(LATEST, "nope") is None
    assert store.latest_many(LATEST, ["b", "nope", "a"]) == [b, None, a]
    assert store.latest("other", "a") is None


def test_an_older_event_never_replaces_a_newer_one(store: PartitionStore) -> None:
    newest = event("a", 100, partition=1, offset=7)
    store.apply(latest(newest))
    # older by time; same time but lower partition; same time and partition, lower offset;
    # and a replay of the very same record
    for older in [
        event("a", 99, 5, 9),
        event("a", 100, 0, 99),
        event("a", 100, 1, 6),
        event("a", 100, 1, 7, trip="replayed"),
    ]:
        store.apply(latest(older))
        assert store.latest(LATEST, "a") == newest
    later = event("a", 100, 1, 8)
    store.apply(latest(later))
    assert store.latest(LATEST, "a") == later


def test_within_a_batch_the_latest_event_wins_whatever_its_place(store: PartitionStore) -> None:
    store.apply(latest(event("a", 5), event("a", 9), event("a", 7)))
    assert store.latest(LATEST, "a") == event("a", 9)


def test_delete_latest(store: PartitionStore) -> None:
    store.apply(latest(event("a", 5), event("b", 1)))
    change = ChangeBatch()
    change.delete_latest(LATEST, "a")
    store.apply(change)
    assert store.latest_many(LATEST, ["a", "b"]) == [None, event("b", 1)]


@pytest.mark.parametrize(
    "row", [event("k", -1), event("k", 0, partition=-1), event("k", 0, offset=-2)]
)
def test_negative_positions_are_refused_while_building_the_batch(row: EventRow) -> None:
    with pytest.raises(SerializationError, match="view v: key 'k'"):
        ChangeBatch().put_latest("v", row)
    with pytest.raises(SerializationError, match="view v: key 'k'"):
        ChangeBatch().put_event("v", row)


def test_a_key_that_is_no_utf8_is_refused() -> None:
    with pytest.raises(SerializationError, match="not UTF-8"):
        ChangeBatch().put_latest("v", event("\ud800", 1))


events = st.builds(
    EventRow,
    st.sampled_from(["a", "b", "c", "", "a\x00b", "日本"]),
    st.integers(0, 20),
    st.integers(0, 3),
    st.integers(0, 20),
    st.fixed_dictionaries({"trip": st.text(max_size=3)}),
)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(events, min_size=1, max_size=40), cuts=st.lists(st.integers(0, 40)))
def test_latest_is_the_greatest_position_in_any_arrival_order(
    backend: str, rows: list[EventRow], cuts: list[int]
) -> None:
    # each position is one changelog record: its fields do not change on a replay
    rows = list({position(r): r for r in rows}.values())
    bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
    with tempfile.TemporaryDirectory() as directory:
        make = store_maker(backend, Path(directory))
        for lo, hi in itertools.pairwise(bounds):
            with make() as store:
                store.apply(latest(*rows[lo:hi]))
        with make() as store:
            for key in {r.key for r in rows}:
                expected = max((r for r in rows if r.key == key), key=position)
                assert store.latest(LATEST, key) == expected


# -- history -------------------------------------------------------------------------------


def test_history_by_event_time_range(store: PartitionStore) -> None:
    rows = [event("a", t, p, o) for t, p, o in [(5, 0, 1), (5, 1, 0), (7, 0, 0), (9, 2, 3)]]
    store.apply(history(*reversed(rows), event("b", 6), event("ab", 5)))
    assert store.history(HISTORY, "a", None, None, None, 100) == rows
    assert store.history(HISTORY, "a", 5, 9, None, 100) == rows[:3]
    assert store.history(HISTORY, "a", 6, None, None, 100) == rows[2:]
    assert store.history(HISTORY, "a", None, 5, None, 100) == []
    assert store.history(HISTORY, "a", None, None, None, 2) == rows[:2]
    assert store.history(HISTORY, "nope", None, None, None, 100) == []


def test_history_after_a_position_is_exclusive(store: PartitionStore) -> None:
    rows = [event("a", t, p, o) for t, p, o in [(5, 0, 1), (5, 1, 0), (7, 0, 0)]]
    store.apply(history(*rows))
    assert store.history(HISTORY, "a", None, None, (5, 0, 1), 100) == rows[1:]
    assert store.history(HISTORY, "a", None, None, (5, 0, 2), 100) == rows[1:]
    assert store.history(HISTORY, "a", None, None, (7, 0, 0), 100) == []
    # after and from together: the later bound wins
    assert store.history(HISTORY, "a", 7, None, (5, 0, 1), 100) == rows[2:]
    assert store.history(HISTORY, "a", None, 6, (5, 1, 0), 100) == []


def test_newest_first_reads_backwards_from_before_after(store: PartitionStore) -> None:
    rows = [event("a", t, p, o) for t, p, o in [(5, 0, 1), (5, 1, 0), (7, 0, 0), (9, 0, 0)]]
    store.apply(history(*rows, event("ab", 8), event("b", 6)))
    newest = rows[::-1]
    assert store.history(HISTORY, "a", None, None, None, 100, newest_first=True) == newest
    assert store.history(HISTORY, "a", None, None, None, 2, newest_first=True) == newest[:2]
    assert store.history(HISTORY, "a", None, None, (7, 0, 0), 100, True) == newest[2:]
    assert store.history(HISTORY, "a", None, None, (5, 0, 1), 100, True) == []
    # as of 7 (to is exclusive): the newest event at or before it
    assert store.history(HISTORY, "a", None, 8, None, 1, True) == [rows[2]]
    # the only event in range is the first key of the range
    assert store.history(HISTORY, "a", 5, 6, (5, 1, 0), 100, True) == [rows[0]]
    assert store.history(HISTORY, "a", 6, 7, None, 100, True) == []


_positions = st.tuples(st.integers(0, 6), st.integers(0, 2), st.integers(0, 2))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stored=st.lists(st.tuples(st.sampled_from(["a", "ab", "b"]), _positions), max_size=20),
    since=st.none() | st.integers(0, 7),
    until=st.none() | st.integers(0, 7),
    after=st.none() | _positions,
    limit=st.integers(1, 5),
    newest_first=st.booleans(),
)
def test_leveldb_reads_history_as_the_model_does(
    stored: list[tuple[str, EventPosition]],
    since: int | None,
    until: int | None,
    after: EventPosition | None,
    limit: int,
    newest_first: bool,
) -> None:
    rows = [event(key, *at) for key, at in stored]
    answers = []
    with tempfile.TemporaryDirectory() as directory:
        for backend in BACKENDS:
            with store_maker(backend, Path(directory))() as store:
                store.apply(history(*rows))
                read = store.history(HISTORY, "a", since, until, after, limit, newest_first)
                answers.append(read)
    assert answers[0] == answers[1]


def test_a_replayed_event_is_stored_once_and_can_be_deleted(store: PartitionStore) -> None:
    row = event("a", 5, 1, 2)
    store.apply(history(row, event("a", 6)))
    store.apply(history(row))
    assert store.history(HISTORY, "a", None, None, None, 100) == [row, event("a", 6)]
    change = ChangeBatch()
    change.delete_event(HISTORY, "a", position(row))
    store.apply(change)
    assert store.history(HISTORY, "a", None, None, None, 100) == [event("a", 6)]


def test_events_survive_reopen(make_store: StoreMaker) -> None:
    with make_store() as first:
        first.apply(history(event("a", 1)))
        first.apply(latest(event("a", 1)))
    with make_store() as second:
        assert second.history(HISTORY, "a", None, None, None, 10) == [event("a", 1)]
        assert second.latest(LATEST, "a") == event("a", 1)


def read_pages(
    store: PartitionStore, key: str, since: int | None, until: int | None, size: int
) -> list[list[EventRow]]:
    """Every page of `key`'s history, each one asked after the last event of the previous."""
    pages: list[list[EventRow]] = []
    after: EventPosition | None = None
    while True:
        page = store.history(HISTORY, key, since, until, after, size)
        assert len(page) <= size
        if not page:
            return pages
        pages.append(page)
        after = position(page[-1])
        assert len(pages) <= 100, "paging does not advance"


times = st.none() | st.integers(0, 21)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(events, max_size=40),
    size=st.integers(1, 12),
    since=times,
    until=times,
)
def test_pages_add_up_to_the_sorted_history(
    backend: str, rows: list[EventRow], size: int, since: int | None, until: int | None
) -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        store_maker(backend, Path(directory))() as store,
    ):
        store.apply(history(*rows))
        for key in {r.key for r in rows} | {"a"}:
            stored = {position(r): r for r in rows if r.key == key}  # the last write wins
            expected = [
                row
                for _, row in sorted(stored.items())
                if (since is None or since <= row.event_ms)
                and (until is None or row.event_ms < until)
            ]
            pages = read_pages(store, key, since, until, size)
            assert [row for page in pages for row in page] == expected
            assert all(len(page) == size for page in pages[:-1])
