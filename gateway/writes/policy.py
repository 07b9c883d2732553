"""What a write through the `produce` mutation must respect besides its topic and key: an
event time the views can use, and a rate per principal.

Event time: an event stamped far in the future moves the pipeline's watermark past every
real event, which windowed views then drop as late (and it wins its key in `latest` views
for good), so it may be at most STATEFED_GATEWAY_PRODUCE_MAX_AHEAD_MS ahead of the
gateway's clock. An event older than every window its topic's windowed views still keep
(`WindowSpec.retention_ms`) would be dropped by them all, so it is refused too; a topic
without windowed views takes any past time. Times are the gateway's clock's, a parameter.

Rate: a token bucket per principal (`Principal.subject`) of STATEFED_GATEWAY_PRODUCE_RATE
records a second, holding as many, so a burst of that size passes after a quiet second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gateway.model.errors import BadRequestError, RateLimitedError
from gateway.model.timestamps import from_ms
from runtime.clock import Clock
from schema import View

__all__ = ["RateLimiter", "check_event_time"]

_AHEAD_VARIABLE = "STATEFED_GATEWAY_PRODUCE_MAX_AHEAD_MS"
_RATE_VARIABLE = "STATEFED_GATEWAY_PRODUCE_RATE"
_MAX_BUCKETS = 10_000  # principals remembered before full (idle) buckets are dropped


def check_event_time(views: Sequence[View], event_ms: int, now_ms: int, max_ahead_ms: int) -> None:
    """BadRequestError when `event_ms` is not after the epoch (a Kafka timestamp of 0 is
    "now" to the producer, and the pipeline reads no earlier time), too far ahead of
    `now_ms`, or older than every windowed view of the topic (`views`, all reading it)
    keeps."""
    if event_ms < 1:
        raise BadRequestError(
            views[0].name,
            f"eventTime {_shown(event_ms)} is not after 1970-01-01T00:00:00Z: Kafka "
            "timestamps and the views' event times are milliseconds since then",
        )
    if event_ms > now_ms + max_ahead_ms:
        raise BadRequestError(
            views[0].name,
            f"eventTime {_shown(event_ms)} is more than {max_ahead_ms} ms ahead "
            f"of the gateway's clock ({from_ms(now_ms).isoformat()}; set by {_AHEAD_VARIABLE}):"
            " a future event would make every real event of the windowed views late",
        )
    windowed = [v for v in views if v.window is not None]
    if not windowed:
        return
    keeper = max(windowed, key=lambda v: v.window.retention_ms if v.window else 0)
    assert keeper.window is not None
    oldest = now_ms - keeper.window.retention_ms
    if event_ms < oldest:
        raise BadRequestError(
            keeper.name,
            f"eventTime {_shown(event_ms)} is older than the view keeps windows "
            f"(retention {keeper.window.retention_ms} ms, so nothing before "
            f"{from_ms(oldest).isoformat()}): the event would be dropped",
        )


def _shown(event_ms: int) -> str:
    """`event_ms` in ISO 8601, or as milliseconds where no date holds it."""
    try:
        return from_ms(event_ms).isoformat()
    except OverflowError:
        return f"{event_ms} ms since the epoch"


class RateLimiter:
    """Token buckets per principal: `rate` records a second, bursts of up to `rate`;
    `clock` gives now in ms."""

    def __init__(self, rate: int, clock: Clock) -> None:
        if rate < 1:
            raise ValueError(f"a rate of at least 1 record per second, got {rate}")
        self.rate = rate
        self._clock = clock
        self._buckets: dict[str, tuple[float, int]] = {}  # subject -> (tokens, at ms)

    def take(self, subject: str) -> None:
        """Spend one of `subject`'s tokens; RateLimitedError when it has none left."""
        now = self._clock()
        tokens = self._tokens(subject, now)
        if tokens < 1.0:
            retry_ms = math.ceil((1.0 - tokens) * 1000 / self.rate)
            raise RateLimitedError(subject, self.rate, retry_ms, _RATE_VARIABLE)
        if len(self._buckets) >= _MAX_BUCKETS and subject not in self._buckets:
            self._forget_idle(now)
        self._buckets[subject] = (tokens - 1.0, now)

    def _tokens(self, subject: str, now: int) -> float:
        tokens, at = self._buckets.get(subject, (float(self.rate), now))
        return min(float(self.rate), tokens + max(0, now - at) * self.rate / 1000)

    def _forget_idle(self, now: int) -> None:
        """Drop the buckets that have refilled: forgetting them changes nothing."""
        for subject in [s for s in self._buckets if self._tokens(s, now) >= self.rate]:
            del self._buckets[subject]
