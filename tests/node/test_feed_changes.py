"""What a store's apply reports to the change feed, on every store backend, and the rings
of node.changelog.feed on their own (no loop, no socket)."""

from __future__ import annotations

import asyncio
from random import Random

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.changelog.feed import ChangeFeed
from node.storage.changes import ChangeBatch, Effect, change_json
from node.storage.store import PartitionStore
from schema import (
    WORD_COUNTS,
    CountRow,
    EventRow,
    Role,
    WindowRow,
    encode_count,
    encode_event,
    encode_window,
)
from schema.feed import Change

TOPIC = WORD_COUNTS.changelog_topic
VIEW = WORD_COUNTS.name


def event(key: str, event_ms: int, offset: int) -> EventRow:
    return EventRow(key, event_ms, 0, offset, {"text": f"{key}@{event_ms}"})


def event_doc(row: EventRow) -> dict[str, object]:
    return {"key": row.key, "event_ms": row.event_ms, "source_partition": row.source_partition,
            "source_offset": row.source_offset, "fields": row.fields}  # fmt: skip


def test_a_change_is_the_contract_json_with_the_changelog_value_as_its_row() -> None:
    count, window, row = CountRow("a", 3, 7), WindowRow("a", 0, 60_000, 2, 5), event("a", 9, 4)
    for value, encoded, at in (
        (count, encode_count(count), ()),
        (window, encode_window(window), (0,)),
        (row, encode_event(row), (9, 0, 4)),
    ):
        change = Change("v", "a", 12, orjson.loads(encoded), at)
        assert orjson.loads(change_json("v", "a", 12, value, at)) == change.to_json()
    deleted = Change("v", "a", 3, None, (), snapshot=True)
    assert orjson.loads(change_json("v", "a", 3, None, snapshot=True)) == deleted.to_json()


def applied(effects: list[Effect]) -> list[Change]:
    return [Change.from_json(orjson.loads(effect.json())) for effect in effects]


def test_apply_returns_the_changes_that_took_effect_in_offset_order(
    store: PartitionStore,
) -> None:
    batch = ChangeBatch()
    for offset, (key, count) in enumerate([("a", 1), ("b", 1), ("a", 2)], start=10):
        batch.reading(offset)
        batch.put_count("counts", CountRow(key, count, offset))
    batch.reading(13)
    batch.put_latest("latest", event("x", 500, 13))
    batch.reading(14)
    batch.put_window("windows", WindowRow("w", 0, 60_000, 4, 1))
    batch.reading(15)
    batch.put_event("history", event("h", 100, 15))
    batch.advance("t", 16)
    window = {
        "key": "w",
        "start_ms": 0,
        "end_ms": 60_000,
        "count": 4,
        "last_event_ms": 1,
        "fields": {},  # a windowed aggregate view's results
    }
    # every record's change, also one a later record of the same key replaced in the batch
    assert applied(store.apply(batch)) == [
        Change("counts", "a", 10, {"key": "a", "count": 1, "last_event_ms": 10}),
        Change("counts", "b", 11, {"key": "b", "count": 1, "last_event_ms": 11}),
        Change("counts", "a", 12, {"key": "a", "count": 2, "last_event_ms": 12}),
        Change("latest", "x", 13, event_doc(event("x", 500, 13))),
        Change("windows", "w", 14, window, (0,)),
        Change("history", "h", 15, event_doc(event("h", 100, 15)), (100, 0, 15)),
    ]

    # an earlier event than the stored latest takes no effect; deletes do
    later = ChangeBatch()
    later.reading(16)
    later.put_latest("latest", event("x", 400, 16))
    later.reading(17)
    later.delete_window("windows", "w", 0)
    later.reading(18)
    later.delete("counts", "a")
    assert applied(store.apply(later)) == [
        Change("windows", "w", 17, None, (0,)),
        Change("counts", "a", 18, None),
    ]
    assert store.latest("latest", "x") == event("x", 500, 13)


def test_a_batch_shows_each_latest_event_that_was_the_latest_when_its_record_came(
    store: PartitionStore,
) -> None:
    """Batched or one record at a time, a follower sees the same changes: an event earlier
    than the stored latest never shows, a later one does even when the batch replaces it."""
    first = ChangeBatch()
    first.reading(1)
    first.put_latest("latest", event("x", 500, 1))
    store.apply(first)
    batch = ChangeBatch()
    for offset, at_ms in ((2, 400), (3, 600), (4, 700), (5, 650)):
        batch.reading(offset)
        batch.put_latest("latest", event("x", at_ms, offset))
    shown = [(c.offset, c.row and c.row["event_ms"]) for c in applied(store.apply(batch))]
    assert shown == [(3, 600), (4, 700)]
    assert store.latest("latest", "x") == event("x", 700, 4)


def test_a_window_the_batch_expires_shows_none_of_its_changes(store: PartitionStore) -> None:
    batch = ChangeBatch()
    for offset, count in ((1, 1), (2, 2)):
        batch.reading(offset)
        batch.put_window("windows", WindowRow("w", 0, 60_000, count, offset))
    batch.expire_windows("windows", 60_000)
    assert applied(store.apply(batch)) == []


def changes(offsets: range, size: int = 10) -> list[Effect]:
    return [Effect(o, size + 40, VIEW, f"k{o}", CountRow("x" * size, o, o)) for o in offsets]


def test_a_ring_keeps_its_budget_and_knows_from_where_it_holds_every_change() -> None:
    feed = ChangeFeed(budget_bytes=8 * 254, catalogue=[WORD_COUNTS])  # 8 entries of 254 bytes
    feed.attach(0, Role.ACTIVE, {TOPIC: 100}, restoring=False)
    generation, cursor, seq = feed.start(0, {TOPIC: 100})
    assert cursor == {TOPIC: 100}
    feed.publish(0, changes(range(100, 104)), {TOPIC: 104})
    read = feed.read(0, generation, seq, cursor, None)
    assert [e.offset for e in read.entries] == [100, 101, 102, 103]
    assert read.cursor == {TOPIC: 104} and not read.more
    assert read.entries[0].doc == changes(range(100, 101))[0].json()

    # a follow of some keys moves on past the others' changes
    feed.publish(0, changes(range(104, 106)), {TOPIC: 110})
    keyed = feed.read(0, generation, read.seq, read.cursor, {"k105"})
    assert [e.key for e in keyed.entries] == ["k105"] and keyed.cursor == {TOPIC: 110}

    # past the budget the oldest go, and a cursor before them must be replayed
    feed.publish(0, changes(range(110, 120)), {TOPIC: 120})
    first = feed.first(0, generation, TOPIC)
    assert first is not None and 110 < first <= 119
    assert feed.read(0, generation, 0, {TOPIC: 104}, None).behind == (TOPIC,)
    tail = feed.read(0, generation, 0, {TOPIC: first}, None)
    assert [e.offset for e in tail.entries] == list(range(first, 120))


def test_a_copy_handed_on_at_the_same_offsets_goes_on_and_any_other_is_gone() -> None:
    feed = ChangeFeed(budget_bytes=1 << 20, catalogue=[WORD_COUNTS])
    feed.attach(3, Role.ACTIVE, {TOPIC: 5}, restoring=True)
    generation, cursor, seq = feed.start(3, {TOPIC: None})
    feed.publish(3, changes(range(5, 7)), {TOPIC: 7})
    feed.attach(3, Role.STANDBY, {TOPIC: 7}, restoring=False)  # revoked, adopted as standby
    role, restoring, applied, _end, _version = feed.status(3)
    assert (role, restoring, applied) == (Role.STANDBY, False, {TOPIC: 7})
    assert [e.offset for e in feed.read(3, generation, seq, cursor, None).entries] == [5, 6]

    feed.attach(3, Role.STANDBY, {TOPIC: 0}, restoring=True)  # rebuilt from scratch
    assert feed.read(3, generation, seq, cursor, None).gone == (
        f"its copy restarts from offsets {{'{TOPIC}': 0}}"
    )
    generation, cursor, seq = feed.start(3, {TOPIC: None})
    feed.detach(3, "claimed by the materializer")
    assert feed.read(3, generation, seq, cursor, None).gone == "claimed by the materializer"
    feed.attach(3, Role.ACTIVE, {TOPIC: 0}, restoring=True)  # the same offsets, a new copy
    assert feed.read(3, generation, seq, cursor, None).gone == "claimed by the materializer"


def test_a_publish_wakes_the_follows_of_its_partition_from_another_thread() -> None:
    feed = ChangeFeed(budget_bytes=1 << 20, catalogue=[WORD_COUNTS])
    feed.attach(1, Role.ACTIVE, {TOPIC: 0}, restoring=False)

    async def follow() -> list[int]:
        feed.bind(asyncio.get_running_loop())
        with feed.followed(1) as changed:
            generation, cursor, seq = feed.start(1, {TOPIC: None})
            assert feed.read(1, generation, seq, cursor, None).entries == ()
            await asyncio.to_thread(feed.publish, 1, changes(range(0, 2)), {TOPIC: 2})
            await asyncio.wait_for(changed.wait(), 10)
            return [e.offset for e in feed.read(1, generation, seq, cursor, None).entries]

    assert asyncio.run(follow()) == [0, 1]


@pytest.mark.parametrize("size", [10, 100_000])
def test_a_read_is_cut_to_one_frame(size: int) -> None:
    feed = ChangeFeed(budget_bytes=1 << 30, catalogue=[WORD_COUNTS])
    feed.attach(0, Role.ACTIVE, {TOPIC: 0}, restoring=False)
    feed.publish(0, changes(range(0, 1000), size), {TOPIC: 1000})
    generation, cursor, _seq = feed.start(0, {TOPIC: 0})
    read = feed.read(0, generation, 0, cursor, None, max_entries=500, max_bytes=1 << 20)
    assert len(read.entries) == (500 if size == 10 else 11) and read.more
    assert read.cursor == {TOPIC: len(read.entries)}


def test_a_partition_nobody_follows_keeps_no_changes_and_older_follows_are_replayed() -> None:
    feed = ChangeFeed(budget_bytes=1 << 20, catalogue=[WORD_COUNTS])
    feed.attach(0, Role.ACTIVE, {TOPIC: 0}, restoring=False)
    assert not feed.wants_changes(0)
    feed.publish(0, changes(range(0, 3)), {TOPIC: 3})
    feed.publish(0, None, {TOPIC: 10})  # applied unfollowed: its changes were not computed
    generation, seq = feed.end_seq(0)
    assert feed.first(0, generation, TOPIC) == 10
    with feed.followed(0), feed.followed(0):
        assert feed.wants_changes(0)
        generation, cursor, seq = feed.start(0, {TOPIC: 2})
        assert feed.read(0, generation, seq, cursor, None).behind == (TOPIC,)
        generation, cursor, seq = feed.start(0, {TOPIC: None})
        assert cursor == {TOPIC: 10}
        feed.publish(0, changes(range(10, 12)), {TOPIC: 12})
        read = feed.read(0, generation, seq, cursor, None)
        assert [e.offset for e in read.entries] == [10, 11] and read.cursor == {TOPIC: 12}
    assert not feed.wants_changes(0)


def keyed(key_offsets: list[tuple[str, int]]) -> list[Effect]:
    return [Effect(o, 50, VIEW, key, CountRow(key, o, o)) for key, o in key_offsets]


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 3000),
    rng=st.randoms(use_true_random=False),
    followed=st.sets(st.sampled_from("abcdefgh"), min_size=1, max_size=3),
    batch=st.integers(1, 50),
    frame=st.integers(1, 20),
    budget_entries=st.integers(5, 2000),
)
def test_a_keyed_read_gets_what_a_read_of_every_key_gets_of_its_keys(
    count: int, rng: Random, followed: set[str], batch: int, frame: int, budget_entries: int
) -> None:
    """Reads of some keys go through the ring's index by key: across evictions and
    compactions, in frames of any size, they get each change of their keys a read of every
    key gets, in order, and stand at the same cursor once caught up."""
    keys = [rng.choice("abcdefgh") for _ in range(count)]
    feed = ChangeFeed(budget_bytes=budget_entries * 254, catalogue=[WORD_COUNTS])
    feed.attach(0, Role.ACTIVE, {TOPIC: 0}, restoring=False)
    every = feed.start(0, {TOPIC: 0})
    some = feed.start(0, {TOPIC: 0})
    got_every: list[int] = []
    got_some: list[int] = []
    for start in range(0, len(keys), batch):
        chunk = list(enumerate(keys[start : start + batch], start=start))
        feed.publish(0, keyed([(k, o) for o, k in chunk]), {TOPIC: start + len(chunk)})
        for state, wanted, got in ((every, None, got_every), (some, followed, got_some)):
            generation, cursor, seq = state
            while True:
                read = feed.read(0, generation, seq, cursor, wanted, max_entries=frame)
                if read.behind:  # evicted before this reader came: both start again
                    cursor = {TOPIC: feed.first(0, generation, TOPIC) or 0}
                    got.append(-1)
                    continue
                got.extend(e.offset for e in read.entries if wanted is None or e.key in wanted)
                seq, cursor = read.seq, dict(read.cursor)
                if not read.more:
                    break
            if wanted is None:
                every = (generation, cursor, seq)
            else:
                some = (generation, cursor, seq)
    assert every[1] == some[1] == {TOPIC: len(keys)}
    if -1 not in got_every and -1 not in got_some:
        assert got_some == [o for o in got_every if keys[o] in followed]
    else:  # a reader fell behind the ring: what it got of its keys is still in order
        assert [o for o in got_some if o >= 0] == sorted(o for o in got_some if o >= 0)


def test_a_publish_wakes_only_the_follows_of_its_keys_and_of_every_key() -> None:
    feed = ChangeFeed(budget_bytes=1 << 20, catalogue=[WORD_COUNTS])
    feed.attach(2, Role.ACTIVE, {TOPIC: 0}, restoring=False)

    async def woken(key: str | None) -> list[str]:
        feed.bind(asyncio.get_running_loop())
        with (
            feed.followed(2, {"a"}) as of_a,
            feed.followed(2, {"b", "c"}) as of_bc,
            feed.followed(2) as of_all,
        ):
            if key is None:
                await asyncio.to_thread(feed.record_restoring, 2, True)
            else:
                await asyncio.to_thread(feed.publish, 2, keyed([(key, 0)]), {TOPIC: 1})
            await asyncio.wait_for(of_all.wait(), 10)
            return [name for name, e in (("a", of_a), ("bc", of_bc), ("all", of_all)) if e.is_set()]

    assert asyncio.run(woken("a")) == ["a", "all"]
    assert asyncio.run(woken("c")) == ["bc", "all"]
    assert asyncio.run(woken(None)) == ["a", "bc", "all"]  # the copy's state concerns all


def test_a_follow_of_a_quiet_key_is_woken_before_the_ring_evicts_past_it() -> None:
    """A follow wakes only for its keys, but once its partition's ring has evicted a quarter
    of what it holds every follow is woken: its read then moves its cursor on, so it is
    never found behind the ring (and replayed from Kafka) for others' changes."""
    feed = ChangeFeed(budget_bytes=400 * 254, catalogue=[WORD_COUNTS])  # 400 entries
    feed.attach(0, Role.ACTIVE, {TOPIC: 0}, restoring=False)

    async def follow() -> tuple[int, list[bool]]:
        feed.bind(asyncio.get_running_loop())
        woken, behind = 0, []
        with feed.followed(0, {"quiet"}) as changed:
            generation, cursor, seq = feed.start(0, {TOPIC: None})
            for start in range(0, 20_000, 100):
                others = [(f"k{o % 50}", o) for o in range(start, start + 100)]
                feed.publish(0, keyed(others), {TOPIC: start + 100})
                await asyncio.sleep(0)  # the loop runs the wake the publish asked for
                if changed.is_set():
                    changed.clear()
                    woken += 1
                    read = feed.read(0, generation, seq, cursor, {"quiet"})
                    behind.append(bool(read.behind))
                    seq, cursor = read.seq, dict(read.cursor)
        return woken, behind

    woken, behind = asyncio.run(follow())
    assert woken > 0 and not any(behind)
