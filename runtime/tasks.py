"""Ending asyncio tasks a part started, without losing what the one ending them must know.

`cancelled(tasks, what)` cancels them and waits until each ended. Not `await task` under a
suppressed CancelledError: that also swallows a cancellation of the caller itself (a client
gone while its subscription tears down, a shutdown cancelled meanwhile), which then ran on
as if never cancelled. A task that had failed is logged as `what`'s, not dropped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

__all__ = ["cancelled"]

log = logging.getLogger(__name__)


async def cancelled(tasks: Collection[asyncio.Task[None]], what: str) -> None:
    """Cancel `tasks` and wait until every one ended; log any that had failed."""
    running = [task for task in tasks if not task.done()]
    for task in running:
        task.cancel()
    if running:  # (asyncio.wait would yield once even for tasks that ended)
        await asyncio.wait(running)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: a task failed", what, exc_info=task.exception())
