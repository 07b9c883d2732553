"""How far each node's clock is from the reader's, learned from membership records read
live.

A membership record is stamped with its node's clock (`heartbeat_ms`), and the gateway
and the nodes judge a node's silence on their own: a node whose clock is seconds behind
would look dead, one ahead would make every other node look behind it. A record read as
it comes tells `received - stamp`: the skew plus its delivery. The least of that over a
node's last records is its offset (the fastest delivery holds the least delay), and a
stamp plus the offset is the time on the reader's clock. A backlog read late (after a
pause of the reader) does not raise it; a clock set back counts once the node's last
`KEPT` records show it.
"""

from __future__ import annotations

import collections

__all__ = ["KEPT", "ClockOffsets"]

KEPT = 16  # a node's latest offsets the least is taken over


class ClockOffsets:
    """Each node's clock offset (ms to add to its stamps), from the records read live."""

    def __init__(self) -> None:
        self._seen: dict[str, collections.deque[int]] = {}

    def heard(self, node_id: str, stamp_ms: int, received_ms: int) -> None:
        """A record of `node_id` stamped `stamp_ms` arrived at `received_ms`."""
        seen = self._seen.setdefault(node_id, collections.deque(maxlen=KEPT))
        seen.append(received_ms - stamp_ms)

    def on_own_clock(self, node_id: str, stamp_ms: int) -> int:
        """`stamp_ms` of the node's clock on the reader's (as it is until one is heard)."""
        seen = self._seen.get(node_id)
        return stamp_ms + min(seen) if seen else stamp_ms

    def forget(self, node_id: str) -> None:
        self._seen.pop(node_id, None)
