"""Window retention: the node's clock and the horizon at or before which windows expire.

The clock is a parameter (`Clock`, ms since the epoch) so tests can move time; the
materializer purges expired windows with it and the subgraph hides them with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from schema import View

__all__ = ["Clock", "expiry_horizon", "wall_clock_ms"]

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    """Now, in whole ms since the epoch."""
    return time.time_ns() // 1_000_000


def expiry_horizon(view: View, now_ms: int) -> int:
    """Windows of `view` that end at or before this are expired: `now - retention`."""
    if view.window is None:
        raise ValueError(f"view {view.name} ({view.kind.value}) has no windows")
    return now_ms - view.window.retention_ms
