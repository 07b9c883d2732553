"""Window retention: the node's clock and the horizon at or before which windows expire.

The clock is a parameter (`Clock`, ms since the epoch) so tests can move time; the
materializer purges expired windows with it and the subgraph hides them with it.
"""

from __future__ import annotations

from schema import View

__all__ = ["expiry_horizon"]


def expiry_horizon(view: View, now_ms: int) -> int:
    """Windows of `view` that end at or before this are expired: `now - retention`."""
    if view.window is None:
        raise ValueError(f"view {view.name} ({view.kind.value}) has no windows")
    return now_ms - view.window.retention_ms
