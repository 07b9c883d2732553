"""When the gateway cache is not worth asking: lookups that rarely hit skip it.

Looking a lookup's keys up in the cache costs the gateway's CPU on every request (the keys
grouped by partition, counted for admission, tested for currency; on a miss, each tested
for a fill). What a look saves is a node read, and only a lookup the cache answers whole
saves one: a lookup of ten keys of which nine hit still asks a node for the tenth, and pays
for ten looks besides. So when few lookups are answered whole from memory (access spread
over far more keys than the cache holds, keys absent from the view, multi-key lookups that
always miss a key), the looks cost more than the hits save, and the gateway with its cache
is slower than without.

So the cache keeps the share of lookups it answered whole over the last `WINDOW_LOOKUPS`
lookups (the last `WINDOW_LOOKUPS / SAMPLE_EVERY` while sampling). While that share is
below `PAYS_BELOW`, only one request in `SAMPLE_EVERY` looks in the cache; the others read
the nodes as with the cache off (their answers still raise the floor a hit must not answer
below, `GatewayCache.observe`). The requests that look keep the share measured, and the key
of a single-key lookup that did not look is counted for admission (`GatewayCache.count`)
one time in `COUNT_EVERY`, drawn at random (`counts`): when access turns skewed, a hot key
is admitted, filled at the next look that misses it, and hit by the looks after, the share
rises, and every request looks again. A cold cache starts this way too: its first window
is all misses, so it samples at once, and warms through the looks.

Counting is sampled because it was most of what a request that skips the cache still paid:
timed in the gateway under load (uniform lookups over a million keys, 32 connections),
counting took 1.8 us and `observe` 0.7 us a request. With looks switched off but both kept,
the gateway used 6-9% more CPU per request than with its cache off, against 2% with both
off too: a loaded gateway slowed a little coalesces fewer node reads and writes fewer
answers per system call, so small costs grow. A key asked often is counted often all the
same; one asked a few times while hits are rare is the key not worth admitting.
The draw is random, not every n-th request: access that cycles through keys in an order
(2,000 keys asked in turn) would meet a fixed stride with the same keys each time and never
count the others.
"""

from __future__ import annotations

import random

__all__ = ["COUNT_EVERY", "PAYS_BELOW", "SAMPLE_EVERY", "WINDOW_LOOKUPS", "Bypass"]

PAYS_BELOW = 0.05  # lookups answered whole per lookup below which a look costs more than it saves
SAMPLE_EVERY = 16  # while below: one request in this many looks
WINDOW_LOOKUPS = 512  # lookups between two judgements of the share
COUNT_EVERY = 4  # a request that did not look counts its key one time in this many


class Bypass:
    """Whether a request looks in the cache (`looks`), from the share of lookups it
    answered whole (`counted`)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        """`rng` draws the requests that count (`counts`); seed one to replay the draws."""
        self._draw = (rng or random.Random()).random
        self._every = 1  # every request looks until a window says otherwise
        self._turn = 0
        self._lookups = 0
        self._whole = 0
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

    def counts(self) -> bool:
        """Whether a request that did not look counts its key for admission: one in
        `COUNT_EVERY`, at random."""
        return self._draw() * COUNT_EVERY < 1.0

    def counted(self, whole: bool) -> None:
        """One lookup that looked: answered `whole` from memory, or not (a node read it,
        or part of it)."""
        self._whole += whole
        self._lookups += 1
        # while sampling, a window as long in requests, not in looks: a turn to skewed
        # access is seen within about as many requests as a turn away from it
        window = WINDOW_LOOKUPS if self._every == 1 else WINDOW_LOOKUPS // SAMPLE_EVERY
        if self._lookups >= window:
            self._every = 1 if self._whole >= PAYS_BELOW * self._lookups else SAMPLE_EVERY
            self._lookups = self._whole = 0
