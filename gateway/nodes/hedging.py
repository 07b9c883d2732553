"""What the gateway learns from its own calls to each node: how long to wait for an answer
before hedging, and whether the node has stopped answering (suspect).

The hedge delay of a node is its smoothed latency plus four mean deviations (Jacobson's
estimator, as TCP times its retransmissions: about the p99 of a steady node), bounded by
STATEFED_GATEWAY_HEDGE_MIN_MS and STATEFED_GATEWAY_HEDGE_MAX_MS; a node that has not
answered yet gets the max. Only answered reads are samples (an `atLeast` read waits on
purpose, and is not one).

A node that leaves STATEFED_GATEWAY_SUSPECT_CALLS calls in a row without an answer (a call
timed out, or was abandoned after waiting at least the node's delay because a hedge
answered first) is suspect for STATEFED_GATEWAY_SUSPECT_MS; after that it is asked again,
and one more call without an answer makes it suspect again at once. Any answer clears it.
Suspicion from missed heartbeats is the routing table's (`NodeInfo.suspect`).

Time is a parameter (the event loop's clock, in seconds), so tests drive it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import GatewayConfig

__all__ = ["NodeWatch"]

_MAX_NODES = 4096  # node ids come from membership; forget them all past this many
_GAIN = 1 / 8  # weight of a new sample in the smoothed latency (RFC 6298)
_VARIANCE_GAIN = 1 / 4  # and in its mean deviation
_DEVIATIONS = 4


@dataclass
class _Seen:
    latency_s: float | None = None  # smoothed
    deviation_s: float = 0.0  # mean deviation of the samples from latency_s
    unanswered: int = 0  # calls in a row without an answer
    suspect_until: float = 0.0


class NodeWatch:
    """Per node id: the hedge delay and whether it is suspect, from the calls reported."""

    def __init__(self, config: GatewayConfig) -> None:
        self._min_s = config.hedge_min_ms / 1000.0
        self._max_s = config.hedge_max_ms / 1000.0
        self._suspect_calls = config.suspect_calls
        self._suspect_s = config.suspect_ms / 1000.0
        self._nodes: dict[str, _Seen] = {}
        self.hedged_reads = 0  # standby requests started to race a slow owner (metrics)

    def hedged(self, requests: int) -> None:
        """`requests` standby requests were started to race an owner past its delay."""
        self.hedged_reads += requests

    def delay(self, node_id: str) -> float:
        """Seconds to wait for `node_id` before asking another copy too."""
        seen = self._nodes.get(node_id)
        if seen is None or seen.latency_s is None:
            return self._max_s
        estimate = seen.latency_s + _DEVIATIONS * seen.deviation_s
        return min(self._max_s, max(self._min_s, estimate))

    def answered(self, node_id: str, latency_s: float | None) -> None:
        """The node answered (with a latency sample, or None when the call waited on
        purpose or the answer was an error): it is not suspect."""
        seen = self._seen(node_id)
        seen.unanswered = 0
        seen.suspect_until = 0.0
        if latency_s is None:
            return
        if seen.latency_s is None:
            seen.latency_s, seen.deviation_s = latency_s, latency_s / 2
            return
        error = abs(seen.latency_s - latency_s)
        seen.deviation_s += _VARIANCE_GAIN * (error - seen.deviation_s)
        seen.latency_s += _GAIN * (latency_s - seen.latency_s)

    def unanswered(self, node_id: str, now: float) -> None:
        """A call to the node got no answer (timed out or outraced after its delay)."""
        seen = self._seen(node_id)
        seen.unanswered += 1
        if seen.unanswered >= self._suspect_calls:
            seen.suspect_until = now + self._suspect_s

    def suspect(self, node_id: str, now: float) -> bool:
        """Whether calls to the node should not be made (until `suspect_until`)."""
        seen = self._nodes.get(node_id)
        return seen is not None and now < seen.suspect_until

    def _seen(self, node_id: str) -> _Seen:
        seen = self._nodes.get(node_id)
        if seen is None:
            if len(self._nodes) >= _MAX_NODES:
                self._nodes.clear()
            seen = self._nodes[node_id] = _Seen()
        return seen
