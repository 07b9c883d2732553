"""The node's lease on its ACTIVE copies: a node serves them unproved only while it is sure
the consumer group still assigns them to it.

A watchdog thread of the materializer renews the lease ten times a second, so a lease older
than its term means the whole process was paused (SIGSTOP, a GC pause, a swapping host, a
VM migration) or starved, librdkafka's heartbeat thread with it. Over such a gap the group
may have expired the node's session and given its partitions to another node, which may
already have answered newer values. A consumer loop that is merely slow, as in a long
rebalance callback, does not lapse it (the group heartbeats go on meanwhile); one stuck
for `APPLY_STALL_S` (node.changelog.materializer) does: its copies stopped applying, so what they
answer grows older while it looks current.

The lease then lapses: ACTIVE copies refuse unproved reads (NOT_OWNER, reason
LEASE_LAPSED) until the group confirms the assignment with an answer to a request sent
after the lapse (an offset commit, which the coordinator accepts only from a member of the
current generation).

The term is shorter than the group session (`SESSION_TIMEOUT_MS`) less a heartbeat interval,
so a node stops serving before its partitions can have moved. Time is monotonic: wall-clock
steps neither lapse nor extend it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Lease"]


class Lease:
    """Renewed by a watchdog thread of the holder; read by the threads that serve."""

    def __init__(self, term_s: float, clock: Callable[[], float] = time.monotonic):
        if term_s <= 0:
            raise ValueError(f"a lease term must be positive, not {term_s}")
        self.term_s = term_s
        self._clock = clock
        self._lock = threading.Lock()
        self._renewed = clock()
        self._lapsed_at: float | None = None  # set when found lapsed, until confirmed
        self.lapses = 0  # how often it lapsed since start, for /metrics and tests
        self.gap_s = 0.0  # the gap between renewals that lapsed it last

    def now(self) -> float:
        """The lease's clock: `confirm` takes a time read from it."""
        return self._clock()

    def begin(self) -> None:
        """The holder starts renewing: the term runs from now, whatever came before."""
        with self._lock:
            self._renewed = self._clock()
            self._lapsed_at = None

    def held(self) -> bool:
        """Whether ACTIVE copies may serve unproved reads now."""
        with self._lock:
            return self._lapsed_at is None and self._clock() - self._renewed <= self.term_s

    def renew(self) -> bool:
        """One tick of the holder's watchdog: True when the lease held and was renewed;
        False when it lapsed (now or before) and waits for `confirm`."""
        now = self._clock()
        with self._lock:
            if self._lapsed_at is None and now - self._renewed > self.term_s:
                self._lapsed_at = now
                self.lapses += 1
                self.gap_s = now - self._renewed
            if self._lapsed_at is not None:
                return False
            self._renewed = now
            return True

    def confirm(self, asked_at: float) -> bool:
        """The group confirmed the assignment by answering a request sent at `asked_at`
        (this lease's clock). It counts only if it was sent after the lapse: an answer to
        a request sent before the pause proves nothing about the time after it. Returns
        whether the lease holds again."""
        with self._lock:
            if self._lapsed_at is not None and asked_at >= self._lapsed_at:
                self._lapsed_at = None
                self._renewed = self._clock()
            return self._lapsed_at is None

    def waiting(self) -> bool:
        """Whether the lease lapsed and waits for `confirm`."""
        with self._lock:
            return self._lapsed_at is not None

    def lapsed_for_s(self) -> float | None:
        """Seconds since the lease lapsed; None while it holds."""
        with self._lock:
            if self._lapsed_at is not None:
                return self._clock() - self._lapsed_at
            over = self._clock() - self._renewed
            return over - self.term_s if over > self.term_s else None
