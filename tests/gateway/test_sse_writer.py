"""The writer of an SSE stream (gateway.edge.sse) ends when it is cancelled, even when an
event arrives in the same turn of the loop: on Python 3.11, `asyncio.wait_for` returned
that event instead, the writer went on, and the subscription's source outlived the
client that had gone (seen as a `ticks` source still running after its client closed)."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.edge.outbox import Outbox
from gateway.edge.sse import _size, _write


def test_a_writer_cancelled_as_an_event_arrives_ends() -> None:
    asyncio.run(_cancel_as_an_event_arrives())


async def _cancel_as_an_event_arrives() -> None:
    events: Outbox[bytes | object] = Outbox(10, _size)
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    writer = asyncio.create_task(_write(events, send))
    await asyncio.sleep(0)  # the writer waits for an event
    await events.put(b"data: 1\n\n")  # fits: no turn of the loop passes
    writer.cancel()  # in the same turn: the event and the cancellation race
    async with asyncio.timeout(2):
        await asyncio.gather(writer, return_exceptions=True)
    assert writer.cancelled()
    assert sent == []
