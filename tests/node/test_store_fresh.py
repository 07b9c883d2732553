"""A fresh LevelDB store skips reading old rows (a restore from the beginning): it must
end with exactly the bytes a store that reads every old row ends with, rows, top-N
indexes and offsets alike."""

from __future__ import annotations

import tempfile
from pathlib import Path

import plyvel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.storage.store import ChangeBatch, LevelDBStore
from schema import CountRow, EventRow, WindowRow

COUNTS, WINDOWS, LATEST = "counts", "windows", "latest"
SIZE = 60_000
SENTINEL = "~sentinel"  # never generated below: its rows cannot interfere

keys = st.sampled_from(["a", "b", "c", "d", "e\x00", "é"])
counts = st.integers(0, 20)
# (kind, key, number, delete?) changes; number = count, window index or event time
changes = st.tuples(st.sampled_from([COUNTS, WINDOWS, LATEST]), keys, counts, st.booleans())
batches = st.lists(st.lists(changes, max_size=12), min_size=1, max_size=8)


def change_batch(changes: list[tuple[str, str, int, bool]], offset: int) -> ChangeBatch:
    batch = ChangeBatch()
    for kind, key, n, delete in changes:
        if kind == COUNTS:
            if delete:
                batch.delete(COUNTS, key)
            else:
                batch.put_count(COUNTS, CountRow(key, n, n))
        elif kind == WINDOWS:
            start = (n % 3) * SIZE
            if delete:
                batch.delete_window(WINDOWS, key, start)
            else:
                batch.put_window(WINDOWS, WindowRow(key, start, start + SIZE, n, start))
        elif delete:
            batch.delete_latest(LATEST, key)
        else:
            batch.put_latest(LATEST, EventRow(key, n, 0, offset, {"n": n}))
    batch.advance("topic", offset)
    return batch


def sentinel_batch() -> ChangeBatch:
    batch = ChangeBatch()
    batch.put_count(COUNTS, CountRow(SENTINEL, 7, 7))
    batch.put_window(WINDOWS, WindowRow(SENTINEL, 0, SIZE, 7, 7))
    batch.put_latest(LATEST, EventRow(SENTINEL, 7, 0, 0, {}))
    return batch


def contents(path: Path) -> list[tuple[bytes, bytes]]:
    db = plyvel.DB(str(path))
    try:
        return list(db)
    finally:
        db.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches)
def test_a_fresh_store_ends_with_the_bytes_of_one_that_reads_every_old_row(
    script: list[list[tuple[str, str, int, bool]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        fresh, seeded = Path(tmp, "fresh"), Path(tmp, "seeded")
        # seeded: a row in every view before the script, so every overwrite reads the old row
        with LevelDBStore(seeded, cache_mb=1) as store:
            store.apply(sentinel_batch())
        with LevelDBStore(seeded, cache_mb=1) as store:
            for offset, changes in enumerate(script, start=1):
                store.apply(change_batch(changes, offset))
        # fresh: empty views, so keys it never wrote are not read; the sentinel comes last
        with LevelDBStore(fresh, cache_mb=1) as store:
            for offset, changes in enumerate(script, start=1):
                store.apply(change_batch(changes, offset))
            store.apply(sentinel_batch())
        assert contents(fresh) == contents(seeded)


def test_a_reopened_store_reads_the_rows_it_restored_before(tmp_path: Path) -> None:
    path = tmp_path / "p"
    with LevelDBStore(path, cache_mb=1) as store:
        store.apply(change_batch([(COUNTS, "a", 5, False)], 1))
    with LevelDBStore(path, cache_mb=1) as store:
        store.apply(change_batch([(COUNTS, "a", 8, False), (COUNTS, "b", 9, False)], 2))
        assert [(r.key, r.count) for r in store.top(COUNTS, 10)] == [("b", 9), ("a", 8)]
