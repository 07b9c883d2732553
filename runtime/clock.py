"""The one wall clock every part reads, and its type: time is a parameter everywhere else.

Window retention, heartbeats, freshness and pipeline status all take a `Clock` so tests
can move time; `wall_clock_ms` is the default each of them is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Clock", "wall_clock_ms"]

Clock = Callable[[], int]  # ms since the epoch


def wall_clock_ms() -> int:
    """Now, in whole ms since the epoch."""
    return time.time_ns() // 1_000_000
