"""How far each node's clock is from the reader's, learned from membership records read
live.

A membership record is stamped with its node's clock (`heartbeat_ms`), and the gateway
and the nodes judge a node's silence on their own: a node whose clock is seconds behind
would look dead, one ahead would make every other node look behind it. A record read as
it comes tells `received - stamp`: the skew plus its delivery. The least of that over a
node's last records is its offset (the fastest delivery holds the least delay), and a
stamp plus the offset is the time on the reader's clock. A backlog read late (after a
pause of the reader) does not raise it; a node's clock set back counts once its last
`KEPT` records show it. The reader's own clock stepped (NTP, a resumed machine) moves
every offset with it at once, seen against the monotonic clock; a node's new process
(another incarnation, maybe on another machine) starts anew.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from runtime.clock import wall_clock_ms

__all__ = ["KEPT", "STEP_MS", "ClockOffsets"]

KEPT = 16  # a node's latest offsets the least is taken over
# a change of the reader's wall clock against its monotonic one that is a step (NTP steps
# from 128 ms; a thread preempted between the two reads must not look like one)
STEP_MS = 1000


class ClockOffsets:
    """Each node's clock offset (ms to add to its stamps), from the records read live;
    `wall` (ms) and `monotonic` (s), read together, tell the reader's own clock steps."""

    def __init__(
        self,
        wall: Callable[[], int] = wall_clock_ms,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._wall = wall
        self._monotonic = monotonic
        self._seen: dict[str, collections.deque[int]] = {}
        self._incarnations: dict[str, str] = {}
        self._wall_less_monotonic: int | None = None

    def heard(self, node_id: str, stamp_ms: int, received_ms: int, incarnation: str = "") -> None:
        """A record of `node_id`'s process `incarnation`, stamped `stamp_ms`, arrived at
        `received_ms` (the reader's wall clock)."""
        self._follow_own_clock()
        if self._incarnations.get(node_id, incarnation) != incarnation:
            self._seen.pop(node_id, None)  # another process: maybe another machine's clock
        self._incarnations[node_id] = incarnation
        seen = self._seen.setdefault(node_id, collections.deque(maxlen=KEPT))
        seen.append(received_ms - stamp_ms)

    def on_own_clock(self, node_id: str, stamp_ms: int) -> int:
        """`stamp_ms` of the node's clock on the reader's (as it is until one is heard)."""
        seen = self._seen.get(node_id)
        return stamp_ms + min(seen) if seen else stamp_ms

    def forget(self, node_id: str) -> None:
        self._seen.pop(node_id, None)
        self._incarnations.pop(node_id, None)

    def _follow_own_clock(self) -> None:
        """Move every offset by a step of the reader's wall clock since the last record."""
        wall_less_monotonic = self._wall() - int(self._monotonic() * 1000)
        before, self._wall_less_monotonic = self._wall_less_monotonic, wall_less_monotonic
        if before is None or abs(wall_less_monotonic - before) < STEP_MS:
            return
        step = wall_less_monotonic - before
        for node_id, seen in self._seen.items():
            self._seen[node_id] = collections.deque((o + step for o in seen), maxlen=KEPT)
