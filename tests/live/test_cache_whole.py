"""Views the gateway cache holds whole (gateway.reads.whole), against the in-memory feed
link of `tests.live.test_cache`: every key answered from memory once every partition is
loaded, absent keys too; kept by the follow; loaded again after the follow ends; let go
when they outgrow the memory bound. The node's side of the snapshot of every key is
`tests/node/test_feed_kafka.py`; a real gateway and nodes, `tests/e2e/test_whole_view.py`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from gateway.model.rows import Row
from gateway.nodes.links import LOST
from gateway.reads.entries import ENTRY_OVERHEAD_BYTES, change_entry
from tests.live.fake_feed import count_row
from tests.live.test_cache import (
    TOPIC,
    WORDS,
    Harness,
    P,
    change,
    harness,
    key_in,
    settle,
)

pytestmark = pytest.mark.timeout(30)


async def load(
    h: Harness, partition: int, rows: Mapping[str, int], offset: int, node: str = "n1"
) -> dict[str, Any]:
    """Answer the cache's snapshot of every key of `partition` with `rows` (key: count),
    read at `offset`; the follow frame it asked with."""
    link = h.hub.links[node]
    ident, queue = await link.asked_for(True, partition)
    frame = link.follows[ident][0]
    snapshot = [
        change(WORDS.name, k, offset, count_row(k, n), snapshot=True) for k, n in rows.items()
    ]
    queue.put_nowait({"type": "changes", "id": ident, "changes": snapshot,
                      "applied": {TOPIC: offset}, "snapshot": True})  # fmt: skip
    await settle()
    return frame


async def empty_partition_loaded(h: Harness, partition: int) -> None:
    """Let `partition`'s follow start at offset 5 and load it holding no row (the tests'
    other partition, which the view needs loaded to answer whole)."""
    await h.following(applied=5, partition=partition)
    await load(h, partition, {}, offset=5)


def frame(changes: Sequence[dict[str, Any]], applied: int) -> dict[str, Any]:
    return {"type": "changes", "id": 1, "changes": list(changes), "applied": {TOPIC: applied}}


def test_a_view_held_whole_answers_any_key_from_memory_once_every_partition_is_loaded() -> None:
    async def scenario() -> None:
        async with harness(whole=[WORDS.name]) as h:
            held = {p: key_in(p, 0) for p in range(P)}
            absent = key_in(0, 1)
            for partition in range(P):  # followed from the start, without a lookup
                await h.following(applied=5, partition=partition)
            asked = await load(h, 0, {held[0]: 4}, offset=5)
            assert asked["keys"] is None and asked["views"] == [WORDS.name]
            assert asked["limit"] == (1 << 20) // ENTRY_OVERHEAD_BYTES  # more could not fit
            # one partition loaded: not yet whole, so keys not held are not looked up
            assert not h.cache.holds(WORDS, [absent])
            assert h.cache.stats()["whole_views"] == 0
            await load(h, 1, {held[1]: 7}, offset=5)
            assert h.cache.stats()["whole_views"] == 1
            assert h.cache.holds(WORDS, [absent, held[0], held[1]])
            hits = h.ask([held[0], held[1], absent])
            assert hits.missing == {}
            assert hits.rows == {held[0]: Row(held[0], 4), held[1]: Row(held[1], 7), absent: None}
            assert h.cache.stats()["hits"] == 3
            assert h.cache.stats()["entries"] == 2
            # another view is cached key by key as before
            assert not h.cache.holds(
                next(v for v in h.cache._views if v.name == "last_booking"), [absent]
            )

    asyncio.run(scenario())


def test_a_snapshot_in_several_frames_is_taken_as_each_comes_and_answers_once_the_last_came() -> (
    None
):
    """Each frame's rows are taken when it comes: the gateway never holds a whole
    partition's snapshot as parsed JSON, whose objects a garbage collection would walk
    (a view of a million rows held so paused the gateway's loop for up to 600 ms)."""

    async def scenario() -> None:
        async with harness(whole=[WORDS.name]) as h:
            first, second = key_in(0, 0), key_in(0, 1)
            await empty_partition_loaded(h, 1)
            await h.following(applied=5, partition=0)
            ident, queue = await h.hub.links["n1"].asked_for(True, 0)
            for key, more in ((first, True), (second, False)):
                doc = change(WORDS.name, key, 5, count_row(key, 2), snapshot=True)
                sent = {"type": "changes", "id": ident, "changes": [doc], "applied": {TOPIC: 5}}
                queue.put_nowait({**sent, "snapshot": True, "more": more})
                await settle()
                assert h.cache.holds(WORDS, [first, second]) is not more
                assert h.cache.stats()["entries"] == (1 if more else 2)
            assert h.ask([first, second]).rows == {first: Row(first, 2), second: Row(second, 2)}

    asyncio.run(scenario())


def test_a_partition_nothing_was_written_to_yet_is_loaded_too() -> None:
    """A changelog partition at offset 0 (no row yet, as in a fresh cluster): its follow
    reports the topic at 0, and the view is loaded from it like any other."""

    async def scenario() -> None:
        async with harness(whole=[WORDS.name]) as h:
            held = key_in(0, 0)
            await empty_partition_loaded(h, 0)
            await h.following(applied=0, partition=1)
            await load(h, 1, {}, offset=0)
            assert h.cache.stats()["whole_views"] == 1
            hits = h.ask([held, key_in(1, 0)])
            assert (hits.rows, hits.missing) == ({held: None, key_in(1, 0): None}, {})

    asyncio.run(scenario())


def test_a_view_held_whole_keeps_new_changed_and_deleted_keys_by_the_feed() -> None:
    async def scenario() -> None:
        async with harness(whole=[WORDS.name]) as h:
            old, new = key_in(0, 0), key_in(0, 1)
            queues = [await h.following(applied=5, partition=p) for p in range(P)]
            for partition in range(P):
                await load(h, partition, {old: 1} if partition == 0 else {}, offset=5)
            queues[0].put_nowait(
                frame([change(WORDS.name, new, 5, count_row(new, 1)),
                       change(WORDS.name, old, 6, count_row(old, 2))], applied=7)
            )  # fmt: skip
            await settle()
            assert h.ask([old, new]).rows == {old: Row(old, 2), new: Row(new, 1)}
            queues[0].put_nowait(frame([change(WORDS.name, old, 7, None)], applied=8))
            await settle()
            assert h.ask([old, new]).rows == {old: None, new: Row(new, 1)}
            assert h.cache.stats()["entries"] == 1

    asyncio.run(scenario())


def test_a_change_seen_while_loading_wins_and_a_snapshot_from_below_the_follow_is_asked_again() -> (
    None
):
    async def scenario() -> None:
        async with harness(whole=[WORDS.name]) as h:
            key, other = key_in(0, 0), key_in(0, 1)
            queue = await h.following(applied=5, partition=0)
            await empty_partition_loaded(h, 1)
            link = h.hub.links["n1"]
            first, _ = await link.asked_for(True, 0)
            # a snapshot read below where the follow stood when the load registered
            await load(h, 0, {key: 1}, offset=4)
            assert not h.cache.holds(WORDS, [other])
            second, _ = await link.asked_for(True, 0)
            assert second != first and first in link.unfollowed
            # the follow brings offsets 6 and 7 before the snapshot (read at 7) comes
            queue.put_nowait(
                frame([change(WORDS.name, key, 6, count_row(key, 3)),
                       change(WORDS.name, other, 7, count_row(other, 9))], applied=8)
            )  # fmt: skip
            await settle()
            await load(h, 0, {key: 3}, offset=7)
            # the snapshot holds offset 6 of key; offset 7 of other came after it
            assert h.ask([key, other]).rows == {key: Row(key, 3), other: Row(other, 9)}

    asyncio.run(scenario())


def test_a_snapshot_ahead_of_the_follow_answers_once_the_follow_reaches_it() -> None:
    async def scenario() -> None:
        async with harness(whole=[WORDS.name]) as h:
            gone, kept = key_in(0, 0), key_in(0, 1)
            queue = await h.following(applied=5, partition=0)
            await empty_partition_loaded(h, 1)
            # read at 8: `gone` was written at 5 and deleted at 6, `kept` written at 7
            await load(h, 0, {kept: 1}, offset=8)
            assert h.ask([kept]).missing == {0: [kept]}  # the follow is at 5: not yet
            queue.put_nowait(frame([change(WORDS.name, gone, 5, count_row(gone, 1))], 6))
            await settle()
            assert h.ask([kept]).missing == {0: [kept]}
            assert h.cache.stats()["entries"] == 1  # a change the snapshot holds is not taken
            queue.put_nowait(
                frame([change(WORDS.name, gone, 6, None),
                       change(WORDS.name, kept, 7, count_row(kept, 1))], 8)
            )  # fmt: skip
            await settle()
            assert h.ask([gone, kept]).rows == {gone: None, kept: Row(kept, 1)}
            assert h.cache.stats()["entries"] == 1  # `gone` never came in

    asyncio.run(scenario())


def test_a_view_held_whole_misses_while_its_follow_is_down_and_is_loaded_again() -> None:
    async def scenario() -> None:
        async with harness(whole=[WORDS.name]) as h:
            key = key_in(0)
            for partition in range(P):
                await h.following(applied=5, partition=partition)
                await load(h, partition, {key: 2} if partition == 0 else {}, offset=5)
            assert h.ask([key]).rows == {key: Row(key, 2)}
            link = h.hub.links["n1"]
            follow = next(
                i for i, (f, _) in link.follows.items() if not f["snapshot"] and f["partition"] == 0
            )
            link.follows[follow][1].put_nowait(LOST)
            await settle()
            assert not h.cache.holds(WORDS, [key_in(0, 1)])
            assert h.ask([key]).missing == {0: [key]}
            await h.following(applied=9, other=3, partition=0)
            await load(h, 0, {key: 5}, offset=9)
            assert h.ask([key]).rows == {key: Row(key, 5)}
            assert h.cache.stats()["entries"] == 1

    asyncio.run(scenario())


def test_lookups_of_a_view_held_whole_count_no_key_for_admission_until_it_misses() -> None:
    """A view held whole admits no row one by one: its lookups leave admission's counts
    alone (counting them cost 12% of the gateway's CPU on ten-key lookups). Once a follow
    ends, the view misses there and its lookups count again, as any view's."""

    async def scenario() -> None:
        async with harness(whole=[WORDS.name], admit_after=3) as h:
            counted: list[str] = []
            asked = h.cache._admission.asked

            def recording(view: str, key: str) -> bool:
                counted.append(key)
                return asked(view, key)

            h.cache._admission.asked = recording  # type: ignore[method-assign]
            held, absent = key_in(0), key_in(1)
            for partition in range(P):
                await h.following(applied=5, partition=partition)
                await load(h, partition, {held: 2} if partition == 0 else {}, offset=5)
            for _ in range(3):
                assert h.ask([held, absent]).rows == {held: Row(held, 2), absent: None}
            assert counted == []
            link = h.hub.links["n1"]
            follow = next(
                i for i, (f, _) in link.follows.items() if not f["snapshot"] and f["partition"] == 0
            )
            link.follows[follow][1].put_nowait(LOST)
            await settle()
            assert h.ask([held]).missing == {0: [held]}
            assert counted == [held]

    asyncio.run(scenario())


def test_a_load_cut_short_by_the_follow_ending_is_done_again_on_the_next_follow() -> None:
    async def scenario() -> None:
        async with harness(whole=[WORDS.name]) as h:
            key = key_in(0)
            await empty_partition_loaded(h, 1)
            queue = await h.following(applied=5, partition=0)
            link = h.hub.links["n1"]
            cut, _ = await link.asked_for(True, 0)  # the snapshot is asked for, never comes
            queue.put_nowait(LOST)
            await settle()
            await h.following(applied=6, partition=0)
            again, _ = await link.asked_for(True, 0)
            assert again != cut and cut in link.unfollowed
            await load(h, 0, {key: 3}, offset=6)
            assert h.ask([key]).rows == {key: Row(key, 3)}

    asyncio.run(scenario())


def test_a_view_whose_rows_outgrow_the_bound_is_cached_key_by_key_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        rows = {key_in(0, i): i for i in range(4)}
        async with harness(whole=[WORDS.name], max_bytes=3 * ENTRY_OVERHEAD_BYTES) as h:
            await h.following(applied=5, partition=0)
            await empty_partition_loaded(h, 1)
            await load(h, 0, rows, offset=5)
            assert h.cache.stats()["whole_views"] == 0
            assert h.cache.stats()["entries"] == 0 and h.cache.stats()["bytes"] == 0
            assert not h.cache.holds(WORDS, list(rows)[:1])
            # key by key again: filled once asked, answered from memory
            key = next(iter(rows))
            await h.fill([key], {key: count_row(key, 8)}, offset=5)
            assert h.ask([key]).rows == {key: Row(key, 8)}

    with caplog.at_level(logging.WARNING, "gateway.reads.cache"):
        asyncio.run(scenario())
    assert f"holds view {WORDS.name} whole no more" in caplog.text
    assert "STATEFED_GATEWAY_CACHE_MB" in caplog.text


def test_a_partition_with_more_rows_than_a_snapshot_may_take_lets_the_view_go(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        async with harness(whole=[WORDS.name]) as h:
            await h.following(applied=5, partition=0)
            ident, queue = await h.hub.links["n1"].asked_for(True, 0)
            message = "partition 0 on node n1 holds more than 5242 rows of view wordcount"
            queue.put_nowait({"type": "error", "id": ident, "message": message, "tooLarge": True})
            await settle()
            assert h.cache._whole.views == {}

    with caplog.at_level(logging.WARNING, "gateway.reads.cache"):
        asyncio.run(scenario())
    assert "more than 5242 rows" in caplog.text


def test_a_view_not_cached_cannot_be_held_whole() -> None:
    async def scenario() -> None:
        with pytest.raises(ValueError, match="names nope, not a count, latest or aggregate view"):
            async with harness(whole=["nope"]):
                pass

    asyncio.run(scenario())


def test_rows_taken_before_a_bad_change_in_a_snapshot_frame_are_counted_until_let_go() -> None:
    """A snapshot frame whose second change is no change: the load asks again, the rows of
    the first attempt are let go, and the bytes counted are those of the rows held (they
    drifted below, even negative, letting the cache grow past its bound)."""

    async def scenario() -> None:
        key, bad_key = key_in(0, 0), key_in(0, 1)
        async with harness(whole=[WORDS.name]) as h:
            await empty_partition_loaded(h, 1)
            await h.following(applied=5, partition=0)
            ident, queue = await h.hub.links["n1"].asked_for(True, 0)
            good = change(WORDS.name, key, 5, count_row(key, 3), snapshot=True)
            bad = {**change(WORDS.name, bad_key, 5, None, snapshot=True), "row": [1]}
            queue.put_nowait({"type": "changes", "id": ident, "changes": [good, bad],
                              "applied": {TOPIC: 5}, "snapshot": True})  # fmt: skip
            await settle()
            again, _ = await asyncio.wait_for(_asked_again(h, ident), 5)
            assert again != ident
            assert h.cache.stats()["bytes"] == 0  # the first attempt's row let go
            await load(h, 0, {key: 3}, offset=5)
            assert h.ask([key]).rows == {key: Row(key, 3)}
            size = change_entry(WORDS, key, count_row(key, 3))[1]
            assert h.cache.stats()["bytes"] == size

    asyncio.run(scenario())


async def _asked_again(h: Harness, ident: int) -> tuple[int, Any]:
    """The snapshot follow of partition 0 asked after the follow `ident`."""
    while True:
        found = await h.hub.links["n1"].asked_for(True, 0)
        if found[0] != ident:
            return found
        await asyncio.sleep(0.01)


def test_two_partitions_too_large_let_the_view_go_once(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async with harness(whole=[WORDS.name]) as h:
            snapshots = []
            for partition in range(P):
                await h.following(applied=5, partition=partition)
                snapshots.append(await h.hub.links["n1"].asked_for(True, partition))
            for partition, (ident, queue) in enumerate(snapshots):
                message = f"partition {partition} on node n1 holds more than 5242 rows"
                queue.put_nowait(
                    {"type": "error", "id": ident, "message": message, "tooLarge": True}
                )
            await settle()
            assert h.cache._whole.views == {}

    with caplog.at_level(logging.WARNING, "gateway.reads.cache"):
        asyncio.run(scenario())
    let_go = [r for r in caplog.records if "whole no more" in r.getMessage()]
    assert len(let_go) == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
