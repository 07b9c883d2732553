"""runtime.looplag: a callback that holds the event loop shows as one late wake-up as
long as it held it, and wake-ups of a free loop are not late by that much."""

from __future__ import annotations

import asyncio
import time

from runtime.looplag import LoopLag


def test_a_blocked_loop_shows_as_a_late_wake_up_and_stop_ends_the_task() -> None:
    async def scenario() -> list[float]:
        seen: list[float] = []
        lag = LoopLag(seen.append, interval_s=0.005)
        lag.start()
        deadline = time.monotonic() + 10
        while len(seen) < 5:  # a few wake-ups of a free loop
            assert time.monotonic() < deadline, "no wake-ups measured"
            await asyncio.sleep(0.001)
        free = list(seen)
        time.sleep(0.2)  # the loop held by one callback for 200 ms
        while len(seen) == len(free):
            assert time.monotonic() < deadline, "no wake-up after the block"
            await asyncio.sleep(0.001)
        await lag.stop()
        running = [t for t in asyncio.all_tasks() if "LoopLag._run" in repr(t.get_coro())]
        assert running == [], "the measuring task outlived stop()"
        assert max(free) < 0.2
        return seen[len(free) :]

    late = asyncio.run(scenario())
    assert max(late) >= 0.19, late


def test_stopping_keeps_a_cancellation_of_the_one_stopping_it() -> None:
    """A shutdown cancelled while it stops the measurement must end cancelled, not go on as
    if it had not been (its cancellation swallowed with the measuring task's)."""

    async def scenario() -> list[str]:
        lag = LoopLag(lambda _late: None)
        lag.start()
        after: list[str] = []

        async def teardown() -> None:
            await lag.stop()
            after.append("ran on")

        stopping = asyncio.get_running_loop().create_task(teardown())
        await asyncio.sleep(0)  # it waits for the measuring task to end
        stopping.cancel()
        try:
            await stopping
        except asyncio.CancelledError:
            after.append("cancelled")
        return after

    assert asyncio.run(scenario()) == ["cancelled"]
