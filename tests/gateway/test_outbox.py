"""The live transports' send buffer: bounded in messages and in size, one large message
alone, and writers let go when it closes."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.edge.outbox import Outbox


def _message(name: str, size: int) -> str:
    """A message of `size` characters, named `name`."""
    return name.ljust(size, ".")


async def _next(outbox: Outbox[str]) -> str:
    return (await outbox.get()).rstrip(".")


async def _blocked(put: asyncio.Task[Any]) -> bool:
    await asyncio.sleep(0)  # one turn of the loop: a put that fits is done by then
    return not put.done()


def test_writers_wait_past_the_message_count_or_the_size() -> None:
    async def scenario() -> None:
        outbox: Outbox[str] = Outbox(messages=3, size=len, max_bytes=100)
        await outbox.put(_message("a", 40))
        await outbox.put(_message("b", 40))
        over_size = asyncio.create_task(outbox.put(_message("c", 40)))
        assert await _blocked(over_size)
        assert outbox.held_bytes == 80
        assert await _next(outbox) == "a"  # the client read one: the third fits
        await asyncio.wait_for(over_size, 1)
        await outbox.put(_message("d", 1))
        over_count = asyncio.create_task(outbox.put(_message("e", 1)))
        assert await _blocked(over_count)
        assert [await _next(outbox) for _ in range(3)] == ["b", "c", "d"]
        await asyncio.wait_for(over_count, 1)
        assert await _next(outbox) == "e"
        assert outbox.held_bytes == 0

    asyncio.run(scenario())


def test_a_message_larger_than_the_bound_goes_alone_once_the_buffer_is_empty() -> None:
    async def scenario() -> None:
        outbox: Outbox[str] = Outbox(messages=10, size=len, max_bytes=100)
        await outbox.put(_message("small", 10))
        large = asyncio.create_task(outbox.put(_message("large", 1000)))
        assert await _blocked(large)
        assert await _next(outbox) == "small"
        await asyncio.wait_for(large, 1)
        after = asyncio.create_task(outbox.put(_message("after", 1)))
        assert await _blocked(after)  # nothing more while the large one waits
        assert await _next(outbox) == "large"
        await asyncio.wait_for(after, 1)

    asyncio.run(scenario())


def test_closing_drops_what_waits_and_lets_blocked_writers_go() -> None:
    async def scenario() -> None:
        outbox: Outbox[str] = Outbox(messages=1, size=len)
        await outbox.put("held")
        blocked = asyncio.create_task(outbox.put("blocked"))
        assert await _blocked(blocked)
        outbox.close("bye")
        await asyncio.wait_for(blocked, 1)
        await outbox.put("later")  # dropped
        assert await outbox.get() == "bye"
        getter = asyncio.create_task(outbox.get())
        assert await _blocked(getter)  # nothing after the close
        getter.cancel()

    asyncio.run(scenario())


def test_a_large_message_waiting_for_room_is_not_passed_by_small_ones() -> None:
    """Small messages that would fit kept overtaking a large one waiting for room, which
    then waited for as long as they kept coming."""

    async def scenario() -> None:
        outbox: Outbox[str] = Outbox(messages=100, size=len, max_bytes=10)
        await outbox.put(_message("a", 5))
        large = asyncio.create_task(outbox.put(_message("large", 8)))
        assert await _blocked(large)
        small = asyncio.create_task(outbox.put(_message("b", 3)))
        assert await _blocked(small)  # it would fit, but the large one came first
        assert await _next(outbox) == "a"
        await asyncio.wait_for(large, 1)
        assert await _next(outbox) == "large"
        await asyncio.wait_for(small, 1)
        assert await _next(outbox) == "b"

    asyncio.run(scenario())
