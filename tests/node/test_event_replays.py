"""Events written twice, on every store backend: after a crash the pipeline writes a
history view's micro-batch again, the same record key and value at a later offset. The
store already holds that event as it is, so it changes nothing: not the key's history nor
the changes the store reports to the feed. A delete still deletes, and an event written
after its delete shows again."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.storage.changes import ChangeBatch, Effect
from node.storage.store import LevelDBStore, PartitionStore
from schema import EventRow

VIEW = "history"
T0 = 1_700_000_000_000


def event(n: int, trip: str | None = None) -> EventRow:
    return EventRow("ann", T0 + n, 0, 100 + n, {"trip": trip or f"e{n}"})


def records(
    *changes: tuple[int, EventRow], deleted: tuple[int, EventRow] | None = None
) -> ChangeBatch:
    """A batch of `changes` ((offset, event) each) and, last, the delete of one event."""
    batch = ChangeBatch()
    for offset, row in changes:
        batch.reading(offset)
        batch.put_event(VIEW, row)
    if deleted is not None:
        offset, row = deleted
        batch.reading(offset)
        batch.delete_event(VIEW, row.key, (row.event_ms, row.source_partition, row.source_offset))
    return batch


def shown(effects: list[Effect]) -> list[tuple[int, str | None]]:
    return [
        (e.offset, e.row.fields["trip"] if isinstance(e.row, EventRow) else None) for e in effects
    ]


def history(store: PartitionStore) -> list[str]:
    return [e.fields["trip"] for e in store.history(VIEW, "ann", None, None, None, 100)]


def test_an_event_written_again_later_changes_nothing(store: PartitionStore) -> None:
    assert shown(store.apply(records((1, event(1)), (2, event(2))))) == [(1, "e1"), (2, "e2")]
    assert shown(store.apply(records((3, event(1)), (4, event(2)), (5, event(3))))) == [(5, "e3")]
    assert history(store) == ["e1", "e2", "e3"]


def test_within_one_batch_an_event_shows_once_at_its_first_offset(store: PartitionStore) -> None:
    assert shown(store.apply(records((1, event(1)), (2, event(2)), (3, event(1))))) == [
        (1, "e1"),
        (2, "e2"),
    ]
    assert history(store) == ["e1", "e2"]


def test_an_event_held_before_a_reopen_changes_nothing(
    make_store: Callable[[], PartitionStore],
) -> None:
    with make_store() as store:
        store.apply(records((1, event(1))))
    with make_store() as store:  # the filter of new keys starts again: the store is read
        assert shown(store.apply(records((2, event(1)), (3, event(2))))) == [(3, "e2")]
        assert history(store) == ["e1", "e2"]


def test_a_delete_still_deletes_and_the_event_after_it_shows(store: PartitionStore) -> None:
    store.apply(records((1, event(1)), (2, event(2))))
    assert shown(store.apply(records((3, event(1)), deleted=(4, event(1))))) == [(4, None)]
    assert history(store) == ["e2"]
    assert shown(store.apply(records((5, event(1))))) == [(5, "e1")]
    assert history(store) == ["e1", "e2"]


def test_an_event_with_other_values_at_the_same_place_shows(store: PartitionStore) -> None:
    store.apply(records((1, event(1))))
    assert shown(store.apply(records((2, event(1, "changed"))))) == [(2, "changed")]
    assert history(store) == ["changed"]


# one record of an event's: the event as first written, with other values, or its delete
Op = str
OPS = ("original", "changed", "delete")


def op_records(ops: list[Op], first_offset: int) -> list[tuple[int, EventRow | None]]:
    return [
        (first_offset + i, None if op == "delete" else event(1, "e1" if op == "original" else op))
        for i, op in enumerate(ops)
    ]


def op_batch(records_: list[tuple[int, EventRow | None]]) -> ChangeBatch:
    batch = ChangeBatch()
    for offset, row in records_:
        batch.reading(offset)
        if row is None:
            held = event(1)
            batch.delete_event(
                VIEW, held.key, (held.event_ms, held.source_partition, held.source_offset)
            )
        else:
            batch.put_event(VIEW, row)
    return batch


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(held=st.booleans(), ops=st.lists(st.sampled_from(OPS), min_size=1, max_size=5))
def test_batched_or_one_at_a_time_an_event_shows_the_same_changes(
    held: bool, ops: list[Op], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Whatever the store held, records of one event applied in one batch show what they
    show one batch each, and leave the same history."""
    shown_by: dict[str, list[tuple[int, str | None]]] = {}
    left: dict[str, list[str]] = {}
    for way in ("batched", "one at a time"):
        with LevelDBStore(tmp_path_factory.mktemp("events") / "p").open() as store:
            if held:
                store.apply(records((1, event(1))))
            found = op_records(ops, 2)
            batches = [found] if way == "batched" else [[r] for r in found]
            shown_by[way] = [s for b in batches for s in shown(store.apply(op_batch(b)))]
            left[way] = history(store)
    assert shown_by["batched"] == shown_by["one at a time"]
    assert left["batched"] == left["one at a time"]
