"""How late the event loop runs what is due: a pause of the loop, measured from inside.

`LoopLag` wakes every `interval_s` and reports how much later than asked it woke (`observe`,
in seconds) to a callback, such as a histogram. A loop busy with one long callback (a
garbage collection, a slow request, a large JSON document) shows as one late wake-up of
that length; requests waiting behind it waited as long. At 10 ms it costs about a hundred
wake-ups a second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runtime.tasks import cancelled

__all__ = ["LoopLag"]


class LoopLag:
    """Measures the lateness of the running loop's wake-ups from `start` to `stop`."""

    def __init__(self, observe: Callable[[float], None], interval_s: float = 0.01) -> None:
        self._observe = observe
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await cancelled([task], "the loop lag measurement")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self._interval_s
            await asyncio.sleep(self._interval_s)
            self._observe(max(0.0, loop.time() - due))
