"""The gateway cache (gateway.reads.cache) where it went wrong before: a fill that fails
on a row it cannot read, a node read seen before the partition was followed, the misses
of lookups that did not look, a key missed again while the cache has room, and reads
filled from in a catalogue of several views."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.model.rows import Row
from gateway.reads.protocol import LookupResult
from tests.live.fake_feed import count_row
from tests.live.test_cache import TOPIC, WORDS, _read, change, harness, key_in, settle

pytestmark = pytest.mark.timeout(30)


def test_a_fill_failing_on_a_row_it_cannot_read_is_logged_and_the_key_filled_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A snapshot row the cache cannot read (a node of another version) ended the fill's
    task with an error nobody saw, and `stop` then raised it, so the gateway's shutdown
    stopped before the hub, the readers and the connections."""

    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            await h.following(applied=5)
            h.cache.fill(WORDS, {0: [key]})
            _, queue = await h.hub.links["n1"].asked_for(True, 0)
            bad = change(WORDS.name, key, 5, {"cnt": 4}, snapshot=True)
            queue.put_nowait({"type": "changes", "id": 2, "changes": [bad], "snapshot": True})
            await settle()
            assert h.ask([key]).missing == {0: [key]}
            await h.fill([key], {key: count_row(key, 4)}, offset=5)
            assert h.ask([key]).rows == {key: Row(key, 4)}

    with caplog.at_level(logging.ERROR, "gateway.reads.cache"):
        asyncio.run(scenario())  # the harness stops the cache: it must not raise
    assert any(f"filling {WORDS.name} failed" in r.getMessage() for r in caplog.records)


def test_a_read_ahead_of_the_follow_before_it_started_keeps_the_cache_from_answering() -> None:
    """A lookup that did not look (its key not held) is read, then admits its key and starts
    its partition's follow: a standby ahead of the owner (hedged to) answered it at 50; the
    follow, on the owner, is at 5. A row filled there must not answer the client, who saw
    50."""

    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            ahead = {"partition": 0, "node": "n2", "role": "STANDBY", "appliedOffset": 53,
                     "positions": {WORDS.changelog_topic: 50, "other": 3}}  # fmt: skip
            read = LookupResult([Row(key, 9)], [0], {}, [ahead])
            h.cache.observe(read.freshness)  # as the planner tells every node read
            h.cache.passed(WORDS, {0: [key]}, read, [key])
            await h.following(applied=5, other=3)
            await h.fill([key], {key: count_row(key, 4)}, offset=5)
            assert h.ask([key]).missing == {0: [key]}

    asyncio.run(scenario())


def test_the_keys_of_a_lookup_that_did_not_look_are_misses() -> None:
    """The hit ratio (hits / (hits + misses)) must count the keys read from the nodes
    without looking, or it shows nearly 100% while most keys go to the nodes."""

    async def scenario() -> None:
        async with harness(admit_after=2) as h:
            keys = [key_in(0, 0), key_in(0, 1)]
            h.cache.passed(WORDS, {0: keys}, _read(keys, [Row(keys[0], 1), None]), keys)
            stats = h.cache.stats()
            assert (stats["hits"], stats["misses"], stats["skipped"]) == (0, 2, 1)

    asyncio.run(scenario())


def test_a_key_missed_again_is_filled_from_its_read_while_the_cache_has_room() -> None:
    """A key asked less often than admission wants, filled from its read while the cache had
    room, whose entry is of an earlier follow: looked up and missed, it is filled again
    from the exact read that missed it, as while the cache has room any key is."""

    async def scenario() -> None:
        async with harness(admit_after=5) as h:
            hot, key = key_in(0, 0), key_in(0, 1)
            for _ in range(5):
                h.ask([hot])  # admitted: the partition is followed
            queue = await h.following(applied=5, other=3)
            h.cache.passed(WORDS, {0: [key]}, _read([key], [Row(key, 4)]), [key])
            assert h.ask([key]).rows == {key: Row(key, 4)}  # filled from its read: room
            queue.put_nowait({"type": "gone", "id": 1, "reason": "moved"})
            await settle()
            await h.following(applied=5, other=3)  # a new follow: the entry is of the old
            missed = h.ask([key]).missing
            assert missed == {0: [key]}
            h.cache.fill(WORDS, missed, _read([key], [Row(key, 5)]), [key])
            assert h.ask([key]).rows == {key: Row(key, 5)}

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("applied", "filled"),
    [({TOPIC: 5}, True), ({TOPIC: 4}, False)],  # a batch of the view's topic being written
    ids=["exact", "mid-batch"],
)
def test_a_read_reporting_its_topic_applied_fills_in_a_catalogue_of_several_views(
    applied: dict[str, int], filled: bool
) -> None:
    """A node reports the position of the view's topic only, and appliedOffset sums every
    changelog of the partition (TOPIC 5 + OTHER 3): compared with that sum the read never
    looked exact, so no read was ever filled from with several views. With the applied
    offset of the view's topic beside its position, an exact read fills, one written
    meanwhile does not."""

    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            await h.following(applied=5, other=3)
            read = _read([key], [Row(key, 4)], positions={TOPIC: 5}, applied=applied)
            h.cache.fill(WORDS, h.ask([key]).missing, read, [key])
            await settle()
            snapshots = [f for f, _ in h.hub.links["n1"].follows.values() if f["snapshot"]]
            assert (snapshots == []) is filled
            assert (h.ask([key]).missing == {}) is filled

    asyncio.run(scenario())
