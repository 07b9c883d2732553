"""The gateway cache behind the planner (gateway.reads.planner): what node reads of every kind
tell it, and lookups answered from what a look found. The cache's follow is the in-memory
feed link of `tests.live.test_cache`; the node reads go to a fake node (`tests.gateway.fakes`)
whose copies are ahead of that follow."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from gateway.config import GatewayConfig
from gateway.model.cursors import ScanFilter
from gateway.model.rows import Row
from gateway.nodes.links import LOST
from gateway.nodes.transport import HttpxCaller
from gateway.nodes.upstream import Upstream
from gateway.reads.entries import change_entry
from gateway.reads.planner import Planner
from gateway.reads.protocol import ReadOptions, ScanAsk
from schema import CATALOGUE, view_by_name
from tests.gateway.fakes import FakeNode, Model
from tests.live.fake_feed import count_row
from tests.live.test_cache import WORDS, Harness, P, harness, key_in, settle
from tests.live.test_cache_whole import load

pytestmark = pytest.mark.timeout(30)

PER_MINUTE = view_by_name("host_access_per_minute")
HISTORY = view_by_name("booking_history")
PAGES = view_by_name("host_pages")
WINDOW = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
# the fake node's copy of partition p has applied 100 + p (`FakeNode.freshness`), the
# cache's follow of partition 0 5 + 3 (`Harness.following`)
NODE_APPLIED = 100


class Copy(FakeNode):
    """n1, holding every partition as `role` (a standby answers as one, hedged to or not)."""

    def __init__(self, role: str = "ACTIVE") -> None:
        super().__init__("n1", Model.of_counts({}), range(P), P, CATALOGUE)
        self.role = role

    def freshness(self, read: Iterable[int]) -> list[dict[str, Any]]:
        return [{**entry, "role": self.role} for entry in super().freshness(read)]


@asynccontextmanager
async def planned(h: Harness, node: FakeNode) -> AsyncIterator[Planner]:
    """A planner reading `node` (at the URL the harness's routing table names) through `h`'s
    cache."""
    transport = httpx.ASGITransport(app=node)
    async with httpx.AsyncClient(mounts={"http://n1.invalid": transport}) as client:
        upstream = Upstream(HttpxCaller(client))
        yield Planner(h.feed, upstream, GatewayConfig(retries=0), cache=h.cache)


Read = Callable[[Planner, float], Awaitable[Any]]

READS: dict[str, Read] = {
    "totals": lambda pl, d: pl.totals(WORDS, None, None, d),
    "scan": lambda pl, d: pl.scan(WORDS, ScanAsk(ScanFilter(), first=5), d),
    "windows": lambda pl, d: pl.windows(PER_MINUTE, key_in(0), None, None, d),
    "history": lambda pl, d: pl.history(HISTORY, key_in(0), None, None, 5, None, d),
    "top of a window": lambda pl, d: pl.top(PER_MINUTE, 3, d, window=WINDOW),
    "top by a field": lambda pl, d: pl.top(PAGES, 3, d, by="views"),
    "top with maxLag 0": lambda pl, d: pl.top(WORDS, 3, d, options=ReadOptions(max_lag=0)),
    "top": lambda pl, d: pl.top(WORDS, 3, d),
    "lookup": lambda pl, d: pl.lookup(WORDS, [key_in(0, 1)], d),
}


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
@pytest.mark.parametrize("role", ["ACTIVE", "STANDBY"])
def test_a_node_read_of_any_kind_or_copy_that_saw_more_than_the_follow_makes_a_miss(
    read: Read, role: str
) -> None:
    """docs/querying.md, Cache: a node read through this gateway that saw more than the feed
    makes a miss, so a hit never answers older than what a client was shown. Every read the
    planner makes tells the cache its freshness, and a standby's counts as the owner's (its
    offsets are those of the same changelog partitions)."""

    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            follow = await h.following(applied=5, other=3)
            await h.fill([key], {key: count_row(key, 4)}, offset=5)
            node = Copy(role)
            async with planned(h, node) as planner:
                # on a busy machine the steps above can outlast FEED_SILENCE_S (then every
                # key misses, as it should): the owner's next heartbeat
                await h.heartbeat(follow)
                hit = await planner.lookup(WORDS, [key], planner.deadline())
                assert hit.rows == [Row(key, 4)] and node.requests == 0
                assert [f["appliedOffset"] for f in hit.freshness] == [8]
                await read(planner, planner.deadline())
                assert node.requests >= 1
                after = await planner.lookup(WORDS, [key], planner.deadline())
            # read again from the node, which has no row of it: not the follow's older one
            assert after.rows == [None]
            assert [f["appliedOffset"] for f in after.freshness] == [NODE_APPLIED]

    asyncio.run(scenario())


class AheadOnTheTopic(Copy):
    """A copy whose read is ahead of the follow on the view's changelog (6 > 5) though
    behind it on the sum over every changelog of the partition (7 < 8): a standby hedged
    to, or the owner mid-write, showing rows the follow has not reached."""

    def freshness(self, read: Iterable[int]) -> list[dict[str, Any]]:
        return [
            {**entry, "appliedOffset": 7, "positions": {WORDS.changelog_topic: 6}}
            for entry in super().freshness(read)
        ]


def test_a_node_read_ahead_on_the_views_topic_makes_a_miss_whatever_the_sum() -> None:
    """A hit never answers older than a read before it: judged on the rows' own topic,
    not on offsets summed over topics the lookup does not read."""

    async def scenario() -> None:
        async with harness() as h:
            key, other = key_in(0), key_in(0, 1)
            h.ask([key])
            follow = await h.following(applied=5, other=3)
            await h.fill([key], {key: count_row(key, 4)}, offset=5)
            node = AheadOnTheTopic()
            async with planned(h, node) as planner:
                await h.heartbeat(follow)
                hit = await planner.lookup(WORDS, [key], planner.deadline())
                assert hit.rows == [Row(key, 4)] and node.requests == 0
                await planner.lookup(WORDS, [other], planner.deadline())  # read at 6
                assert node.requests == 1
                after = await planner.lookup(WORDS, [key], planner.deadline())
            assert node.requests == 2 and after.rows == [None]  # read again, not the hit

    asyncio.run(scenario())


def test_a_lookup_answers_the_rows_it_looked_even_when_their_entries_were_evicted_since() -> None:
    """The fast path looks, then other fields' handlers run before the planner answers what
    it looked: a fill may evict the looked entry meanwhile. Its row was current at the look
    and is answered; nothing fails for the entry being gone."""

    async def scenario() -> None:
        looked_key, other = key_in(0, 0), key_in(0, 1)
        bound = change_entry(WORDS, looked_key, count_row(looked_key, 1))[1] + 10  # one entry
        async with harness(max_bytes=bound) as h:
            h.ask([looked_key])
            follow = await h.following(applied=5)
            await h.fill([looked_key], {looked_key: count_row(looked_key, 1)}, offset=5)
            await h.heartbeat(follow)  # however long the steps above took
            looked = h.cache.look(WORDS, {0: [looked_key]})
            assert looked.rows == {looked_key: Row(looked_key, 1)}
            await h.fill([other], {other: count_row(other, 2)}, offset=5)
            assert not h.cache.holds(WORDS, [looked_key])  # evicted
            node = Copy()
            async with planned(h, node) as planner:
                deadline = planner.deadline()
                answered = await planner.lookup(WORDS, [looked_key], deadline, looked=looked)
            assert answered.rows == [Row(looked_key, 1)] and answered.failures == {}
            assert node.requests == 0
            assert h.cache.holds(WORDS, [other])  # the entry filled since is kept

    asyncio.run(scenario())


def test_a_lookup_answers_an_absent_key_it_looked_in_a_view_held_whole_that_is_no_more() -> None:
    """A view held whole answers absent keys, which are no entries: once a follow ends the
    view is keyed again, and the planner answering what it looked before must not fail."""

    async def scenario() -> None:
        absent = key_in(0, 1)
        async with harness(whole=[WORDS.name]) as h:
            follows = [await h.following(applied=5, partition=p) for p in range(P)]
            for partition in range(P):
                await load(h, partition, {}, offset=5)
            await h.heartbeat(follows[0])  # however long the steps above took
            looked = h.cache.look(WORDS, {0: [absent]})
            assert looked.rows == {absent: None} and looked.missing == {}
            follows[1].put_nowait(LOST)  # the view is held whole no more
            await settle()
            assert h.cache.stats()["whole_views"] == 0
            node = Copy()
            async with planned(h, node) as planner:
                deadline = planner.deadline()
                answered = await planner.lookup(WORDS, [absent], deadline, looked=looked)
            assert answered.rows == [None] and answered.failures == {}
            assert node.requests == 0

    asyncio.run(scenario())
