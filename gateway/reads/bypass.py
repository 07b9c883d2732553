"""When the gateway cache is not worth asking: lookups that rarely hit skip it.

Looking a lookup's keys up in the cache costs the gateway's CPU on every request (the keys
grouped by partition, counted for admission, tested for currency; on a miss, each tested
for a fill). A hit saves a node read, which costs far more; but when few lookups hit
(access spread over far more keys than the cache holds, keys absent from the view), the
looks cost more than the hits save, and the gateway with its cache is slower than without.

So the cache keeps the share of looked-up keys it answered over the last `WINDOW_KEYS`
keys looked up (the last `WINDOW_KEYS / SAMPLE_EVERY` while sampling). While that share is
below `PAYS_BELOW`, only one request in `SAMPLE_EVERY` looks in the cache; the others read
the nodes as with the cache off (their answers still raise the floor a hit must not answer
below, `GatewayCache.observe`). The requests that look keep the share measured, and count
their keys for admission, so when access turns skewed the hot keys are still admitted, the
share rises, and every request looks again.
"""

from __future__ import annotations

__all__ = ["PAYS_BELOW", "SAMPLE_EVERY", "WINDOW_KEYS", "Bypass"]

PAYS_BELOW = 0.05  # hits per key looked up below which a look costs more than it saves
SAMPLE_EVERY = 16  # while below: one request in this many looks
WINDOW_KEYS = 512  # keys looked up between two judgements of the share


class Bypass:
    """Whether a request looks in the cache (`looks`), from the share of looked-up keys
    that hit (`counted`)."""

    def __init__(self) -> None:
        self._every = 1  # every request looks until a window says otherwise
        self._turn = 0
        self._keys = 0
        self._hits = 0
        self.skipped = 0  # requests that did not look

    @property
    def sampling(self) -> bool:
        """Whether only one request in `SAMPLE_EVERY` looks now."""
        return self._every > 1

    def looks(self) -> bool:
        """Whether this request looks in the cache."""
        if self._every == 1:
            return True
        self._turn += 1
        if self._turn % self._every == 0:
            return True
        self.skipped += 1
        return False

    def counted(self, hits: int, misses: int) -> None:
        """Keys a look answered (`hits`) and not (`misses`)."""
        self._hits += hits
        self._keys += hits + misses
        # while sampling, a window as long in requests, not in looks: a turn to skewed
        # access is seen within about as many requests as a turn away from it
        window = WINDOW_KEYS if self._every == 1 else WINDOW_KEYS // SAMPLE_EVERY
        if self._keys >= window:
            self._every = 1 if self._hits >= PAYS_BELOW * self._keys else SAMPLE_EVERY
            self._keys = self._hits = 0
