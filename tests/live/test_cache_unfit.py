"""The gateway cache (gateway.reads.cache) while the owner of a followed partition stays
its owner but cannot vouch for a while (suspect, lagUnknownSince, restoring, not RUNNING,
membership stalled), over the in-memory feed of `tests.live.test_cache`: membership
publishes a routing table every heartbeat, and none of them ends the follow. Its keys miss
meanwhile, the follow keeps them exact, and they answer again once the owner is fit; an
owner that moves still ends the follow and drops them."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from gateway.cluster.consistency import AppliedAtLeast
from gateway.cluster.routing import RoutingTable
from gateway.model.rows import Row
from gateway.reads import cache as cache_module
from schema import NodeState
from tests.live.fake_feed import count_row
from tests.live.test_cache import (
    TOPIC,
    WORDS,
    FakeLink,
    Harness,
    P,
    change,
    harness,
    key_in,
    record,
    settle,
    table,
)
from tests.live.test_cache_whole import frame, load

pytestmark = pytest.mark.timeout(30)

FAULTS = ["suspect", "lag unknown", "restoring", "rebalancing", "membership stalled"]


def unfit(fault: str) -> RoutingTable:
    """A routing table that names n1 the owner of every partition still, unfit to vouch."""
    fit = record("n1", range(P))
    if fault == "suspect":  # its heartbeat 2.5 intervals behind another node's
        late = dataclasses.replace(fit, heartbeat_ms=fit.heartbeat_ms - 2_500)
        return table(late, record("n2", []))
    if fault == "lag unknown":
        statuses = tuple(dataclasses.replace(s, lag_unknown_since_ms=1) for s in fit.partitions)
        return table(dataclasses.replace(fit, partitions=statuses))
    if fault == "restoring":
        return table(record("n1", range(P), restoring=True))
    if fault == "rebalancing":
        return table(dataclasses.replace(fit, state=NodeState.REBALANCING))
    return dataclasses.replace(table(fit), stale_since_ms=1)


def follows(link: FakeLink, snapshot: bool) -> list[int]:
    return [i for i, (f, _) in link.follows.items() if f["snapshot"] is snapshot]


def open_follows(link: FakeLink) -> list[int]:
    return [i for i in follows(link, False) if i not in link.unfollowed]


async def beat(
    h: Harness, fault: str, queues: Mapping[int, asyncio.Queue[Mapping[str, Any]]], at: int
) -> None:
    """A membership heartbeat: a new routing table, the owner unfit in it; then the owner's
    feed heartbeat, at `at`, on each follow."""
    h.feed.publish(unfit(fault))
    await settle()
    for queue in queues.values():
        await h.heartbeat(queue, applied=at)


@pytest.mark.parametrize("fault", FAULTS)
def test_an_owner_that_stays_but_cannot_vouch_keeps_its_follow_its_keys_missing_meanwhile(
    fault: str,
) -> None:
    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            queue = await h.following(applied=5)
            await h.fill([key], {key: count_row(key, 2)}, offset=5)
            assert h.ask([key]).rows == {key: Row(key, 2)}
            link = h.hub.links["n1"]
            for n in range(3):  # three membership heartbeats, the owner unfit in each
                await beat(h, fault, {0: queue}, at=5 + n)
                assert h.ask([key]).missing == {0: [key]}
                # the follow goes on: a change applied meanwhile is kept
                queue.put_nowait(frame([change(WORDS.name, key, 5 + n, count_row(key, 3 + n))],
                                       applied=6 + n))  # fmt: skip
                await settle()
                assert h.ask([key]).missing == {0: [key]}
            assert open_follows(link) == [1] and follows(link, False) == [1]
            h.feed.publish(table(record("n1", range(P))))  # fit again
            await h.heartbeat(queue, applied=8)
            assert h.ask([key]).rows == {key: Row(key, 5)}  # the feed's last change of it
            assert len(follows(link, True)) == 1  # the one fill: no snapshot asked again
            # unfit, then moved: the follow ends, its entries with it
            h.feed.publish(unfit(fault))
            await settle()
            h.feed.publish(table(record("n1", []), record("n2", range(P))))
            await settle()
            assert open_follows(link) == []
            await h.following("n2", applied=8)
            assert h.ask([key]).missing == {0: [key]}  # n1's entries went with its follow

    asyncio.run(scenario())


def test_an_owner_unfit_while_its_heartbeats_stopped_misses_until_one_comes_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A follow kept through a long unfit spell vouches for nothing the owner did not say
    lately: fit again in the table, its keys miss until a heartbeat with the lease comes."""
    monkeypatch.setattr(cache_module, "FEED_SILENCE_S", 0.05)

    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            queue = await h.following(applied=5)
            await h.fill([key], {key: count_row(key, 2)}, offset=5)
            h.feed.publish(unfit("suspect"))
            await settle()
            await asyncio.sleep(0.1)  # the owner's silence itself, longer than the bound
            h.feed.publish(table(record("n1", range(P))))
            await settle()
            assert h.ask([key]).missing == {0: [key]}
            await h.heartbeat(queue, applied=5)
            assert h.ask([key]).rows == {key: Row(key, 2)}
            assert follows(h.hub.links["n1"], False) == [1]

    asyncio.run(scenario())


def test_an_at_least_lookup_does_not_wait_for_a_follow_whose_owner_cannot_vouch() -> None:
    """Its keys would miss however far the follow got: the nodes are asked at once."""

    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            await h.following(applied=5)
            h.feed.publish(unfit("lag unknown"))
            await settle()
            loop = asyncio.get_running_loop()
            wanted = AppliedAtLeast(TOPIC, ((0, 7),))
            await asyncio.wait_for(h.cache.reach(WORDS, [0], wanted, loop.time() + 20), 5)

    asyncio.run(scenario())


@pytest.mark.parametrize("fault", ["suspect", "lag unknown"])
def test_a_view_held_whole_is_loaded_once_while_its_owner_stays_unfit(fault: str) -> None:
    async def scenario() -> None:
        async with harness(whole=[WORDS.name]) as h:
            key, new = key_in(0, 0), key_in(0, 1)
            queues = {p: await h.following(applied=5, partition=p) for p in range(P)}
            for partition in range(P):
                await load(h, partition, {key: 2} if partition == 0 else {}, offset=5)
            assert h.ask([key, new]).rows == {key: Row(key, 2), new: None}
            link = h.hub.links["n1"]
            for n in range(3):
                await beat(h, fault, queues, at=5 + n)
                assert h.ask([key]).missing == {0: [key]}
                queues[0].put_nowait(frame([change(WORDS.name, key, 5 + n, count_row(key, 3 + n))],
                                           applied=6 + n))  # fmt: skip
                await settle()
                assert h.ask([key, new]).missing == {0: [key, new]}
            assert sorted(open_follows(link)) == sorted(follows(link, False))
            assert len(follows(link, False)) == P and len(follows(link, True)) == P
            h.feed.publish(table(record("n1", range(P))))
            for partition, queue in queues.items():
                await h.heartbeat(queue, applied=8 if partition == 0 else 5)
            assert h.ask([key, new]).rows == {key: Row(key, 5), new: None}
            # the owner moves: the follows end and n2 loads every partition again
            h.feed.publish(table(record("n1", []), record("n2", range(P))))
            await settle()
            assert open_follows(link) == []
            assert h.cache.stats()["whole_views"] == 0
            for partition in range(P):
                await h.following("n2", applied=8, partition=partition)
            assert h.ask([key]).missing == {0: [key]}
            for partition in range(P):
                await load(h, partition, {key: 5} if partition == 0 else {}, 8, node="n2")
            assert h.ask([key]).rows == {key: Row(key, 5)}

    asyncio.run(scenario())
