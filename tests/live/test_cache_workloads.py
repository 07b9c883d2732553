"""The gateway cache (gateway.reads.cache) under workloads, used as the gateway uses it: the
real planner looks a key up in it and reads the nodes for what it misses. Single-key
lookups of 2,000 keys, drawn uniformly or Zipf-skewed, while the keys' counts change (one
change every 10 lookups, of a key drawn alike, new keys among them) and a tenth of the keys
asked are absent. The node and its change feed are fakes answering from one model; the
cache, its admission, its fills and the planner are the gateway's own. Each workload runs
with the default admission (a key filled at its third ask; while the cache has room, at
its first miss from the read that missed it) and with every miss filled (plain LRU), over
the same draws.

What must hold, lookup by lookup: every answer is the model's count at that moment (hits
and node reads alike: a hit is never older than the feed); the cache's estimated bytes never
pass its bound (a tenth of the keys' rows). And over the run: with uniform access, where a
fill rarely pays, admission fills a tenth of what filling every miss fills and answers
about as often from memory; with skewed access it answers most lookups from memory, once
warm at least as many as filling every miss, with a quarter of the fills or fewer; a view
held whole answers nearly every lookup from memory.

Measured on 4 December 2026 (fills, then hits of 6,000 lookups): uniform 311 and 696 with
admission, 5,292 and 699 filling every miss; Zipf 280 and 3,878 against 2,206 and 3,788
(2,033 and 1,928 hits in the second half). Filling only a key asked twice while the cache
has room: uniform 289 and 634, Zipf 251 and 3,810. Before fills while the cache has room,
admission answered 119 uniform and 3,340 Zipf lookups from memory (1,802 in the second
half), the cache never more than 40% full.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import pytest

from gateway.config import GatewayConfig
from gateway.model.rows import Row
from gateway.nodes.hub import FeedHub
from gateway.nodes.transport import HttpxCaller
from gateway.nodes.upstream import Upstream
from gateway.reads.cache import GatewayCache
from gateway.reads.entries import change_entry
from gateway.reads.planner import Planner
from schema import partition_for
from tests.gateway.fakes import WORDS, FakeNode, Model, client_for, feed_for
from tests.live.fake_feed import count_row

P = 4
KEYS = [f"word{i:04d}" for i in range(2_000)]
ABSENT_EVERY = 10  # one key in ten has no row until a change makes it
LOOKUPS = 6_000
CHANGE_EVERY = 10
HELD = 200  # rows the keyed cache's bound holds, a tenth of the keys
TOPIC = WORDS.changelog_topic
START_OFFSET = 1_000  # where each partition's changelog stands before the run
BEAT_S = 0.3  # heartbeats of the fake feed, well within the cache's 1.5 s of silence


class Truth:
    """The model both fakes answer from: each key's count, and each partition's changelog
    position (the next offset), with the feed's open follows to tell of every change."""

    def __init__(self) -> None:
        counts = {k: 1 + i % 7 for i, k in enumerate(KEYS) if i % ABSENT_EVERY}
        self.model = Model.of_counts(counts)
        self.offsets = [START_OFFSET] * P
        self.follows: dict[int, dict[int, asyncio.Queue[Mapping[str, Any]]]] = {}

    @property
    def counts(self) -> dict[str, int]:
        return self.model.counts[WORDS.name]

    def change(self, key: str) -> None:
        """One more of `key`: its new row, at its partition's next offset, to every follow."""
        partition = partition_for(key, P)
        count = self.counts[key] = self.counts.get(key, 0) + 1
        offset = self.offsets[partition]
        self.offsets[partition] += 1
        doc = {
            "view": WORDS.name,
            "key": key,
            "offset": offset,
            "row": count_row(key, count),
            "at": [],
        }
        for ident, queue in self.follows.get(partition, {}).items():
            queue.put_nowait(
                {"type": "changes", "id": ident, "applied": {TOPIC: offset + 1}, "changes": [doc]}
            )

    def beat(self) -> None:
        """A heartbeat with the lease held on every follow, as a live owner sends."""
        for partition, follows in self.follows.items():
            for ident, queue in follows.items():
                queue.put_nowait(self.position(ident, partition, "progress") | {"leased": True})

    def position(self, ident: int, partition: int, kind: str) -> dict[str, Any]:
        at = {TOPIC: self.offsets[partition]}
        return {
            "type": kind,
            "id": ident,
            "role": "ACTIVE",
            "state": "RUNNING",
            "applied": at,
            "end": at,
        }

    def snapshot(self, ident: int, frame: Mapping[str, Any]) -> dict[str, Any]:
        """The rows a snapshot follow asks for (`keys` null: every row of the partition),
        as of the partition's position now."""
        partition = frame["partition"]
        offset = self.offsets[partition]
        keys = frame["keys"]
        if keys is None:
            keys = [k for k in self.counts if partition_for(k, P) == partition]
        changes = [
            {
                "view": WORDS.name,
                "key": k,
                "offset": offset,
                "snapshot": True,
                "at": [],
                "row": None if k not in self.counts else count_row(k, self.counts[k]),
            }
            for k in keys
        ]
        return {
            "type": "changes",
            "id": ident,
            "snapshot": True,
            "applied": {TOPIC: offset},
            "changes": changes,
        }


class TruthNode(FakeNode):
    """The fake node holding every partition of the truth, its reads positioned where the
    truth's changelogs stand."""

    def __init__(self, truth: Truth) -> None:
        super().__init__("n0", truth.model, range(P), P)
        self.truth = truth

    def freshness(self, read: Any) -> list[dict[str, Any]]:
        offsets = self.truth.offsets
        return [
            {
                "partition": p,
                "node": self.node_id,
                "role": "ACTIVE",
                "appliedOffset": offsets[p],
                "lag": 0,
                "positions": {TOPIC: offsets[p]},
            }
            for p in sorted(read)
        ]


@dataclass
class TruthLink:
    """A node's change feed as the cache's hub hands it out, answering from the truth."""

    truth: Truth
    idents: itertools.count[int]

    async def follow(self, frame: dict[str, Any]) -> tuple[int, asyncio.Queue[Mapping[str, Any]]]:
        ident = next(self.idents)
        queue: asyncio.Queue[Mapping[str, Any]] = asyncio.Queue()
        if frame["snapshot"]:
            queue.put_nowait(self.truth.snapshot(ident, frame))
        else:
            partition = frame["partition"]
            self.truth.follows.setdefault(partition, {})[ident] = queue
            queue.put_nowait(self.truth.position(ident, partition, "following"))
            queue.put_nowait(self.truth.position(ident, partition, "progress") | {"leased": True})
        return ident, queue

    async def unfollow(self, ident: int) -> None:
        for follows in self.truth.follows.values():
            follows.pop(ident, None)


class TruthHub:
    def __init__(self, truth: Truth) -> None:
        self._link = TruthLink(truth, itertools.count(1))

    def link(self, _node: Any) -> TruthLink:
        return self._link


@dataclass
class Run:
    lookups: int
    hits: int
    late_hits: int  # over the second half of the lookups, once the cache has warmed up
    filled: int  # rows filled from node reads and snapshots
    most_bytes: int


def uniform(rng: random.Random) -> Callable[[], str]:
    return lambda: rng.choice(KEYS)


def zipf(rng: random.Random) -> Callable[[], str]:
    """Zipf with exponent 1 over the keys in a shuffled order (the hot keys spread over the
    partitions): the 200 hottest, as many as the cache holds, take about 72% of the draws."""
    order = KEYS[:]
    rng.shuffle(order)
    weights = list(itertools.accumulate(1 / rank for rank in range(1, len(order) + 1)))
    return lambda: rng.choices(order, cum_weights=weights)[0]


def _bound() -> int:
    """Bytes for HELD rows of the keys' size, as the cache estimates an entry."""
    _, size = change_entry(WORDS, KEYS[0], count_row(KEYS[0], 10))
    return HELD * size


def _run(
    draw: Callable[[random.Random], Callable[[], str]],
    admit_after: int,
    max_bytes: int,
    whole: tuple[str, ...] = (),
) -> Run:
    """LOOKUPS lookups drawn by `draw` through a cache of `max_bytes`, and what it did."""
    truth = Truth()
    node = TruthNode(truth)

    async def scenario() -> Run:
        feed = feed_for([node], P, (WORDS,))
        hub = cast(FeedHub, TruthHub(truth))
        cache = GatewayCache(hub, feed, (WORDS,), max_bytes, admit_after, random.Random(7), whole)
        await cache.start()
        try:
            async with client_for([node]) as client:
                upstream = Upstream(HttpxCaller(client))
                planner = Planner(feed, upstream, GatewayConfig(), (WORDS,), cache=cache)
                if whole:
                    await _loaded(cache, truth)
                return await _lookups(planner, cache, truth, draw, max_bytes)
        finally:
            await cache.stop()

    return asyncio.run(scenario())


async def _lookups(
    planner: Planner,
    cache: GatewayCache,
    truth: Truth,
    draw: Callable[[random.Random], Callable[[], str]],
    max_bytes: int,
) -> Run:
    """The lookups, each answer checked against the truth and the bound after it, a change
    every CHANGE_EVERY lookups and the feed's heartbeats meanwhile."""
    next_key, changed = draw(random.Random(31)), draw(random.Random(32))
    loop = asyncio.get_running_loop()
    most, beat, half = 0, loop.time(), 0
    for step in range(LOOKUPS):
        if step == LOOKUPS // 2:
            half = cache.stats()["hits"]
        key = next_key()
        result = await planner.lookup(WORDS, [key], planner.deadline())
        row = result.rows[0]
        assert row is None or isinstance(row, Row)
        got = None if row is None else row.count
        assert got == truth.counts.get(key), (step, key, got, truth.counts.get(key))
        most = max(most, cache.stats()["bytes"])
        assert most <= max_bytes, (step, most, max_bytes)
        if step % CHANGE_EVERY == 0:
            truth.change(changed())
            await asyncio.sleep(0)  # the feed's frame comes between requests
        if loop.time() - beat > BEAT_S:
            truth.beat()
            beat = loop.time()
    stats = cache.stats()
    filled = stats["filled_from_reads"] + stats["filled_by_snapshots"]
    return Run(LOOKUPS, stats["hits"], stats["hits"] - half, filled, most)


async def _loaded(cache: GatewayCache, truth: Truth) -> None:
    """Wait, by the loop's clock, for every partition of the view to be held whole."""
    deadline = asyncio.get_running_loop().time() + 30
    while cache.stats()["whole_views"] != 1:
        assert asyncio.get_running_loop().time() < deadline, cache.stats()
        truth.beat()
        await asyncio.sleep(0.01)


def test_uniform_access_is_exact_within_the_bound_with_a_tenth_of_the_fills():
    admitted = _run(uniform, admit_after=3, max_bytes=_bound())
    every_miss = _run(uniform, admit_after=1, max_bytes=_bound())
    print(f"uniform: admission {admitted}, filling every miss {every_miss}")
    assert admitted.filled <= every_miss.filled / 10
    # while it has room the cache fills from the reads that missed, so it answers about as
    # often as filling every miss...
    assert admitted.hits >= 0.9 * every_miss.hits
    # ...which is about the share of the keys it holds, a tenth: no policy does better
    assert admitted.hits <= 0.15 * admitted.lookups


def test_skewed_access_is_exact_within_the_bound_and_mostly_answered_from_memory():
    admitted = _run(zipf, admit_after=3, max_bytes=_bound())
    every_miss = _run(zipf, admit_after=1, max_bytes=_bound())
    print(f"zipf: admission {admitted}, filling every miss {every_miss}")
    assert admitted.late_hits >= every_miss.late_hits  # once warm: the popular keys stay
    assert admitted.hits >= 0.95 * every_miss.hits
    assert admitted.hits >= 0.5 * admitted.lookups
    assert admitted.filled <= every_miss.filled / 4


@pytest.mark.parametrize("draw", [uniform, zipf], ids=["uniform", "zipf"])
def test_a_view_held_whole_answers_nearly_every_lookup_from_memory_exactly(
    draw: Callable[[random.Random], Callable[[], str]],
) -> None:
    held = _run(draw, admit_after=3, max_bytes=20 * _bound(), whole=(WORDS.name,))
    print(f"whole: {held}")
    # a lookup right after a change misses while its frame waits: one in ten at most
    assert held.hits >= 0.9 * held.lookups
