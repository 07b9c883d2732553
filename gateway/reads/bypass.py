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
below `PAYS_BELOW`, only one request in `SAMPLE_EVERY`, drawn at random, looks in the
cache; the others read the nodes as with the cache off (their answers still raise the floor
a hit must not answer below, `GatewayCache.observe`), and a single-key lookup among them
still counts its key for admission (`GatewayCache.count`). The requests that look keep the
share measured: when access turns skewed, a hot key is admitted, filled at the next look
that misses it, and hit by the looks after, the share rises, and every request looks
again. A cold cache starts this way too: its first window is all misses, so it samples at
once, and warms through the looks.

Every skipping request counts, although counting is most of what it still pays (1.8 us,
timed in the gateway under load, and on a loaded gateway a microsecond a request shows
several times over in its CPU: fewer node reads coalesced, fewer answers per system call;
the defaults cost 4-7% more CPU than the cache off on lookups that rarely hit). Counting
only at the looks makes a key wait 16 times as many asks to be admitted: in `make bench`,
after the shapes step had left the cache sampling, the point step's 2,000 keys asked in
turn were served at 1,602 requests/s at one connection instead of 4,245 while the cache
warmed.

The looks are drawn at random, not every n-th request: access that cycles through keys in
an order would otherwise meet the same keys at every look (2,000 keys asked in turn, looked
up every 16th request: the same 125 keys, and the others never filled).
"""

from __future__ import annotations

import random

__all__ = ["PAYS_BELOW", "SAMPLE_EVERY", "WINDOW_LOOKUPS", "Bypass"]

PAYS_BELOW = 0.05  # lookups answered whole per lookup below which a look costs more than it saves
SAMPLE_EVERY = 16  # while below: one request in this many looks
WINDOW_LOOKUPS = 512  # lookups between two judgements of the share


class Bypass:
    """Whether a request looks in the cache (`looks`), from the share of lookups it
    answered whole (`counted`)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        """`rng` draws the requests that look while sampling; seed one to replay the draws."""
        self._draw = (rng or random.Random()).random
        self._every = 1  # every request looks until a window says otherwise
        self._lookups = 0
        self._whole = 0
        self.skipped = 0  # requests that did not look

    @property
    def sampling(self) -> bool:
        """Whether only one request in `SAMPLE_EVERY` looks now."""
        return self._every > 1

    def looks(self) -> bool:
        """Whether this request looks in the cache."""
        if self._every == 1 or self._draw() * self._every < 1.0:
            return True
        self.skipped += 1
        return False

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
