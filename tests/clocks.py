"""A clock of seconds the test moves by hand, for code that takes a `clock` callable
(`time.monotonic`'s place)."""

from __future__ import annotations


class HandClock:
    """Reads `now`, which only the test changes."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
