"""A history subscription's own follow (gateway.subscriptions.updates `_Source`) hands on a
replay batch only when it fits in the subscription's bound, and never hands over to the
partition's shared follow while a batch it took waits for room: the shared follow delivers
only what comes after the own follow's offset, so that batch would be lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from gateway.nodes.hub import FeedBatch
from gateway.subscriptions.tokens import ResumeToken
from gateway.subscriptions.updates import _Merge, _Source
from schema.feed import Change
from tests.gateway.fakes import BOOKING_HISTORY
from tests.live.fake_feed import wait_for

BOUND, STEP = 10, 5


class OwnFollow:
    """The subscription's own follow, as `_Source` reads it: batches the test puts in."""

    def __init__(self) -> None:
        self.batches: asyncio.Queue[FeedBatch] = asyncio.Queue()
        self.reached: int | None = 0
        self.stopped = False

    @property
    def held(self) -> int:
        return self.batches.qsize()

    def put(self, first: int, count: int) -> None:
        self.batches.put_nowait(events(first, count))
        self.reached = first + count

    def __aiter__(self) -> AsyncIterator[FeedBatch]:
        return self

    async def __anext__(self) -> FeedBatch:
        return await self.batches.get()

    async def stop(self) -> None:
        self.stopped = True


class SharedWatch:
    def settle(self) -> None:
        pass


def events(first: int, count: int) -> FeedBatch:
    found = tuple(
        Change(BOOKING_HISTORY.name, "c", o, {"n": o}) for o in range(first, first + count)
    )
    return FeedBatch(found, first + count, {"partition": 0}, start=first)


def started() -> tuple[_Merge, _Source, OwnFollow]:
    """A history subscription's merge, and its source of partition 0 reading an own follow
    the test feeds (on the running loop)."""
    token = ResumeToken(BOOKING_HISTORY.name, {0: 0})
    merge = _Merge(BOOKING_HISTORY, token, False, BOUND, 0.1, keys=1)
    source = _Source(0, merge, empty_snapshots=True)
    own = OwnFollow()
    source.shared = SharedWatch()  # type: ignore[assignment]
    source.start(own)  # type: ignore[arg-type]
    return merge, source, own


def test_a_replay_batch_waits_for_room_then_the_hand_over_loses_nothing() -> None:
    async def scenario() -> None:
        merge, source, own = started()
        for first in range(0, 3 * STEP, STEP):
            own.put(first, STEP)
        await wait_for(lambda: source.in_hand is not None, 5, "the third batch to wait")
        assert len(merge.pending) == 2 * STEP  # the third does not fit in the bound
        # the shared follow, begun where the replay ends, brings a live event: the replay
        # has nothing more queued, but the batch in hand is not delivered yet
        source.take_shared(events(3 * STEP, 1))
        assert source.joined_at is None
        assert await take(merge, 3 * STEP + 1) == list(range(3 * STEP + 1))
        assert source.joined_at == 3 * STEP  # handed over once the batch went on
        assert not merge.failure
        assert source.stopping is not None
        await source.stopping
        assert own.stopped

    asyncio.run(scenario())


def test_a_replay_batch_larger_than_the_bound_is_held_whole() -> None:
    async def scenario() -> None:
        merge, source, own = started()
        own.put(0, BOUND + STEP)  # a node frame holds up to 500 changes
        own.put(BOUND + STEP, STEP)
        taken = await take(merge, BOUND + 2 * STEP)
        assert taken == list(range(BOUND + 2 * STEP))
        assert not merge.failure
        assert source.task is not None
        source.task.cancel()

    asyncio.run(scenario())


def test_the_hand_over_waits_until_the_shared_follows_events_fit() -> None:
    """A replay that filled the bound: a live event of the shared follow would not fit, so
    the own follow, paced, delivers it too, and hands over once there is room."""

    async def scenario() -> None:
        merge, source, own = started()
        own.put(0, STEP)
        own.put(STEP, STEP)
        await wait_for(lambda: own.held == 0 and len(merge.pending) == BOUND, 5, "the replay")
        source.take_shared(events(BOUND, 1))  # live: the shared follow began at BOUND
        assert source.joined_at is None
        assert not merge.failure
        own.put(BOUND, 1)  # the own follow, live too, brings it as well
        assert await take(merge, BOUND + 1) == list(range(BOUND + 1))
        await wait_for(lambda: source.joined_at is not None, 5, "the hand-over")
        source.take_shared(events(BOUND + 1, 2))
        assert await take(merge, 2) == [BOUND + 1, BOUND + 2]
        assert not merge.failure

    asyncio.run(scenario())


async def take(merge: _Merge, count: int) -> list[int]:
    """The offsets of the next `count` updates, waiting for each."""
    taken: list[int] = []
    while len(taken) < count:
        update = merge.take()
        if update is None:
            assert not merge.failure, merge.failure
            merge.wake.clear()
            await asyncio.wait_for(merge.wake.wait(), 5)
            continue
        taken.append(update.offset)
    return taken
