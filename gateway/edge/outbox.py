"""A connection's send buffer: messages (WebSocket) or events (SSE) waiting for a client to
read them, bounded both in number (STATEFED_GATEWAY_LIVE_SEND_BUFFER) and in size
(`MAX_BYTES`, as the buffer's `size` function measures an item).

Counting messages alone let a client hold a lot of the gateway's memory with a few large
messages it never read (64 pongs echoing pings of 1 MiB each, or big subscription results).
A message that does not fit makes its writer wait until the client has read enough; one
larger than `MAX_BYTES` goes in alone, once the buffer is empty. Writers go in the order
they came: a large message waiting for room is not passed by small ones that would fit
(it would wait for ever while they keep coming). Once closed, the buffer holds only the
item that closed it, and writers' messages are dropped.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["MAX_BYTES", "Outbox"]

MAX_BYTES = 1 << 20  # bytes of messages waiting per connection, past which writers wait

T = TypeVar("T")


class Outbox(Generic[T]):
    """Items waiting to be sent, at most `messages` of them and `max_bytes` of their `size`s
    together, or one item of any size."""

    def __init__(self, messages: int, size: Callable[[T], int], max_bytes: int = MAX_BYTES) -> None:
        self._items: deque[tuple[T, int]] = deque()
        self._bytes = 0
        self._size = size
        self._messages = messages
        self._max_bytes = max_bytes
        self._closed = False
        self._changed = asyncio.Event()
        self._turn = asyncio.Lock()  # writers in the order they came (a Lock is fair)

    @property
    def held_bytes(self) -> int:
        """The sizes of the items waiting, together."""
        return self._bytes

    async def put(self, item: T) -> None:
        """Add `item` once it fits; drop it if the outbox is closed by then."""
        size = self._size(item)
        async with self._turn:  # uncontended: taken without a turn of the loop
            while not self._closed and not self._fits(size):
                self._changed.clear()
                await self._changed.wait()
            if not self._closed:
                self._items.append((item, size))
                self._bytes += size
                self._changed.set()

    async def get(self) -> T:
        """The oldest item, once there is one."""
        while not self._items:
            self._changed.clear()
            await self._changed.wait()
        item, size = self._items.popleft()
        self._bytes -= size
        self._changed.set()
        return item

    def close(self, last: T) -> None:
        """Drop every item waiting and hold `last` alone; later puts are dropped."""
        self._items.clear()
        self._items.append((last, 0))
        self._bytes = 0
        self._closed = True
        self._changed.set()

    def _fits(self, size: int) -> bool:
        if not self._items:
            return True
        return len(self._items) < self._messages and self._bytes + size <= self._max_bytes
