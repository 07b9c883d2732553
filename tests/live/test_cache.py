"""The gateway cache (gateway.reads.cache) against an in-memory feed link that the test
drives frame by frame: what it answers from memory, when it must miss, how snapshots fill
it exactly, and its LRU bound."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from gateway.cluster.consistency import AppliedAtLeast
from gateway.cluster.routing import NodeInfo, RoutingFeed, RoutingTable, build_routing_table
from gateway.model.rows import Event, Ranked, Row
from gateway.nodes.hub import FeedHub
from gateway.nodes.links import LOST, LinkError
from gateway.reads import cache as cache_module
from gateway.reads.cache import MULTI_KEY_COUNT_EVERY, GatewayCache
from gateway.reads.entries import ENTRY_OVERHEAD_BYTES, least_size, read_entry
from gateway.reads.kinds import to_row
from gateway.reads.protocol import DEFAULT_READ, LookupResult, ReadOptions, TopResult
from runtime.clock import wall_clock_ms
from schema import CATALOGUE, MemberRecord, NodeState, PartitionStatus, Role, partition_for
from tests.live.fake_feed import count_row

pytestmark = pytest.mark.timeout(30)

P = 2
WORDS = CATALOGUE[0]
BOOKINGS = next(v for v in CATALOGUE if v.name == "last_booking")
TOPIC = WORDS.changelog_topic
OTHER = BOOKINGS.changelog_topic


def key_in(partition: int, index: int = 0) -> str:
    found = [f"k{i}" for i in range(100) if partition_for(f"k{i}", P) == partition]
    return found[index]


def record(node_id: str, active: Sequence[int], restoring: bool = False) -> MemberRecord:
    return MemberRecord(
        node_id=node_id,
        url=f"http://{node_id}.invalid",
        state=NodeState.RUNNING,
        heartbeat_ms=wall_clock_ms(),
        heartbeat_interval_ms=1000,
        partitions=tuple(
            PartitionStatus(p, Role.ACTIVE, 0, 0, restoring=restoring) for p in active
        ),
    )


def table(*records: MemberRecord) -> RoutingTable:
    members = {r.node_id: r for r in records}
    return build_routing_table(members, {v.name: P for v in CATALOGUE}, wall_clock_ms())


@dataclass
class FakeLink:
    """A node's feed as the cache sees it: follows asked, and their frame queues."""

    node_id: str
    follows: dict[int, tuple[dict[str, Any], asyncio.Queue[Mapping[str, Any]]]] = field(
        default_factory=dict
    )
    unfollowed: list[int] = field(default_factory=list)
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    refusals: int = 0  # follows refused before one is taken: the node's feed unreachable

    async def follow(self, frame: dict[str, Any]) -> tuple[int, asyncio.Queue[Mapping[str, Any]]]:
        if self.refusals:
            self.refusals -= 1
            raise LinkError(f"node {self.node_id}: feed unreachable (Connection refused)")
        ident = len(self.follows) + 1
        queue: asyncio.Queue[Mapping[str, Any]] = asyncio.Queue()
        self.follows[ident] = (frame, queue)
        self.asked.set()
        return ident, queue

    async def unfollow(self, ident: int) -> None:
        self.unfollowed.append(ident)

    async def asked_for(
        self, snapshot: bool, partition: int = 0
    ) -> tuple[int, asyncio.Queue[Mapping[str, Any]]]:
        """The newest open follow of that kind of `partition`, once asked."""
        while True:
            for ident in sorted(self.follows, reverse=True):
                frame, queue = self.follows[ident]
                mine = frame["snapshot"] == snapshot and frame["partition"] == partition
                if mine and ident not in self.unfollowed:
                    return ident, queue
            self.asked.clear()
            await self.asked.wait()


class FakeHub:
    def __init__(self) -> None:
        self.links: dict[str, FakeLink] = {}

    def link(self, node: NodeInfo) -> FakeLink:
        return self.links.setdefault(node.node_id, FakeLink(node.node_id))


def change(view: str, key: str, offset: int, row: dict[str, Any] | None, snapshot: bool = False):
    doc: dict[str, Any] = {"view": view, "key": key, "offset": offset, "row": row, "at": []}
    if snapshot:
        doc["snapshot"] = True
    return doc


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def _position(applied: int, other: int, end: int | None) -> dict[str, Any]:
    """What a follow's `following` and `progress` frames say of the copy: ACTIVE, RUNNING,
    its applied offsets (TOPIC, OTHER) and the end offsets (TOPIC's `end` if given)."""
    return {"id": 1, "role": "ACTIVE", "state": "RUNNING",
            "applied": {TOPIC: applied, OTHER: other},
            "end": {TOPIC: applied if end is None else end, OTHER: other}}  # fmt: skip


class Harness:
    def __init__(self, cache: GatewayCache, hub: FakeHub, feed: RoutingFeed) -> None:
        self.cache, self.hub, self.feed = cache, hub, feed

    def ask(self, keys: Sequence[str], options: ReadOptions = DEFAULT_READ, view=WORDS):
        keys_of: dict[int, list[str]] = {}
        for key in keys:
            keys_of.setdefault(partition_for(key, P), []).append(key)
        hits = self.cache.look(view, keys_of, options)
        # as the planner does with what it looked up
        self.cache.took(view, hits.rows)
        self.cache.missed(sum(map(len, hits.missing.values())))
        return hits

    async def following(
        self,
        node: str = "n1",
        applied: int = 5,
        other: int = 3,
        end: int | None = None,
        partition: int = 0,
    ) -> asyncio.Queue[Mapping[str, Any]]:
        """Let the cache's follow of `partition` start on `node`: its `following` frame."""
        link = self.hub.links.setdefault(node, FakeLink(node))
        _, queue = await link.asked_for(False, partition)
        queue.put_nowait({"type": "following", **_position(applied, other, end)})
        await self.heartbeat(queue, applied, other, end)
        return queue

    async def heartbeat(
        self,
        queue: asyncio.Queue[Mapping[str, Any]],
        applied: int = 5,
        other: int = 3,
        end: int | None = None,
    ) -> None:
        """The owner's heartbeat on the follow `queue` (sent every 0.5 s, changed or not):
        its keys answer only within FEED_SILENCE_S of one."""
        queue.put_nowait({"type": "progress", **_position(applied, other, end), "leased": True})
        await settle()

    async def fill(
        self, keys: Sequence[str], rows: Mapping[str, Any], offset: int, node="n1", view=WORDS
    ):
        """Miss `keys`, then answer the snapshot follow the cache asks for with `rows`."""
        self.cache.fill(view, {partition_for(keys[0], P): list(keys)})
        link = self.hub.links[node]
        _, queue = await link.asked_for(True, partition_for(keys[0], P))
        snapshot = [change(view.name, k, offset, rows.get(k), snapshot=True) for k in keys]
        queue.put_nowait({"type": "changes", "id": 2, "changes": snapshot, "snapshot": True})
        await settle()


@contextlib.asynccontextmanager
async def harness(
    routing: RoutingTable | None = None,
    max_bytes: int = 1 << 20,
    admit_after: int = 1,
    rng: random.Random | None = None,
    whole: Sequence[str] = (),
) -> AsyncIterator[Harness]:
    """A started cache over a fake hub; it admits every key at its first miss unless told
    (most tests look at what happens once a key is in), and draws the multi-key lookups
    it counts from a seeded `rng` (the same draws every run)."""
    feed = RoutingFeed(routing or table(record("n1", range(P))))
    hub = FakeHub()
    draws = rng or random.Random(7)
    cache = GatewayCache(
        cast(FeedHub, hub), feed, CATALOGUE, max_bytes, admit_after, draws, whole=whole
    )
    await cache.start()
    try:
        yield Harness(cache, hub, feed)
    finally:
        await cache.stop()


def test_a_filled_key_is_answered_from_memory_with_the_node_freshness() -> None:
    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            assert h.ask([key]).missing == {0: [key]}  # nothing followed yet: a miss
            await h.following(applied=5, other=3, end=9)
            frame = h.hub.links["n1"].follows[1][0]
            assert frame["views"] == [v.name for v in CATALOGUE] and frame["keys"] is None
            await h.fill([key], {key: count_row(key, 4)}, offset=5)
            hits = h.ask([key])
            assert hits.missing == {} and hits.rows == {key: Row(key, 4)}
            # a node read sums applied and end over the copy's changelog topics, and
            # reports each topic's position (for the answer's read token)
            assert hits.freshness == [
                {
                    "partition": 0,
                    "node": "n1",
                    "role": "ACTIVE",
                    "appliedOffset": 8,
                    "lag": 4,
                    "positions": {TOPIC: 5, OTHER: 3},
                }
            ]

    asyncio.run(scenario())


def test_changes_at_or_after_a_rows_offset_replace_it_and_older_ones_do_not() -> None:
    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            queue = await h.following(applied=5)
            await h.fill([key], {key: count_row(key, 4)}, offset=5)
            stale = change(WORDS.name, key, 4, count_row(key, 3))  # already in the row
            newer = change(WORDS.name, key, 5, count_row(key, 5))
            queue.put_nowait({"type": "changes", "id": 1, "changes": [stale, newer],
                              "applied": {TOPIC: 6}})  # fmt: skip
            await settle()
            assert h.ask([key]).rows == {key: Row(key, 5)}
            deleted = change(WORDS.name, key, 6, None)
            queue.put_nowait({"type": "changes", "id": 1, "changes": [deleted],
                              "applied": {TOPIC: 7}})  # fmt: skip
            await settle()
            assert h.ask([key]).rows == {key: None}  # a delete: the node has no row either

    asyncio.run(scenario())


def test_a_change_seen_while_the_snapshot_is_asked_for_wins_over_an_older_snapshot() -> None:
    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            queue = await h.following(applied=5)
            h.cache.fill(WORDS, {0: [key]})
            _, snap = await h.hub.links["n1"].asked_for(True)
            # the follow passes offset 7 of the key before the snapshot (read at 6) comes
            queue.put_nowait({"type": "changes", "id": 1,
                              "changes": [change(WORDS.name, key, 7, count_row(key, 9))],
                              "applied": {TOPIC: 8}})  # fmt: skip
            await settle()
            old = change(WORDS.name, key, 6, count_row(key, 8), snapshot=True)
            snap.put_nowait({"type": "changes", "id": 2, "snapshot": True, "changes": [old]})
            await settle()
            assert h.ask([key]).rows == {key: Row(key, 9)}

    asyncio.run(scenario())


def test_a_snapshot_older_than_what_the_follow_had_reached_is_not_kept() -> None:
    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            await h.following(applied=5)
            await h.fill([key], {key: count_row(key, 1)}, offset=4)
            assert h.ask([key]).missing == {0: [key]}

    asyncio.run(scenario())


def test_a_row_is_not_answered_before_the_follow_reaches_its_offset() -> None:
    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            queue = await h.following(applied=5)
            await h.fill([key], {key: count_row(key, 2)}, offset=8)  # the node is ahead
            assert h.ask([key]).missing == {0: [key]}
            queue.put_nowait({"type": "changes", "id": 1, "changes": [],
                              "applied": {TOPIC: 8}})  # fmt: skip
            await settle()
            assert h.ask([key]).rows == {key: Row(key, 2)}

    asyncio.run(scenario())


def test_uncertain_partitions_miss() -> None:
    async def scenario() -> None:
        async with harness() as h:
            key, other = key_in(0), key_in(1)
            h.ask([key, other])
            queue = await h.following(applied=5)
            await h.fill([key], {key: count_row(key, 2)}, offset=5)
            # partition by partition: the followed one answers, the other misses
            hits = h.ask([key, other])
            assert hits.rows == {key: Row(key, 2)} and hits.missing == {1: [other]}
            # a frame not handled yet: it may change the row
            queue.put_nowait({"type": "progress", "id": 1, "role": "ACTIVE", "state": "RUNNING"})
            assert h.ask([key]).missing == {0: [key]}
            await settle()
            assert h.ask([key]).rows == {key: Row(key, 2)}
            # an atLeast the follow has not reached; then one it has
            at_least = AppliedAtLeast(TOPIC, ((0, 6),))
            assert h.ask([key], ReadOptions(at_least=at_least)).missing == {0: [key]}
            met = AppliedAtLeast(TOPIC, ((0, 5),))
            assert h.ask([key], ReadOptions(at_least=met)).rows == {key: Row(key, 2)}
            # a node read through the gateway saw more than the follow: no older hit
            h.cache.observe([{"partition": 0, "role": "ACTIVE", "appliedOffset": 9}])
            assert h.ask([key]).missing == {0: [key]}
            h.cache.observe([{"partition": 0, "role": "ACTIVE", "appliedOffset": 8}])
            # (8 = 5 + 3: the follow's sum) still a miss: the highest seen counts
            assert h.ask([key]).missing == {0: [key]}

    asyncio.run(scenario())


def test_the_owner_moving_restoring_or_the_link_lost_makes_misses() -> None:
    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            await h.following(applied=5)
            await h.fill([key], {key: count_row(key, 2)}, offset=5)
            assert h.ask([key]).rows == {key: Row(key, 2)}
            h.feed.publish(table(record("n1", [0, 1], restoring=True)))
            assert h.ask([key]).missing == {0: [key]}  # restoring: not even read by nodes
            h.feed.publish(table(record("n1", [1]), record("n2", [0])))
            assert h.ask([key]).missing == {0: [key]}  # n2 owns it now
            # the follow moves to n2; what n1's follow held is gone
            await h.following("n2", applied=5)
            assert h.ask([key]).missing == {0: [key]}
            await h.fill([key], {key: count_row(key, 3)}, offset=5, node="n2")
            assert h.ask([key]).rows == {key: Row(key, 3)}
            h.hub.links["n2"].follows[1][1].put_nowait(LOST)
            await settle()
            assert h.ask([key]).missing == {0: [key]}  # entries of a lost follow are gone
            await h.following("n2", applied=5)
            assert h.ask([key]).missing == {0: [key]}

    asyncio.run(scenario())


def test_a_feed_that_does_not_answer_is_said_once_a_run_and_its_retries_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        async with harness() as h:
            h.hub.links["n1"] = FakeLink("n1", refusals=3)
            h.ask([key_in(0)])
            queue = await h.following(applied=5)  # the fourth follow is taken
            queue.put_nowait(LOST)
            h.hub.links["n1"].refusals = 2  # the node restarts
            await settle()
            await h.following(applied=5)

    with caplog.at_level(logging.DEBUG, "gateway.reads.cache"):
        asyncio.run(scenario())
    said = [(r.levelno, r.getMessage()) for r in caplog.records if "unreachable" in r.message]
    line = "cache, partition 0: node n1: feed unreachable (Connection refused)"
    info, debug = (logging.INFO, line), (logging.DEBUG, line)
    assert said == [info, debug, debug, info, debug]


def test_entries_are_evicted_least_recently_used_first_past_the_bound() -> None:
    async def scenario() -> None:
        keys = [key_in(0, i) for i in range(3)]
        rows = {k: count_row(k, 1) for k in keys}
        size = max(len(f'{{"key":"{k}","count":1,"last_event_ms":1700000000001}}') for k in keys)
        bound = 2 * (ENTRY_OVERHEAD_BYTES + 2 * len(keys[0]) + size)
        async with harness(max_bytes=bound) as h:
            h.ask(keys)
            await h.following(applied=5)
            await h.fill(keys[:2], rows, offset=5)
            assert h.ask(keys[:1]).rows == {keys[0]: Row(keys[0], 1)}  # keys[0] used last
            await h.fill(keys[2:], rows, offset=5)
            assert h.cache.stats()["bytes"] <= bound
            assert h.ask(keys[1:2]).missing == {0: keys[1:2]}  # evicted
            assert h.ask([keys[0], keys[2]]).missing == {}

    asyncio.run(scenario())


def test_a_latest_row_reads_as_the_node_gives_it() -> None:
    doc = {
        "key": "c1",
        "event_ms": 1_700_000_000_123,
        "fields": {"trip": "LIS-BER", "seats": 2, "other": 1},
    }
    row = to_row(BOOKINGS, "c1", doc)
    assert isinstance(row, Event) and row.key == "c1"
    assert row.event_time == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert row.values["trip"] == "LIS-BER"
    assert set(row.values) == {f.name for f in BOOKINGS.value_fields}


def test_the_garbage_collector_does_not_walk_the_cached_rows() -> None:
    """A full collection walks every object the collector tracks: with an object per cached
    row it paused the gateway for up to 0.6 s at 226,000 rows (issue 31). The entries of
    count and latest rows are untracked by the younger collections they survive (and the
    gateway freezes what its start-up made, the cache's table included:
    gateway.edge.server)."""

    async def scenario() -> None:
        async with harness() as h:
            words = [key_in(0, i) for i in range(5)]
            customers = [f"c{i}" for i in range(100) if partition_for(f"c{i}", P) == 0][:5]
            latest = {"event_ms": 1_700_000_000_123, "fields": {"trip": "LIS-BER", "seats": 2}}
            h.ask(words)
            follow = await h.following(applied=5)
            await h.fill(words, {k: count_row(k, 3) for k in words[:4]}, offset=5)  # 1 absent
            await h.fill(customers, {c: {"key": c, **latest} for c in customers}, 3, view=BOOKINGS)
            entries = h.cache._entries
            assert len(entries) == 10
            # the first pass over an entry untracks it (a view's first event entry needs two:
            # its shared names tuple is untracked in the first); in the gateway the young
            # collections an entry survives make them, before a full collection sees it
            gc.collect()
            gc.collect()
            tracked = [(k, e) for k, e in entries.items() if gc.is_tracked(k) or gc.is_tracked(e)]
            assert tracked == []
            # the test process's full collections can outlast FEED_SILENCE_S on a busy
            # machine (then every key misses, as it should): the owner's next heartbeat
            await h.heartbeat(follow)
            assert h.ask(words[:1]).rows == {words[0]: Row(words[0], 3)}
            found = h.ask(customers[:1], view=BOOKINGS).rows[customers[0]]
            assert found == to_row(BOOKINGS, customers[0], {"key": customers[0], **latest})

    asyncio.run(scenario())


def top_result(rows: Sequence[Ranked], node: str = "n1") -> TopResult:
    freshness = [{"partition": p, "node": node, "role": "ACTIVE"} for p in range(P)]
    return TopResult(list(rows), {}, freshness)


def test_a_merged_top_is_kept_until_a_change_could_alter_it() -> None:
    async def scenario() -> None:
        async with harness() as h:
            assert h.cache.top_reading(WORDS, 2, P, DEFAULT_READ) is None  # nothing followed
            first = await h.following(applied=5)
            _, second = await h.hub.links["n1"].asked_for(False, 1)
            queues = [first, second]
            second.put_nowait({"type": "following", "id": 2, "role": "ACTIVE",
                                  "state": "RUNNING", "applied": {TOPIC: 7}})  # fmt: skip
            second.put_nowait({"type": "progress", "id": 2, "role": "ACTIVE",
                                  "state": "RUNNING", "leased": True})  # fmt: skip
            await settle()
            rows = [Row("a", 9), Row("b", 5)]
            read = h.cache.top_reading(WORDS, 2, P, DEFAULT_READ)
            assert read is not None
            h.cache.top_read(read, top_result(rows))
            hit = h.cache.top(WORDS, 2, P, DEFAULT_READ)
            assert hit is not None and hit.rows == rows
            assert [e["appliedOffset"] for e in hit.freshness] == [8, 7]  # the feeds' now
            assert h.cache.top(WORDS, 3, P, DEFAULT_READ) is None  # another limit
            # a key below the top's last count cannot enter it
            low = change(WORDS.name, "c", 5, count_row("c", 4))
            queues[0].put_nowait({"type": "changes", "id": 1, "changes": [low]})
            await settle()
            assert h.cache.top(WORDS, 2, P, DEFAULT_READ) is not None
            # one reaching it can
            tie = change(WORDS.name, "c", 6, count_row("c", 5))
            queues[1].put_nowait({"type": "changes", "id": 2, "changes": [tie]})
            await settle()
            assert h.cache.top(WORDS, 2, P, DEFAULT_READ) is None
            # a change during a read that could alter its answer: the answer is not kept
            read = h.cache.top_reading(WORDS, 2, P, DEFAULT_READ)
            assert read is not None
            grown = change(WORDS.name, "b", 7, count_row("b", 6))
            queues[0].put_nowait({"type": "changes", "id": 1, "changes": [grown]})
            await settle()
            h.cache.top_read(read, top_result(rows))
            assert h.cache.top(WORDS, 2, P, DEFAULT_READ) is None
            # nor one some other copy answered
            read = h.cache.top_reading(WORDS, 2, P, DEFAULT_READ)
            assert read is not None
            h.cache.top_read(read, top_result(rows, node="n2"))
            assert h.cache.top(WORDS, 2, P, DEFAULT_READ) is None

    asyncio.run(scenario())


def test_an_at_least_lookup_waits_for_the_feed_to_reach_its_offsets() -> None:
    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            queue = await h.following(applied=5)
            await h.fill([key], {key: count_row(key, 2)}, offset=5)
            wanted = AppliedAtLeast(TOPIC, ((0, 7),))
            at_least = ReadOptions(at_least=wanted)
            loop = asyncio.get_running_loop()
            waiting = loop.create_task(h.cache.reach(WORDS, [0], wanted, loop.time() + 20))
            await settle()
            assert not waiting.done()
            newer = change(WORDS.name, key, 6, count_row(key, 3))
            queue.put_nowait(
                {"type": "changes", "id": 1, "changes": [newer], "applied": {TOPIC: 7}}
            )
            await asyncio.wait_for(waiting, 5)
            assert h.ask([key], at_least).rows == {key: Row(key, 3)}
            # a follow that is not live is not waited for
            h.hub.links["n1"].follows[1][1].put_nowait(LOST)
            await settle()
            far = AppliedAtLeast(TOPIC, ((0, 100),))
            await asyncio.wait_for(h.cache.reach(WORDS, [0], far, loop.time() + 20), 5)

    asyncio.run(scenario())


def test_a_stalled_membership_or_a_lag_the_owner_cannot_know_makes_misses() -> None:
    """The feed does not carry lagUnknownSince: a node read would show it, so no hit."""

    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            await h.following(applied=5)
            await h.fill([key], {key: count_row(key, 2)}, offset=5)
            assert h.ask([key]).rows == {key: Row(key, 2)}
            h.feed.publish(dataclasses.replace(h.feed.current, stale_since_ms=1))
            assert h.ask([key]).missing == {0: [key]}
            unknown = record("n1", range(P))
            statuses = tuple(
                dataclasses.replace(s, lag_unknown_since_ms=1) for s in unknown.partitions
            )
            h.feed.publish(table(dataclasses.replace(unknown, partitions=statuses)))
            assert h.ask([key]).missing == {0: [key]}

    asyncio.run(scenario())


@pytest.mark.parametrize("fault", ["silent", "lease lapsed"])
def test_an_owner_whose_heartbeats_stop_or_vouch_for_nothing_makes_misses(
    fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frozen owner sends nothing, and silence is not "no change": once no heartbeat came
    with the lease held for FEED_SILENCE_S, its keys are misses (the read asks a node),
    until one comes again."""
    monkeypatch.setattr(cache_module, "FEED_SILENCE_S", 0.05)

    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            queue = await h.following(applied=5)
            await h.fill([key], {key: count_row(key, 3)}, 5)
            assert h.ask([key]).rows == {key: Row(key, 3)}
            if fault == "lease lapsed":  # heartbeats go on, saying the lease lapsed
                beat = {"type": "progress", "id": 1, "role": "ACTIVE", "state": "RUNNING"}
                for _ in range(3):
                    queue.put_nowait({**beat, "leased": False})
                    await asyncio.sleep(0.03)
                    await settle()
            else:
                await asyncio.sleep(0.1)  # the silence itself, longer than the bound
            assert h.ask([key]).missing == {0: [key]}
            queue.put_nowait({"type": "progress", "id": 1, "role": "ACTIVE",
                              "state": "RUNNING", "leased": True})  # fmt: skip
            await settle()
            assert h.ask([key]).rows == {key: Row(key, 3)}

    asyncio.run(scenario())


def test_a_key_read_once_is_not_filled_and_its_partition_not_followed() -> None:
    """With admission (the default: a key is filled once asked twice), a key asked once
    costs its node read alone: no follow of its partition, no snapshot."""

    async def scenario() -> None:
        async with harness(admit_after=2) as h:
            once, again = key_in(0, 0), key_in(0, 1)
            h.ask([once])
            await settle()
            assert h.hub.links == {}  # nothing followed
            h.cache.fill(WORDS, {0: [once]})
            h.ask([again])
            h.ask([again])  # asked again: its partition is followed
            await h.following(applied=5)
            h.cache.fill(WORDS, {0: [once]})
            h.cache.fill(WORDS, {0: [again]})
            _, queue = await h.hub.links["n1"].asked_for(True, 0)
            frame = next(f for f, q in h.hub.links["n1"].follows.values() if q is queue)
            assert frame["keys"] == [again]  # the key asked once is not filled
            assert h.cache.stats()["refused"] == 1  # `once`, at the fill once followed

    asyncio.run(scenario())


def test_a_full_cache_keeps_a_row_asked_more_often_than_the_newcomer() -> None:
    async def scenario() -> None:
        keys = [key_in(0, i) for i in range(3)]
        rows = {k: count_row(k, 1) for k in keys}
        size = max(len(f'{{"key":"{k}","count":1,"last_event_ms":1700000000001}}') for k in keys)
        bound = 2 * (ENTRY_OVERHEAD_BYTES + 2 * len(keys[0]) + size)
        async with harness(max_bytes=bound, admit_after=2) as h:
            for _ in range(3):
                h.ask(keys[:2])  # the two held rows, asked three times each
            await h.following(applied=5)
            await h.fill(keys[:2], rows, offset=5)
            assert h.ask(keys[:2]).missing == {}
            h.ask(keys[2:])
            h.ask(keys[2:])  # asked twice: not more often than the row it would evict
            h.cache.fill(WORDS, {0: keys[2:]})
            await settle()
            assert h.ask(keys[:2]).missing == {} and h.cache.stats()["refused"] == 1
            for _ in range(4):
                h.ask(keys[2:])  # now asked more often than the least recently used row
            await h.fill(keys[2:], rows, offset=5)
            assert h.ask(keys[2:]).missing == {}
            assert h.cache.stats()["entries"] == 2

    asyncio.run(scenario())


def test_a_lookup_looks_only_when_an_entry_of_every_key_is_held() -> None:
    """Only a lookup answered whole from memory saves a node read, so only a lookup whose
    keys are all held looks (`holds`); whether an entry is current is the look's to judge."""

    async def scenario() -> None:
        async with harness() as h:
            key, other = key_in(0, 0), key_in(0, 1)
            assert not h.cache.holds(WORDS, [key])
            h.ask([key])
            await h.following(applied=5)
            await h.fill([key], {key: count_row(key, 7)}, offset=5)
            assert h.cache.holds(WORDS, [key])
            assert not h.cache.holds(WORDS, [key, other])
            assert not h.cache.holds(BOOKINGS, [key])  # another view's entry

    asyncio.run(scenario())


def test_a_lookup_that_skipped_counts_its_key_so_a_key_asked_again_is_filled_from_its_read() -> (
    None
):
    """Lookups that did not look (`passed`) count their keys for admission: the third
    ask of a key (admit_after 3) follows its partition, and the next one, read exactly from
    the followed owner, fills the key from that read: the ask after is held and hit."""

    async def scenario() -> None:
        async with harness(admit_after=3) as h:
            key = key_in(0)
            keys_of = {0: [key]}
            read = _read([key], [Row(key, 4)])
            h.cache.passed(WORDS, keys_of, read, [key])
            h.cache.passed(WORDS, keys_of, read, [key])
            await settle()
            assert h.hub.links == {}  # asked twice: not admitted, nothing followed
            h.cache.passed(WORDS, keys_of, read, [key])
            await h.following(applied=5, other=3)  # the third ask followed its partition
            assert not h.cache.holds(WORDS, [key])
            h.cache.passed(WORDS, keys_of, read, [key])
            assert h.cache.holds(WORDS, [key])
            assert h.ask([key]).rows == {key: Row(key, 4)}
            assert h.cache.stats()["skipped"] == 4

    asyncio.run(scenario())


def test_every_single_key_lookup_that_skipped_counts_and_a_multi_key_one_in_16_at_random() -> None:
    """A single-key lookup that did not look counts its key every time (a key asked again
    is admitted at its third ask). A multi-key lookup counts its keys one time in
    `MULTI_KEY_COUNT_EVERY`, drawn at random rather than every n-th: over 500 pairs asked
    in turn 32 times, every 16th would count a quarter of the pairs (500 is 4 past a multiple
    of 16) and never the others."""

    async def scenario() -> None:
        async with harness(admit_after=3) as h:
            counted: list[str] = []
            asked = h.cache._admission.asked

            def recording(view: str, key: str) -> bool:
                counted.append(key)
                return asked(view, key)

            h.cache._admission.asked = recording  # type: ignore[method-assign]
            for i in range(100):
                h.cache.passed(WORDS, {0: [f"one{i}"]}, _read([f"one{i}"], [None]), [f"one{i}"])
            assert counted == [f"one{i}" for i in range(100)]
            counted.clear()
            pairs, cycles = 500, 32
            for _ in range(cycles):
                for i in range(pairs):
                    keys = [f"a{i}", f"b{i}"]
                    h.cache.passed(WORDS, {0: keys}, _read(keys, [None, None]), keys)
            draws = len(counted) // 2
            share = draws / (pairs * cycles)
            assert 0.9 / MULTI_KEY_COUNT_EVERY < share < 1.1 / MULTI_KEY_COUNT_EVERY, share
            assert len({k for k in counted if k.startswith("a")}) > 0.8 * pairs
            assert h.cache.stats()["skipped"] == 100 + pairs * cycles

    asyncio.run(scenario())


def test_a_lookup_fills_its_misses_only_when_every_one_is_admitted() -> None:
    """A multi-key lookup saves a node read only when the cache answers all of it: while
    one of its keys is asked too seldom to be admitted, the others are not filled for it
    (a lookup of them alone still fills them)."""

    async def scenario() -> None:
        async with harness(admit_after=2) as h:
            hot, other, once = key_in(0, 0), key_in(0, 2), key_in(0, 1)
            for _ in range(2):
                h.ask([hot, other])  # admitted, and their partition followed
            await h.following(applied=5)
            h.cache.fill(WORDS, h.ask([hot, other, once]).missing)
            await settle()
            snapshots = [f for f, _ in h.hub.links["n1"].follows.values() if f["snapshot"]]
            assert snapshots == []  # `once` is not admitted: nothing filled for the lookup
            assert h.cache.stats()["refused"] == 1
            await h.fill([hot, other], {hot: count_row(hot, 3)}, offset=5)  # alone: filled
            assert h.ask([hot, other]).rows == {hot: Row(hot, 3), other: None}

    asyncio.run(scenario())


def _read(keys: Sequence[str], rows: Sequence[Row | None], **entry: Any) -> LookupResult:
    """A node read of `keys` in partition 0, its freshness entry `entry` over n1's ACTIVE
    copy at the follow's positions (TOPIC 5, OTHER 3), exact unless told."""
    freshness = {"partition": 0, "node": "n1", "role": "ACTIVE", "appliedOffset": 8,
                 "lag": 0, "positions": {TOPIC: 5, OTHER: 3}, **entry}  # fmt: skip
    return LookupResult(list(rows), [0] * len(keys), {}, [freshness])


def test_a_miss_read_exactly_from_the_followed_owner_fills_from_that_read() -> None:
    """The node read that missed a key is the fill when it is exact and the follow will bring
    every change after it: no snapshot is asked for, the row answers at once, and a change
    at or after the read's position replaces it."""

    async def scenario() -> None:
        async with harness() as h:
            key, absent = key_in(0, 0), key_in(0, 1)
            h.ask([key, absent])
            queue = await h.following(applied=5, other=3)
            keys = [key, absent]
            h.cache.fill(WORDS, h.ask(keys).missing, _read(keys, [Row(key, 4), None]), keys)
            await settle()
            assert not any(f["snapshot"] for f, _ in h.hub.links["n1"].follows.values())
            hits = h.ask(keys)
            assert hits.missing == {} and hits.rows == {key: Row(key, 4), absent: None}
            newer = change(WORDS.name, key, 5, count_row(key, 5))
            queue.put_nowait(
                {"type": "changes", "id": 1, "applied": {TOPIC: 6}, "changes": [newer]}
            )
            await settle()
            assert h.ask([key]).rows == {key: Row(key, 5)}

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "entry, follow_at",
    [
        ({"positions": {TOPIC: 6, OTHER: 3}}, 5),  # a batch being written: rows maybe newer
        ({"node": "n2"}, 5),  # another copy answered
        ({"role": "STANDBY"}, 5),
        ({"appliedOffset": 7, "positions": {TOPIC: 4, OTHER: 3}}, 5),  # the follow passed it
    ],
    ids=["batch being written", "another node", "a standby", "follow passed the read"],
)
def test_a_miss_read_that_is_not_exact_or_passed_by_the_follow_fills_by_snapshot(
    entry: dict[str, Any], follow_at: int
) -> None:
    async def scenario() -> None:
        async with harness() as h:
            key = key_in(0)
            h.ask([key])
            await h.following(applied=follow_at, other=3)
            h.cache.fill(WORDS, h.ask([key]).missing, _read([key], [Row(key, 4)], **entry), [key])
            await asyncio.wait_for(h.hub.links["n1"].asked_for(True, 0), 5)
            assert h.ask([key]).missing == {0: [key]}  # not filled from the read

    asyncio.run(scenario())


def test_a_full_cache_makes_no_entry_of_a_miss_it_has_no_room_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eviction keeps the cache's bytes just below its bound, so a full cache nearly always
    has a little room left, less than an entry takes. A miss is then not made into an entry
    only to be thrown away: under uniform lookups of a full cache every miss was (6% of the
    gateway's samples), and it is refused as before."""
    made: list[str] = []

    def counted(key: str, row: Any) -> Any:
        made.append(key)
        return read_entry(key, row)

    monkeypatch.setattr(cache_module, "read_entry", counted)

    async def scenario() -> None:
        hot, missed = key_in(0, 0), key_in(0, 1)
        bound = read_entry(hot, Row(hot, 1))[1] + least_size(missed) - 1
        async with harness(max_bytes=bound, admit_after=3) as h:
            for _ in range(3):  # admitted at its third ask: partition 0 followed
                h.cache.passed(WORDS, {0: [hot]}, _read([hot], [Row(hot, 1)]), [hot])
            await h.following(applied=5, other=3)
            h.cache.passed(WORDS, {0: [hot]}, _read([hot], [Row(hot, 1)]), [hot])
            assert made == [hot]
            h.cache.passed(WORDS, {0: [missed]}, _read([missed], [Row(missed, 1)]), [missed])
            assert made == [hot]  # room for less than the key: nothing made
            assert not h.cache.holds(WORDS, [missed])
            assert h.cache.stats()["refused"] == 3  # `hot` at its first two asks, `missed`

    asyncio.run(scenario())


class _Counting(random.Random):
    """Draws that count every multi-key lookup's keys (`MULTI_KEY_COUNT_EVERY`)."""

    def random(self) -> float:
        return 0.0


def test_while_it_has_room_a_key_read_once_is_filled_from_its_exact_read() -> None:
    """Admission decides once the cache is full. Until then a key read once is filled from
    the node read that missed it, when that read is exact and the key's partition is
    followed already: no second read, no follow, nothing evicted. A read that is not exact
    fills nothing, and asks for no snapshot."""

    async def scenario() -> None:
        hot, once, late, other = (key_in(0, i) for i in range(4))
        bound = sum(read_entry(k, Row(k, 1))[1] for k in (hot, once))
        async with harness(max_bytes=bound, admit_after=3) as h:
            for _ in range(3):  # admitted at its third ask: partition 0 followed
                h.cache.passed(WORDS, {0: [hot]}, _read([hot], [Row(hot, 1)]), [hot])
            await h.following(applied=5, other=3)
            h.cache.passed(WORDS, {0: [hot]}, _read([hot], [Row(hot, 1)]), [hot])
            h.cache.passed(WORDS, {0: [once]}, _read([once], [Row(once, 1)]), [once])
            assert h.ask([hot, once]).rows == {hot: Row(hot, 1), once: Row(once, 1)}
            assert h.cache.stats()["refused"] == 2  # `hot` at its first two asks
            for _ in range(2):  # full: asked twice, not filled
                h.cache.passed(WORDS, {0: [late]}, _read([late], [Row(late, 1)]), [late])
            assert not h.cache.holds(WORDS, [late])
            assert h.cache.stats()["refused"] == 4
            assert h.cache.stats()["bytes"] <= bound
        async with harness(admit_after=3, rng=_Counting()) as h:
            for _ in range(3):
                h.cache.passed(WORDS, {0: [hot]}, _read([hot], [Row(hot, 1)]), [hot])
            await h.following(applied=5, other=3)
            batch_written = _read([other], [Row(other, 1)], positions={TOPIC: 6, OTHER: 3})
            h.cache.passed(WORDS, {0: [other]}, batch_written, [other])
            await settle()
            assert not h.cache.holds(WORDS, [other])
            assert not any(f["snapshot"] for f, _ in h.hub.links["n1"].follows.values())
            # all of a lookup's keys or none: the partition of `elsewhere` is not followed
            elsewhere = key_in(1)
            both = _read([once], [Row(once, 1)])
            both.freshness.append({**both.freshness[0], "partition": 1})
            both.rows.append(Row(elsewhere, 2))
            both.partitions.append(1)
            h.cache.passed(WORDS, {0: [once], 1: [elsewhere]}, both, [once, elsewhere])
            assert not h.cache.holds(WORDS, [once])
            assert h.cache.stats()["refused"] == 5  # `hot` twice, `other`, then both keys

    asyncio.run(scenario())


@pytest.mark.parametrize("outcome", ["answered", "failed"])
def test_keys_a_new_follow_waits_for_are_asked_once_the_old_follows_snapshot_ends(
    outcome: str,
) -> None:
    """A snapshot asked for before the owner moved, answered or failed after: the keys the
    new follow registered meanwhile are asked on the new owner (they were dropped, or
    waited for a fill task that would never come, while the old one was alive)."""

    async def scenario() -> None:
        async with harness() as h:
            before, after = key_in(0, 0), key_in(0, 1)
            h.ask([before, after])
            await h.following(applied=5)
            h.cache.fill(WORDS, {0: [before]})
            _, old = await h.hub.links["n1"].asked_for(True, 0)
            h.feed.publish(table(record("n1", []), record("n2", range(P))))
            await h.following("n2", applied=5)
            h.cache.fill(WORDS, {0: [after]})
            await settle()
            if outcome == "failed":
                old.put_nowait(LOST)
            else:
                row = change(WORDS.name, before, 5, count_row(before, 1), snapshot=True)
                old.put_nowait({"type": "changes", "id": 2, "changes": [row], "snapshot": True})
            ident, queue = await asyncio.wait_for(h.hub.links["n2"].asked_for(True, 0), 5)
            assert h.hub.links["n2"].follows[ident][0]["keys"] == [after]
            row = change(WORDS.name, after, 5, count_row(after, 4), snapshot=True)
            queue.put_nowait({"type": "changes", "id": ident, "changes": [row], "snapshot": True})
            await settle()
            assert h.ask([after]).rows == {after: Row(after, 4)}
            assert h.ask([before]).missing == {0: [before]}  # n1's row is not n2's follow's

    asyncio.run(scenario())
